"""Parse the ATG paper's taskset tables (App. A.6, Tables 6-11) into published split files.

`python -m splits.published_tables --paper PATH [--output episodes/records/published/atg]` writes
`<dataset>_D<R>.json` for CIFAR-100, mini-ImageNet, EMNIST, LFW10 and tiered-ImageNet at
D = 0.04, 0.32, 0.64, 0.96, keeping the class indices exactly as printed (with the index
convention; see `episodes.records.index_conventions`).  Each table row is checked: indices in range, no
duplicates, the three lists disjoint and covering every class.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from episodes.records.published_splits import PUBLISHED_DIR
from episodes.records.split_file import SplitFile
from episodes.util.cli_errors import UserError, run_main, user_faults
from splits.published import regeneration_parser, write_published_files

__all__ = [
    "DEFAULT_OUT_DIR",
    "PAPER",
    "TABLE_DATASETS",
    "TEXT_SIZE_NOTES",
    "TableDataset",
    "TableParseError",
    "build_parser",
    "main",
    "parse_tables",
    "published_file_name",
]

PAPER = "Arnold & Sha, 'Embedding Adaptation is Still Needed for Few-Shot Learning', appendix A.6"
DEFAULT_OUT_DIR = PUBLISHED_DIR / "atg"


@dataclass(frozen=True)
class TableDataset:
    key: str
    num_classes: int
    convention: str


# §5.1 describes other sizes than the tables print (the tables follow the floor(0.2 N) rule).
TEXT_SIZE_NOTES = {
    "emnist": "§5.1 text says 37 train / 12 valid / 13 test; Table 8 prints 38 / 12 / 12",
    "lfw10": "§5.1 text says 94 train / 32 valid / 32 test; Table 9 prints 96 / 31 / 31",
}
TABLE_DATASETS = {
    "CIFAR100": TableDataset("cifar100", 100, "cifar100_fine"),
    "mini-ImageNet": TableDataset("mini_imagenet", 100, "mini_imagenet_l2l"),
    "EMNIST": TableDataset("emnist", 62, "emnist_byclass"),
    "LFW10": TableDataset("lfw10", 158, "lfw10_sklearn"),
    "tiered-ImageNet": TableDataset("tiered_imagenet", 608, "tiered_imagenet_l2l"),
}
_ROW_SPLIT = {"Train": "train", "Validation": "valid", "Test": "test"}
_TABLE_RE = re.compile(r"^Table (\d+): Taskset partitions for (.+?)\.")
_SETTING_RE = re.compile(r"^D\s*=\s*([0-9.]+)$")


class TableParseError(UserError, ValueError):
    """The paper text does not hold the expected, complete tables."""


def parse_tables(text: str) -> list[SplitFile]:
    """All taskset partitions in the paper text, one SplitFile per (dataset, D)."""
    found: dict[tuple[str, str], dict[str, list[int]]] = {}
    tables: dict[tuple[str, str], str] = {}
    dataset: str | None = None
    table = ""
    setting: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE_RE.match(line)
        if header:
            table, dataset, setting = header.group(1), header.group(2), None
            if dataset not in TABLE_DATASETS:
                raise TableParseError(f"line {number}: unknown dataset {dataset!r} in table")
            continue
        if line.startswith("Table "):
            dataset = None
        if dataset is None:
            continue
        cells = line.split("\t")
        if len(cells) != 3 or cells[1] not in _ROW_SPLIT:
            continue
        if cells[0].strip():
            m = _SETTING_RE.match(cells[0].strip())
            if not m:
                raise TableParseError(f"line {number}: cannot read setting {cells[0]!r}")
            setting = m.group(1)
        if setting is None:
            raise TableParseError(f"line {number}: row before any 'D = ...' setting")
        try:
            indices = [int(tok) for tok in cells[2].split(",")]
        except ValueError:
            raise TableParseError(f"line {number}: non-integer class index in row") from None
        entry = found.setdefault((dataset, setting), {})
        split = _ROW_SPLIT[cells[1]]
        if split in entry:
            raise TableParseError(f"line {number}: second {cells[1]} row for {dataset} D={setting}")
        entry[split] = indices
        tables.setdefault((dataset, setting), table)
    if not found:
        raise TableParseError("no 'Taskset partitions' tables found in the paper text")
    splits = []
    for (name, setting), lists in found.items():
        info = TABLE_DATASETS[name]
        where = f"Table {tables[(name, setting)]} ({name}, D = {setting})"
        missing = [s for s in _ROW_SPLIT.values() if s not in lists]
        if missing:
            raise TableParseError(f"{where}: rows missing for {missing}")
        covered = sorted(i for v in lists.values() for i in v)
        if covered != list(range(info.num_classes)):
            raise TableParseError(
                f"{where}: indices do not cover 0..{info.num_classes - 1} exactly once "
                f"({len(covered)} indices, {len(set(covered))} distinct)"
            )
        parameters = {
            "generator": "atg",
            "R": float(setting),
            "divergence": "symmetric_kl",
            "lambda": 1.0,
            "iterations": 7000,
            "lr": 0.1,
            "momentum": 0.9,
        }
        if info.key in TEXT_SIZE_NOTES:
            parameters["note"] = TEXT_SIZE_NOTES[info.key]
        splits.append(
            SplitFile(
                dataset=info.key,
                method="published",
                parameters=parameters,
                source=f"{PAPER}, {where}",
                class_indices={s: lists[s] for s in ("train", "valid", "test")},
                index_convention=info.convention,
                num_classes=info.num_classes,
            )
        )
    return splits


def published_file_name(split: SplitFile) -> str:
    return f"{split.dataset}_D{split.parameters['R']:.2f}.json"


def build_parser() -> argparse.ArgumentParser:
    parser = regeneration_parser(
        "splits.published_tables", "Regenerate the ATG paper's split files.", DEFAULT_OUT_DIR
    )
    parser.add_argument("--paper", required=True, help="ATG paper as text (atg-arnold-sha.txt)")
    return parser


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paper = Path(args.paper)
    if not paper.is_file():
        raise UserError(f"paper text {paper} does not exist")
    try:
        splits = parse_tables(paper.read_text(encoding="utf-8"))
    except TableParseError as err:
        raise TableParseError(f"{paper}: {err}") from None
    write_published_files(sorted(splits, key=published_file_name), args.output, published_file_name)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
