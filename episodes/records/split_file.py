"""Split files: `splits/<dataset>/<name>.json` with train / valid / test class lists.

A split file records how a partition of a dataset's classes was made (method and parameters),
the achieved divergence for ATG splits, and a content hash of the class embeddings it was
computed from.  Published tables that print class *indices* store those indices as printed
together with the index convention; `with_class_names` turns them into names.

`read_split_file` is the one parser of split files: the reader (`--split-file`), the learners
and the split tools all read through it.  It takes this schema (a JSON object with "method") and
plain class-name lists, {"train": [...], "valid": [...], "test": [...]}, as Meta-Dataset
publishes them ("validation" / "val" for valid; "dataset" optional); anything else is refused
with the path and what was expected.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from episodes.util.atomic_files import write_text_atomically
from episodes.util.cli_errors import UserError
from episodes.util.json_files import read_json

__all__ = [
    "FORMAT_VERSION",
    "METHOD_NAME",
    "SPLITS",
    "SplitFile",
    "SplitFileError",
    "read_split_file",
]

# The method that made a file: a `python -m splits make --method` name (atg, random, semantic,
# published, or one added later) or "listed" (a plain class list). Any such name is read: the
# split methods are registered in `splits`, above this format, and may grow.
METHOD_NAME = re.compile(r"[a-z][a-z0-9_]*")
SPLITS = ("train", "valid", "test")
FORMAT_VERSION = 1


class SplitFileError(UserError, ValueError):
    """A split file, or its use with a dataset's class list, is invalid."""


