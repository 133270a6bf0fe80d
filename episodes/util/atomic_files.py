"""Files and folders written so that no reader ever sees half of one: write beside, rename.

Every writer of the toolkit (indexes, caches, split and embedding files, shards, checkpoints,
converted datasets) goes through these, so an interrupted job leaves the old version or the new
one, never a torn file, and no temporary file behind on an error.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "atomic_path",
    "missing_parents",
    "remove_if_empty",
    "replace_folder",
    "staging_folder",
    "write_bytes_atomically",
    "write_text_atomically",
]


def _hidden_sibling(path: Path, kind: str) -> Path:
    """A fresh hidden name beside `path` (same filesystem, so a rename is atomic)."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; once the block succeeds it is renamed onto
    `path`, and when the block raises it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _hidden_sibling(path, "tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename in (str(tmp), None):
            # name the file the user asked for, not the hidden one (a write through a handle,
            # a full disk say, names none)
            exc.filename = str(path)
        raise


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def staging_folder(target: str | os.PathLike) -> Path:
    """A fresh, empty hidden folder beside `target` for a job to fill before `replace_folder`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _hidden_sibling(target, "tmp")
    try:
        staging.mkdir()
    except OSError as exc:
        exc.filename = str(target)  # name the folder the user asked for, not the hidden one
        raise
    return staging


def replace_folder(staging: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Move a finished staging folder to `target`; an old `target` is removed only after."""
    staging, target = Path(staging), Path(target)
    old = None
    if target.exists():
        old = _hidden_sibling(target, "old")
        os.replace(target, old)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


def missing_parents(path: str | os.PathLike) -> list[Path]:
    """The folders above `path` that do not exist yet, innermost first: what a job that
    creates `path` makes and must remove again if it fails (`remove_if_empty`)."""
    missing = []
    for parent in Path(path).absolute().parents:
        if parent.exists():
            break
        missing.append(parent)
    return missing


def remove_if_empty(folders: list[Path]) -> None:
    """Remove each folder (innermost first) that is still empty; others stay."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            pass
