"""Meta-Dataset's published splits as split files (`episodes/records/published/meta_dataset/*.json`).

`python -m splits.published_meta_dataset --reference DIR [--output ...]` reads the reference
files as published (`splits/<dataset>_splits.json` for the flat datasets; the ILSVRC-2012 and
Omniglot dataset specs, whose splits are semantic) and writes one split file per dataset.
ILSVRC-2012 is rebuilt with `semantic.dag_split` from the union of the spec's per-split WordNet
sub-graphs (roots 'carnivore' / 'device') and Omniglot with `semantic.superclass_split`
(25 / 5 / 20 alphabets in spec order); both are checked against the spec's own lists.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from episodes.records.published_splits import PUBLISHED_DIR
from episodes.records.split_file import SPLITS, SplitFile
from episodes.util.cli_errors import UserError, run_main, user_faults
from episodes.util.json_files import read_json_object
from splits.methods.semantic.algorithm import (
    ILSVRC_ROOTS,
    OMNIGLOT_COUNTS,
    dag_split,
    superclass_split,
)
from splits.published import regeneration_parser, write_published_files

__all__ = [
    "DEFAULT_OUT_DIR",
    "SOURCE",
    "ReferenceDataError",
    "build_parser",
    "flat_split",
    "ilsvrc_split",
    "main",
    "omniglot_split",
    "reference_splits",
]

DEFAULT_OUT_DIR = PUBLISHED_DIR / "meta_dataset"
SOURCE = (
    "Meta-Dataset (Triantafillou et al. 2020), google-research/meta-dataset "
    "meta_dataset/dataset_conversion/"
)


class ReferenceDataError(UserError, ValueError):
    """A reference file that is missing or does not hold what Meta-Dataset published."""


def _read_json(path: Path, *fields: str) -> dict:
    """The JSON object of a reference file, which must hold `fields`."""
    data = read_json_object(path, ReferenceDataError, f"reference file {path} does not exist")
    missing = [f for f in fields if f not in data]
    if missing:
        raise ReferenceDataError(f"{path}: missing {', '.join(missing)}")
    return data


def _ordered_names(mapping: dict[str, str]) -> list[str]:
    return [mapping[k] for k in sorted(mapping, key=int)]


def flat_split(path: Path) -> SplitFile:
    """A `<dataset>_splits.json` reference file ({train, valid, test: [names]})."""
    data = _read_json(path, *SPLITS)
    dataset = path.name.removesuffix("_splits.json")
    return SplitFile(
        dataset=dataset,
        method="published",
        **{s: [str(n) for n in data[s]] for s in SPLITS},
        source=SOURCE + "splits/" + path.name,
    )


def ilsvrc_split(spec_path: Path) -> SplitFile:
    """ILSVRC-2012 leaves under carnivore (valid) / device (test), checked against the spec."""
    spec = _read_json(spec_path, "split_subgraphs", "class_names", "name")
    parents: dict[str, list[str]] = {}
    spec_leaves: dict[str, set[str]] = {}
    for split_key, nodes in spec["split_subgraphs"].items():
        spec_leaves[split_key] = {n["wn_id"] for n in nodes if not n["children_ids"]}
        for node in nodes:
            known = parents.setdefault(node["wn_id"], [])
            known.extend(p for p in node["parents_ids"] if p not in known)
    class_order = _ordered_names(spec["class_names"])
    split = dag_split(
        parents,
        ILSVRC_ROOTS["valid"],
        ILSVRC_ROOTS["test"],
        leaves=class_order,
        dataset=str(spec["name"]),
    )
    for ours, key in zip(SPLITS, ("TRAIN", "VALID", "TEST")):
        if set(getattr(split, ours)) != spec_leaves[key]:
            raise ReferenceDataError(
                f"{spec_path}: {key} leaves differ from the carnivore/device rule"
            )
    split.method = "published"
    split.source = SOURCE + "dataset_specs/" + spec_path.name
    return split


def omniglot_split(spec_path: Path) -> SplitFile:
    """Omniglot alphabets 25 / 5 / 20 in spec order, checked against the spec's split sizes."""
    spec = _read_json(
        spec_path,
        "superclass_names",
        "classes_per_superclass",
        "class_names",
        "superclasses_per_split",
        "name",
    )
    supers = _ordered_names(spec["superclass_names"])
    per_super = [int(spec["classes_per_superclass"][str(i)]) for i in range(len(supers))]
    names = _ordered_names(spec["class_names"])
    if sum(per_super) != len(names):
        raise ReferenceDataError(
            f"{spec_path}: classes_per_superclass do not add up to the class count"
        )
    mapping: dict[str, str] = {}
    start = 0
    for sup, count in zip(supers, per_super):
        for name in names[start : start + count]:
            mapping[name] = sup
        start += count
    counts = tuple(int(spec["superclasses_per_split"][k]) for k in ("TRAIN", "VALID", "TEST"))
    if counts != OMNIGLOT_COUNTS:
        raise ReferenceDataError(
            f"{spec_path}: superclasses_per_split {counts} != {OMNIGLOT_COUNTS}"
        )
    split = superclass_split(
        mapping, counts=counts, superclass_order=supers, dataset=str(spec["name"])
    )
    split.method = "published"
    split.source = SOURCE + "dataset_specs/" + spec_path.name
    return split


def reference_splits(reference_dir: str | Path) -> list[SplitFile]:
    """Every Meta-Dataset split that the reference folder defines."""
    root = Path(reference_dir)
    if not (root / "splits").is_dir() or not (root / "dataset_specs").is_dir():
        raise ReferenceDataError(
            f"{root} is not a Meta-Dataset reference folder (expected splits/ and dataset_specs/)"
        )
    out = [flat_split(p) for p in sorted((root / "splits").glob("*_splits.json"))]
    out.append(ilsvrc_split(root / "dataset_specs" / "ilsvrc_2012_dataset_spec.json"))
    out.append(omniglot_split(root / "dataset_specs" / "omniglot_dataset_spec.json"))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = regeneration_parser(
        "splits.published_meta_dataset",
        "Write Meta-Dataset's splits as split files.",
        DEFAULT_OUT_DIR,
    )
    parser.add_argument(
        "--reference",
        required=True,
        help="reference-data/meta-dataset folder (splits/, dataset_specs/)",
    )
    return parser


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    splits = reference_splits(args.reference)
    write_published_files(splits, args.output, lambda split: f"{split.dataset}.json")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
