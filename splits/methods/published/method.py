"""`--method published`: a shipped split (`episodes.records.published_splits`), as a file.

Tables that print class indices (the ATG paper's) are named from `--class-names FILE` or the
`--dataset` spec's class order when given, else by their index convention where its names are
known offline (CIFAR-100, EMNIST); otherwise the file keeps the indices as printed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from episodes.records.published_splits import list_published, load_published
from episodes.util.config_flags import ConfigError, config_field
from splits.class_names import ClassListError
from splits.methods import register_method
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod

__all__ = ["PublishedMethod", "PublishedParameters"]


@dataclass(frozen=True)
class PublishedParameters:
    """Which shipped split (`python -m splits.published list`)."""

    name: str = config_field(
        metavar="NAME",
        help="a shipped split, e.g. meta_dataset/ilsvrc_2012, atg/lfw10_D0.96 "
        "(python -m splits.published list)",
    )

    def __post_init__(self) -> None:
        if self.name not in list_published():
            shown = ", ".join(list_published()[:6])
            raise ConfigError(f"no published split {self.name!r} (e.g. {shown}, ...)")


def check_classes_present(name: str, split, names: list[str], inputs: SplitInputs) -> None:
    """A published split made for another dataset (e.g. Meta-Dataset's Omniglot alphabets
    given the embedded glyph dataset's) is refused: its file would name classes the dataset
    does not have, and every reader of it would fail later."""
    known = set(names)
    listed = [c for part in ("train", "valid", "test") for c in getattr(split, part)]
    absent = [c for c in listed if c not in known]
    if absent:
        given = "--dataset" if inputs.dataset is not None else "--class-names"
        where = inputs.dataset if inputs.dataset is not None else inputs.class_names
        raise ClassListError(
            f"--name {name}: {len(absent)} of its {len(listed)} classes are not classes of "
            f"{given} {where} (e.g. {', '.join(absent[:3])}): it is the split of another "
            f"dataset; leave out {given} to write it as published"
        )


@register_method
class PublishedMethod(SplitMethod):
    """Meta-Dataset's splits, FC100 and the ATG paper's taskset tables, as split files."""

    name = "published"
    summary = "a published split (Meta-Dataset, FC100, the ATG paper's tables)"
    Parameters = PublishedParameters
    reads = ("dataset", "class_names")

    def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
        given = inputs.dataset is not None or inputs.class_names is not None
        names = inputs.classes().names if given else None
        split = load_published(self.parameters.name, names)
        if names is not None:
            check_classes_present(self.parameters.name, split, names, inputs)
        if inputs.dataset_name:
            split = replace(split, dataset=inputs.dataset_name)
        file_name = self.parameters.name.replace("/", "_") + ".json"
        return [PlannedSplit(split.dataset, file_name, lambda: split)]
