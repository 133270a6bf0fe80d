"""Dhillon et al.'s "(train + val)" setting as a split file: the backbone is pre-trained on the
training and validation classes together (sec. 4, A.1), the test classes stay for the episodes.

The valid list is left empty (a class is in one list only), so such a run is not validated and
the plan evaluates its last checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from episodes.util.atomic_files import write_text_atomically
from episodes.util.cli_errors import UserError

__all__ = [
    "lists_of_dataset_spec",
    "lists_of_split_file",
    "merged_lists",
    "write_train_and_valid_split",
]


def merged_lists(train: list[str], valid: list[str], test: list[str]) -> dict[str, list[str]]:
    """train + valid as the training classes, no validation classes, the same test classes."""
    return {"train": [*train, *valid], "valid": [], "test": list(test)}


def lists_of_split_file(path: Path) -> dict[str, list[str]]:
    """The class-name lists of a split file that names its classes."""
    values = json.loads(path.read_text())
    lists = {name: values.get(name) or [] for name in ("train", "valid", "test")}
    if not lists["train"]:
        raise UserError(f"{path}: no class names in 'train' to merge with 'valid'")
    return lists


def lists_of_dataset_spec(dataset: Path) -> dict[str, list[str]]:
    """The class-name lists of a converted dataset's own splits (its dataset_spec.json)."""
    spec_path = dataset / "dataset_spec.json"
    spec = json.loads(spec_path.read_text())
    names = {int(c["id"]): c["name"] for c in spec.get("classes", [])}
    splits = spec.get("splits") or {}
    try:
        return {name: [names[i] for i in splits[name]] for name in ("train", "valid", "test")}
    except KeyError as exc:
        raise UserError(f"{spec_path}: no class split {exc} to merge") from None


def write_train_and_valid_split(source: dict[str, list[str]], dataset: str, output: Path) -> dict:
    """Write the merged split to `output` (JSON of this toolkit's split files); its sizes."""
    lists = merged_lists(source["train"], source["valid"], source["test"])
    record: dict[str, Any] = {
        "dataset": dataset,
        "method": "listed",
        **lists,
        "parameters": {"setting": "train + val (Dhillon et al. sec. 4)"},
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(output, json.dumps(record, indent=1) + "\n")
    return {name: len(values) for name, values in lists.items()}
