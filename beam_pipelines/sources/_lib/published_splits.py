"""Class splits for the Meta-Dataset sources: the published lists, a `--split-file`, or seeded.

By default a source uses the split list Meta-Dataset publishes for it, shipped once with the
toolkit (`episodes/records/published/meta_dataset/<dataset>.json`, read through
`episodes.records.published_splits`). Class names must match the data exactly: a listed class missing from the
data, or a class in the data that no list names, stops the conversion with an error naming it.
`--split-file PATH` replaces the published list; it is read by the one split-file parser,
`episodes.records.split_file.read_split_file` (Meta-Dataset's plain train / valid / test name lists and
this toolkit's split files alike). `--random-split` (or a dataset without a published list)
draws a seeded split by fractions (70/15/15 by default, Meta-Dataset section 3.1).

Class ids follow the list order: train classes in the order the file lists them, then valid,
then test. For the published lists this reproduces the reference dataset specs' class ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from beam_pipelines.sources._lib.source_config import SplitSeedConfig, option
from beam_pipelines.sources.base import ClassInfo, LayoutError, split_by_fractions
from episodes.records.dataset_spec import Split
from episodes.records.published_splits import PUBLISHED_DIR, list_published, load_published
from episodes.records.split_file import SplitFile, SplitFileError, read_split_file

__all__ = [
    "check_lists_match",
    "ClassSplits",
    "DEFAULT_FRACTIONS",
    "ListedSplitConfig",
    "load_split_lists",
    "PUBLISHED_GROUP",
    "published_split_name",
    "random_split_lists",
    "read_label_list",
    "REFERENCE_DATA",
    "resolve_class_splits",
    "split_lists",
    "SPLIT_ORDER",
    "split_provenance",
]

REFERENCE_DATA = Path(__file__).resolve().parents[1] / "reference_data"
PUBLISHED_GROUP = "meta_dataset"  # episodes/records/published/meta_dataset/<dataset>.json
DEFAULT_FRACTIONS = (0.7, 0.15, 0.15)
SPLIT_ORDER = (Split.TRAIN, Split.VALID, Split.TEST)


@dataclass(frozen=True)
class ListedSplitConfig(SplitSeedConfig):
    """Options of the sources whose class split is a published Meta-Dataset list."""

    split_file: str | None = option(
        None,
        "JSON with train/valid/test class-name lists replacing the published Meta-Dataset split "
        "(class names must match the data exactly)",
        metavar="FILE",
    )
    random_split: bool = option(
        False, "ignore the published split; draw a seeded split by fractions (70/15/15)"
    )

    title: ClassVar[str] = "published class split"


@dataclass(frozen=True)
class ClassSplits:
    """Class names per split, in class-id order, and where the lists came from."""

    lists: dict[Split, list[str]]
    origin: str  # "published:<file>", "file:<path>" or "random:seed=<n>,fractions=<...>"
    sha256: str | None = None

    def classes(self) -> list[ClassInfo]:
        return [ClassInfo(name, split) for split in SPLIT_ORDER for name in self.lists[split]]

    def counts(self) -> dict[str, int]:
        return {split.value: len(self.lists[split]) for split in SPLIT_ORDER}


def published_split_name(dataset: str) -> str | None:
    """The `episodes.records.published_splits` name of `dataset`'s published Meta-Dataset split, if shipped."""
    name = f"{PUBLISHED_GROUP}/{dataset}"
    return name if name in list_published() else None


def split_lists(split: SplitFile) -> dict[Split, list[str]]:
    """The class-name lists of a (named) split file, keyed by Split."""
    return {s: split.classes(s.value) for s in SPLIT_ORDER}


def load_split_lists(path: str | Path, dataset: str | None = None) -> dict[Split, list[str]]:
    """Train/valid/test class-name lists of a `--split-file`, read by the one split-file
    parser; LayoutError naming the path when it is not a split file, or is another dataset's
    (a file of plain lists names its dataset with "dataset", or not at all)."""
    try:
        split = read_split_file(path).named()
    except SplitFileError as exc:
        raise LayoutError(f"--split-file: {exc}") from None
    implicit = split.method == "listed" and split.dataset == Path(path).stem
    if dataset and split.dataset != dataset and not implicit:
        raise LayoutError(f"{path}: split file is for dataset {split.dataset!r}, not {dataset!r}")
    return split_lists(split)


def random_split_lists(
    names: Sequence[str], fractions: Sequence[float], seed: int
) -> dict[Split, list[str]]:
    """Seeded split of the found class names; names sorted within each split."""
    assignment = split_by_fractions(names, fractions, seed)
    return {split: sorted(n for n, s in assignment.items() if s == split) for split in SPLIT_ORDER}


def resolve_class_splits(
    dataset: str,
    found: Sequence[str],
    config: ListedSplitConfig,
    where: str | Path,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
) -> ClassSplits:
    """Splits for the classes `found` in the data under `where`, as the config asks.

    Raises LayoutError naming the class when a listed class is missing from the data or a class
    of the data is in no list."""
    split_file = config.split_file
    published = published_split_name(dataset)
    if split_file:
        lists = load_split_lists(split_file, dataset)
        origin, digest = f"file:{Path(split_file).resolve()}", _sha256(Path(split_file))
    elif config.random_split or published is None:
        seed = config.split_seed
        lists = random_split_lists(found, fractions, seed)
        origin = f"random:seed={seed},fractions={','.join(f'{f:g}' for f in fractions)}"
        digest = None
    else:
        lists = split_lists(load_published(published))
        origin = f"published:{published}"
        digest = _sha256(PUBLISHED_DIR / f"{published}.json")
    check_lists_match(lists, found, where, origin)
    return ClassSplits(lists, origin, digest)


def check_lists_match(
    lists: dict[Split, list[str]], found: Sequence[str], where: str | Path, origin: str
) -> None:
    """Every listed class is in the data and every class of the data is listed."""
    found_set = set(found)
    listed = [n for split in SPLIT_ORDER for n in lists[split]]
    missing = [n for n in listed if n not in found_set]
    if missing:
        raise LayoutError(
            f"{where}: class {missing[0]!r} of the split list ({origin}) is missing from the data"
            + (f" ({len(missing)} missing in all, also {missing[1:4]})" if len(missing) > 1 else "")
        )
    listed_set = set(listed)
    extra = sorted(n for n in found_set if n not in listed_set)
    if extra:
        raise LayoutError(
            f"{where}: class {extra[0]!r} found in the data is in no list of the split ({origin})"
            + (f" ({len(extra)} in all, also {extra[1:4]})" if len(extra) > 1 else "")
            + "; pass --split-file or --random-split"
        )


def split_provenance(splits: ClassSplits) -> dict:
    """What the dataset spec records about where its splits came from."""
    out = {"split_origin": splits.origin, "classes_per_split": splits.counts()}
    if splits.sha256:
        out["split_sha256"] = splits.sha256
    return out


def read_label_list(file_name: str) -> list[str]:
    """A reference label list (one name a line, `#` comment lines skipped), e.g.
    VggFlower_labels.txt."""
    path = REFERENCE_DATA / file_name
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
