"""What killed jobs leave beside a target (kill -9, a lost node): hidden staging and replaced
folders or files (episodes.util.atomic_files names). A job that holds the target's lock knows
no live job is writing there, so it may remove them; `lock_and_clear` does both for commands
that write one local folder or file (episodes.fetch, learners.evaluate)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from episodes.util.folder_lock import FolderLock, FolderLockedError, acquire_folder_lock


def leftover_pattern(target: Path) -> re.Pattern:
    """Names of leftovers beside `target`: .NAME.tmp-PID-HEX8 (staging), .NAME.old-PID-HEX8
    (replaced); .NAME.tmpPID: episode shards' staging before they took a lock."""
    return re.compile(rf"^\.{re.escape(target.name)}\.((tmp|old)-\d+-[0-9a-f]{{8}}|tmp\d+)$")


def remove_leftovers_beside(target: Path) -> list[Path]:
    """Remove the leftovers of dead jobs beside `target` (call only with its lock held);
    returns what was removed."""
    pattern = leftover_pattern(target)
    removed = []
    for path in sorted(target.parent.iterdir()) if target.parent.is_dir() else []:
        if pattern.match(path.name):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed


def clear_leftovers(lock: FolderLock, target: Path, job: str) -> None:
    """Remove what dead `job`s left beside `target` (whose `lock` this process holds), one
    stderr line each; if that fails, the lock is released before the error goes on."""
    a_job = f"{'an' if job[0] in 'aeiou' else 'a'} {job}"
    try:
        for path in remove_leftovers_beside(target):
            print(f"removed {path}: left by {a_job} that did not finish", file=sys.stderr)
    except BaseException:
        lock.release()
        raise


def lock_and_clear(target: str | os.PathLike, job: str) -> FolderLock:
    """Lock `target` for this process (.NAME.lock beside it, freed when the process ends in
    any way) and remove what dead `job`s left beside it, one stderr line each. A live holder
    raises FolderLockedError naming it."""
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = acquire_folder_lock(
        target.with_name(f".{target.name}.lock"),
        target,
        f"{{folder}}: another {job} is writing this ({{holder}}); wait for it to finish or "
        "choose another --output",
    )
    clear_leftovers(lock, target, job)
    return lock


__all__ = [
    "FolderLockedError",
    "clear_leftovers",
    "leftover_pattern",
    "lock_and_clear",
    "remove_leftovers_beside",
]
