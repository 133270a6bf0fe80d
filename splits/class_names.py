"""A dataset's ordered class names for the split commands (`--classes-from`,
`--class-names-from`, `--class-names`).

Accepted: a converted dataset folder or its `dataset_spec.json` (this toolkit's or the reference
Meta-Dataset spec, read by `episodes.records.dataset_spec.load_spec`), an embeddings `.npz`, a JSON list
of names, or a text file with one class name per line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from episodes.records.dataset_spec import SpecError, load_spec
from episodes.util.cli_errors import UserError

__all__ = ["ACCEPTED", "ClassList", "ClassListError", "read_class_list", "read_class_names"]

ACCEPTED = "a dataset folder or dataset_spec.json, an embeddings .npz, a JSON list or a text list"


class ClassListError(UserError, ValueError):
    """A class list (`--class-names`) that is missing, empty or not one of ACCEPTED."""


@dataclass(frozen=True)
class ClassList:
    """Class names in class-id order, and the dataset's name when the list came from a spec."""

    names: list[str]
    dataset: str | None = None


def read_class_list(path: str | os.PathLike[str]) -> ClassList:
    """Ordered class names from `path`; raises ClassListError naming the path on bad
    input."""
    path = Path(path)
    if path.is_dir():
        return _from_spec(path)
    if not path.is_file():
        raise ClassListError(f"class list {path} does not exist (expected {ACCEPTED})")
    if path.suffix == ".npz":
        from splits.embeddings.embeddings_file import EmbeddingsFile

        return ClassList(EmbeddingsFile.load(path).class_names)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ClassListError(f"class list {path}: not valid JSON ({err})") from None
        if isinstance(data, list):
            if not data or not all(isinstance(n, str) for n in data):
                raise ClassListError(f"class list {path}: expected a non-empty list of names")
            return ClassList(list(data))
        return _from_spec(path)
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise ClassListError(f"class list {path} is empty")
    return ClassList(names)


def read_class_names(path: str | os.PathLike[str]) -> list[str]:
    """Ordered class names from `path` (see `read_class_list`)."""
    return read_class_list(path).names


def _from_spec(path: Path) -> ClassList:
    try:
        spec = load_spec(path)
    except SpecError as err:
        raise ClassListError(f"class list {err} (expected {ACCEPTED})") from None
    return ClassList(list(spec.class_names), spec.name)
