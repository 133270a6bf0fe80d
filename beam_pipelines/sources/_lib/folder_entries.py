"""List a raw folder without silently dropping anything: regular files, folders to walk into,
and every other entry with the reason it is skipped (FIFO, socket, device, broken or looping
symbolic link, a folder that loops back to one of its ancestors).

Sources walk their folders through `list_entries`, so every skipped input ends up in the
plan's `skipped` list (the spec's provenance and the summary, like the other rejects), and a
FIFO named like an image is never opened (reading it would block forever).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FolderEntries", "list_entries", "Skipped"]

Skipped = tuple[str, str]  # (path, reason)


@dataclass
class FolderEntries:
    """The entries of one folder, sorted by name."""

    files: list[Any] = field(default_factory=list)
    folders: list[Any] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _identity(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_dev, info.st_ino


def _special_kind(mode: int) -> str | None:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file, not a regular file"
    return None


def list_entries(folder: Any, ancestors: Sequence[Any] = ()) -> FolderEntries:
    """Files, sub-folders and skipped entries of `folder` (a local Path, or a listed object-store
    folder with only files and folders). `ancestors` are the folders above it in the walk: a
    sub-folder that is one of them (or `folder` itself), reached through a link, is a loop."""
    result = FolderEntries()
    if not isinstance(folder, Path):
        for path in sorted(folder.iterdir()):
            (result.folders if path.is_dir() else result.files).append(path)
        return result
    seen = {_identity(p) for p in (*ancestors, folder)}
    with os.scandir(folder) as listing:  # names sorted as the Paths of one folder sort
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        path = folder / entry.name
        # a regular file by its directory entry (no link): no stat call, the usual case
        if entry.is_file(follow_symlinks=False):
            result.files.append(path)
            continue
        try:
            info = os.stat(path)  # follows symbolic links
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                reason = "a symbolic link loop"
            elif exc.errno == errno.ENOENT and path.is_symlink():
                reason = f"a broken symbolic link (to {os.readlink(path)}, which does not exist)"
            else:
                reason = f"unreadable ({exc.strerror or exc})"
            result.skipped.append((str(path), reason))
            continue
        if stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in seen:
                target = os.path.realpath(path)
                result.skipped.append(
                    (str(path), f"a folder loop: it leads back to {target}, which contains it")
                )
            else:
                result.folders.append(path)
        elif stat.S_ISREG(info.st_mode):
            result.files.append(path)
        else:
            result.skipped.append((str(path), _special_kind(info.st_mode) or "not a regular file"))
    return result