@dataclass
class SplitFile:
    """One partition of a dataset's classes into train / valid / test, with its provenance."""

    dataset: str
    method: str
    train: list[str] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    achieved_divergence: float | None = None
    final_objective: float | None = None
    embedding_hash: str | None = None
    source: str | None = None
    class_indices: dict[str, list[int]] | None = None
    index_convention: str | None = None
    num_classes: int | None = None
    centroids: dict[str, list[float]] | None = None
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise SplitFileError unless lists are disjoint, duplicate-free and well typed."""
        where = f"split file for dataset {self.dataset!r}"
        if not isinstance(self.dataset, str) or not self.dataset:
            raise SplitFileError(f"dataset must be a non-empty string, got {self.dataset!r}")
        if not isinstance(self.method, str) or not METHOD_NAME.fullmatch(self.method):
            raise SplitFileError(
                f"{where}: method {self.method!r} is not a method name (lowercase letters, "
                "digits and _, as atg or random)"
            )
        for name in SPLITS:
            values = getattr(self, name)
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise SplitFileError(f"{where}: {name!r} must be a list of class-name strings")
        _check_disjoint({s: getattr(self, s) for s in SPLITS}, where)
        if self.class_indices is not None:
            if set(self.class_indices) != set(SPLITS):
                raise SplitFileError(
                    f"{where}: class_indices must have keys {SPLITS}, "
                    f"got {sorted(self.class_indices)}"
                )
            for name, values in self.class_indices.items():
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                    raise SplitFileError(f"{where}: class_indices[{name!r}] must hold integers")
                bad = [
                    v
                    for v in values
                    if v < 0 or (self.num_classes is not None and v >= self.num_classes)
                ]
                if bad:
                    raise SplitFileError(
                        f"{where}: class_indices[{name!r}] has indices outside "
                        f"[0, {self.num_classes}): {bad[:5]}"
                    )
            _check_disjoint(self.class_indices, where + " (class_indices)")
            if self.has_names():
                for name in SPLITS:
                    if len(getattr(self, name)) != len(self.class_indices[name]):
                        raise SplitFileError(
                            f"{where}: {name!r} has {len(getattr(self, name))} names but "
                            f"{len(self.class_indices[name])} indices"
                        )
        elif not self.has_names():
            raise SplitFileError(f"{where}: all of train/valid/test are empty")
        if self.achieved_divergence is not None and not math.isfinite(self.achieved_divergence):
            raise SplitFileError(f"{where}: achieved_divergence is not finite")

    def has_names(self) -> bool:
        """True when the train/valid/test lists hold class names (not only indices)."""
        return any(getattr(self, s) for s in SPLITS)

    # ------------------------------------------------------------------ views
    def sizes(self) -> dict[str, int]:
        """Number of classes per split (from names, else from indices)."""
        if self.has_names() or self.class_indices is None:
            return {s: len(getattr(self, s)) for s in SPLITS}
        return {s: len(self.class_indices[s]) for s in SPLITS}

    def classes(self, split: str) -> list[str]:
        """Class names of one split ('train', 'valid' or 'test')."""
        if split not in SPLITS:
            raise SplitFileError(f"unknown split {split!r}; expected one of {SPLITS}")
        return list(getattr(self, split))

    def named(self) -> SplitFile:
        """This split with class names: itself when it has them, an index-only table resolved
        by its index convention when that convention's names are known offline (CIFAR-100,
        EMNIST), else a SplitFileError saying how to name it."""
        if self.has_names():
            return self
        from episodes.records.index_conventions import convention_class_names

        names = convention_class_names(self.index_convention) if self.index_convention else None
        if names is None:
            raise SplitFileError(
                f"split file for {self.dataset!r} holds only class indices "
                f"({self.index_convention or 'no index convention'}): write a named copy with "
                f"`python -m splits make --method published --name NAME --class-names CLASS_LIST "
                f"--output FILE`"
            )
        return self.with_class_names(names)

    def with_class_names(self, class_names: Sequence[str]) -> SplitFile:
        """Resolve printed class indices to names, given the names in the index convention order."""
        if self.class_indices is None:
            raise SplitFileError(f"split file for {self.dataset!r} has no class_indices to resolve")
        names = list(class_names)
        if self.num_classes is not None and len(names) != self.num_classes:
            raise SplitFileError(
                f"split file for {self.dataset!r} expects {self.num_classes} class names "
                f"({self.index_convention or 'index order'}), got {len(names)}"
            )
        top = max((max(v) for v in self.class_indices.values() if v), default=-1)
        if top >= len(names):
            raise SplitFileError(f"class index {top} is out of range for {len(names)} class names")
        lists = {s: [names[i] for i in self.class_indices[s]] for s in SPLITS}
        return replace(self, **lists)

    def resolve(self, spec_class_names: Sequence[str]) -> dict[str, list[int]]:
        """Map this file's class names to class ids (positions in `spec_class_names`)."""
        if not self.has_names():
            raise SplitFileError(
                f"split file for {self.dataset!r} holds only class indices "
                f"({self.index_convention}); call with_class_names() first"
            )
        position = {name: i for i, name in enumerate(spec_class_names)}
        unknown = [n for s in SPLITS for n in getattr(self, s) if n not in position]
        if unknown:
            shown = ", ".join(repr(n) for n in unknown[:10])
            more = f" (and {len(unknown) - 10} more)" if len(unknown) > 10 else ""
            raise SplitFileError(
                f"split file for {self.dataset!r} names {len(unknown)} classes that are not in "
                f"the dataset spec: {shown}{more}"
            )
        return {s: [position[n] for n in getattr(self, s)] for s in SPLITS}

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """Plain dict in the on-disk key order; optional fields that are None are omitted."""
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None}

    def to_json(self) -> str:
        """Deterministic JSON text (same object, same bytes), ending with a newline.

        Objects are indented one key per line; lists of plain values stay on one line.
        """
        return _dump(self.to_dict(), 0) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "<dict>") -> SplitFile:
        """Build from a parsed JSON object, rejecting unknown keys."""
        if not isinstance(data, dict):
            raise SplitFileError(f"{origin}: expected a JSON object, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        extra = sorted(set(data) - known)
        if extra:
            raise SplitFileError(f"{origin}: unknown keys {extra}")
        for key in ("dataset", "method"):
            if key not in data:
                raise SplitFileError(f"{origin}: missing key {key!r}")
        try:
            return cls(**data)
        except SplitFileError as err:
            raise SplitFileError(f"{origin}: {err}") from None

    @classmethod
    def from_json(cls, text: str, origin: str = "<json>") -> SplitFile:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise SplitFileError(f"{origin}: not valid JSON ({err})") from None
        return cls.from_dict(data, origin)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SplitFile:
        """Read a split file of either accepted form (`read_split_file`)."""
        return read_split_file(path)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (temporary file, then rename) so no half-written file remains."""
        return write_text_atomically(path, self.to_json())


_PLAIN_KEYS = {
    "train": "train",
    "valid": "valid",
    "validation": "valid",
    "val": "valid",
    "test": "test",
}


def read_split_file(path: str | os.PathLike[str]) -> SplitFile:
    """The one split-file parser: this toolkit's schema (an object with "method") or plain
    train / valid / test class-name lists (Meta-Dataset's published splits), returned as a
    validated SplitFile (plain lists get method "listed"); SplitFileError names the path."""
    path = Path(path)
    if path.is_dir():
        raise SplitFileError(f"split file {path} is a folder: expected a JSON file")
    data = read_json(path, SplitFileError, missing=f"split file {path} does not exist")
    if isinstance(data, dict) and "method" in data:
        return SplitFile.from_dict(data, str(path))
    return _from_plain_lists(data, path)


def _from_plain_lists(data: Any, path: Path) -> SplitFile:
    expected = (
        'expected a split file of this toolkit (with "method") or train / valid / test '
        "class-name lists"
    )
    if not isinstance(data, dict):
        raise SplitFileError(f"{path}: {expected}, got a JSON {type(data).__name__}")
    unknown = sorted(set(data) - set(_PLAIN_KEYS) - {"dataset"})
    if unknown:
        raise SplitFileError(f"{path}: unknown keys {unknown}; {expected}")
    lists: dict[str, list[str]] = {}
    for key, split in _PLAIN_KEYS.items():
        if key not in data:
            continue
        if split in lists:
            raise SplitFileError(f"{path}: more than one list for the {split} split")
        values = data[key]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SplitFileError(f"{path}: {key!r} must be a list of class-name strings")
        lists[split] = list(values)
    missing = [s for s in SPLITS if s not in lists]
    if missing:
        raise SplitFileError(f"{path}: no {' / '.join(missing)} list; {expected}")
    dataset = data.get("dataset") or path.stem
    if not isinstance(dataset, str):
        raise SplitFileError(f"{path}: 'dataset' must be a string")
    try:
        return SplitFile(dataset=dataset, method="listed", source=str(path), **lists)
    except SplitFileError as err:
        raise SplitFileError(f"{path}: {err}") from None


def _check_disjoint(lists: dict[str, Sequence[Any]], where: str) -> None:
    seen: dict[Any, str] = {}
    for name, values in lists.items():
        dupes = sorted(repr(v) for v, n in Counter(values).items() if n > 1)
        if dupes:
            raise SplitFileError(f"{where}: {name!r} lists classes more than once: {dupes[:5]}")
        for v in values:
            if v in seen:
                raise SplitFileError(f"{where}: class {v!r} is in both {seen[v]!r} and {name!r}")
            seen[v] = name


def _dump(value: Any, level: int) -> str:
    if isinstance(value, dict) and value:
        pad = "  " * (level + 1)
        items = [f"{pad}{json.dumps(str(k))}: {_dump(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        pad = "  " * (level + 1)
        items = [pad + _dump(v, level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * level + "]"
    return json.dumps(value, ensure_ascii=False)
