"""One conversion at a time per output folder, and no staging folders of dead runs left behind.

A conversion (and an episode shards job) holds an exclusive `flock` (episodes.util.folder_lock)
on `.NAME.lock` beside its output folder NAME from before it checks the output until it
published or gave up. The kernel drops the lock when its
process ends in any way (kill -9 included), so:
- a second conversion to the same output finds the lock held and is refused with one line
  naming the running one (pid, host, start time);
- a conversion that gets the lock knows no other one is writing there: every hidden staging
  (`.NAME.tmp-*`) or replaced (`.NAME.old-*`) folder beside the output is left over from a run
  that died, and is removed (and named).
Object stores have no locks (see docs/operations.md, "Running at scale"): a job writing an output there
removes every staging prefix beside it (`clear_remote_leftovers`), also on GCS, where what a
killed run's open resumable uploads sent is no object and expires by itself within a week.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from episodes.storage import paths as storage_paths
from episodes.util.dead_job_leftovers import remove_leftovers_beside
from episodes.util.folder_lock import FolderLock, FolderLockedError, acquire_folder_lock

__all__ = [
    "acquire_output_lock",
    "clear_remote_leftovers",
    "lock_path",
    "OutputLock",
    "OutputLockedError",
    "remove_leftovers",
]


class OutputLockedError(FolderLockedError):
    """Another live conversion (or episode shards job) is writing the same output folder."""


def lock_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.lock")


class OutputLock(FolderLock):
    """A held lock on one output folder (`output`); `release()` (or the process ending)
    frees it."""

    def __init__(self, output: Path, fd: int | None):
        super().__init__(lock_path(output), fd)
        self.output = output


def acquire_output_lock(output: str | os.PathLike) -> OutputLock:
    """Lock `output` for this process, or raise OutputLockedError naming the holder."""
    output = Path(output).absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        held = acquire_folder_lock(
            lock_path(output),
            output,
            "{folder}: another conversion is writing this output ({holder}); wait for it to "
            "finish or choose another --output",
        )
    except FolderLockedError as exc:
        raise OutputLockedError(str(exc)) from None
    return OutputLock(output, held.fd)


def remove_leftovers(lock: OutputLock) -> list[Path]:
    """Remove the staging and replaced folders of dead runs beside the locked output (only a
    lock holder may: a live run would hold the lock); returns what was removed."""
    if lock.fd is None:
        raise ValueError(f"{lock.output}: the lock is not held")
    return remove_leftovers_beside(lock.output)


def clear_remote_leftovers(output: str) -> list[str]:
    """Remove what killed jobs writing the object-store `output` left beside it (their staging
    prefixes, and on S3 their open multipart uploads), one stderr line each; the prefixes."""
    removed = storage_paths.remove_remote_leftovers(str(output))
    for prefix in removed:
        print(f"removed {prefix}: left by a run that did not finish", file=sys.stderr)
    return removed
