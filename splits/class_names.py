"""Read a dataset's ordered class names from a dataset spec JSON, an embeddings npz or a list.

Accepted: the reference Meta-Dataset spec JSON (`class_names` as {"0": name, ...}), a spec JSON
with `class_names` as a list, a bare JSON list of names, an embeddings `.npz`, or a text file
with one class name per line.  Until `episodes.dataset_spec` exists this is how the split
commands learn a dataset's classes; any object with a `.class_names` list works in the API.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def read_class_names(path: str | os.PathLike[str]) -> list[str]:
    """Ordered class names from `path`; raises ValueError naming the path on bad input."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"class list {path} does not exist")
    if path.suffix == ".npz":
        from splits.embeddings_file import EmbeddingsFile

        return EmbeddingsFile.load(path).class_names
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"class list {path}: not valid JSON ({err})") from None
        return _names_from_json(data, path)
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise ValueError(f"class list {path} is empty")
    return names


def _names_from_json(data: object, path: Path) -> list[str]:
    if isinstance(data, dict):
        if "class_names" not in data:
            raise ValueError(f"{path}: JSON object has no 'class_names' key")
        data = data["class_names"]
    if isinstance(data, dict):
        try:
            keys = sorted(data, key=int)
        except ValueError:
            raise ValueError(f"{path}: class_names keys must be integer ids") from None
        if [int(k) for k in keys] != list(range(len(keys))):
            raise ValueError(f"{path}: class_names ids are not 0..{len(keys) - 1}")
        return [str(data[k]) for k in keys]
    if isinstance(data, list) and all(isinstance(n, str) for n in data) and data:
        return list(data)
    raise ValueError(f"{path}: expected a list of class names or a spec with 'class_names'")
