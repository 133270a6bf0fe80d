"""Annotation files of a raw layout read wherever the layout lies: a local `Path` or a listed
object-store folder (`episodes.storage.paths.ObjectPath`), with one error naming the
file for anything unreadable."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from beam_pipelines.sources.base import LayoutError
from episodes.util.json_files import read_json_object

__all__ = ["binary_input", "read_json_input"]


def read_json_input(path: Any) -> dict[str, Any]:
    """The JSON object in a layout's annotation file; LayoutError naming the file otherwise."""
    if isinstance(path, Path):
        return read_json_object(path, LayoutError)
    if not path.is_file():
        raise LayoutError(f"{path}: no such file")
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise LayoutError(f"{path}: expected a JSON object")
    return value


def binary_input(path: Any) -> Any:
    """A binary file object of a layout file (a local path opened as is, an object's bytes)."""
    if isinstance(path, Path):
        return str(path)
    return io.BytesIO(path.read_bytes())
