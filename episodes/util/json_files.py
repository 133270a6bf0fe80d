"""Reading a JSON file the user named, with every fault as one error that names the path.

Each reader of the toolkit (dataset specs, cache manifests, FIX-ML record sets, split files)
raises its own exception type; these functions take that type, so a missing file, bytes that
are not UTF-8 JSON and (for `read_json_object`) a value that is not an object all end up as
one line such as `data/omniglot/dataset_spec.json: not valid JSON (Expecting value: ...)`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["read_json", "read_json_object"]


def read_json(path: str | os.PathLike, error: type[Exception], missing: str | None = None) -> Any:
    """The JSON value in the file `path`, raising `error` when it is not one.

    `error(missing)` when `path` is not a file (`missing` defaults to "<path>: no such file");
    `error("<path>: not valid JSON (<why>)")` when its bytes are not UTF-8 JSON. Other
    `OSError`s (no permission, ...) pass through unchanged.
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such file" if missing is None else missing)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid JSON ({exc})") from exc


def read_json_object(
    path: str | os.PathLike, error: type[Exception], missing: str | None = None
) -> dict[str, Any]:
    """The JSON object in the file `path`: as `read_json`, and `error("<path>: expected a JSON
    object")` when the file holds another JSON value (a list, a number, ...)."""
    value = read_json(path, error, missing)
    if not isinstance(value, dict):
        raise error(f"{Path(path)}: expected a JSON object")
    return value
