"""POSIX shared-memory segments holding one episode's pixels, handed over without a copy.

The parent creates a segment per episode, decode workers map it and write their rows, then the
parent maps it (all pages at once where the platform can), removes its name and hands the
mapping to the caller as the episode's array: memory returns to the system when the caller
drops the array, and no segment is ever reused under a caller's feet. Segments are opened with
`_posixshmem` (what `multiprocessing.shared_memory` uses) rather than `SharedMemory`, whose
resource tracker would, in a worker started outside multiprocessing, unlink the parent's live
segments when the worker exits. Segments still named when their process exits are unlinked at
exit; those of a process killed outright (kill -9) are removed by the next process that creates
one (their names carry the creator's pid).
"""

from __future__ import annotations

import _posixshmem
import atexit
import mmap
import os
import re
import secrets
import time

__all__ = [
    "DEAD_SEGMENT_AGE_S",
    "SHM_DIR",
    "create_segment",
    "map_segment",
    "remove_dead_segments",
    "shared_memory_free",
    "unlink_segment",
]

SHM_DIR = "/dev/shm"
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux: map every page in one call


def shared_memory_free(folder: str = SHM_DIR) -> int | None:
    """Free bytes of the shared-memory filesystem; None where there is none to measure."""
    try:
        stats = os.statvfs(folder)
    except OSError:  # no /dev/shm (not Linux): the platform manages shared memory
        return None
    return stats.f_bavail * stats.f_frsize


_PREFIX = "fst"
_NAME = re.compile(rf"^{_PREFIX}([0-9a-f]+)_[0-9a-f]{{10}}$")  # fst<pid in hex>_<10 hex>
DEAD_SEGMENT_AGE_S = 60.0
_live: set[str] = set()  # segments this process created and has not unlinked yet
_swept: list[bool] = []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_dead_segments(folder: str = SHM_DIR, min_age_s: float = DEAD_SEGMENT_AGE_S) -> list[str]:
    """Unlink the segments of this kind left by processes that no longer run (killed with -9,
    or by the OOM killer: nothing of theirs could clean up) and unchanged for `min_age_s`
    (a live segment is unlinked within seconds; the age also spares those of another PID
    namespace sharing /dev/shm, e.g. `docker run --ipc=host`); returns the names removed."""
    oldest = time.time() - min_age_s
    try:
        names = os.listdir(folder)
    except OSError:  # no /dev/shm to look into (not Linux)
        return []
    removed = []
    for entry in sorted(names):
        match = _NAME.match(entry)
        if match and not _pid_alive(int(match.group(1), 16)):
            try:
                if os.stat(os.path.join(folder, entry)).st_mtime > oldest:
                    continue
                _posixshmem.shm_unlink("/" + entry)
            except OSError:  # removed meanwhile, or another user's
                continue
            removed.append(entry)
    return removed


def _unlink_own_segments() -> None:
    """At exit (normal, an exception, Ctrl-C or SIGTERM as Ctrl-C): segments still in flight
    are removed. Only this process's own: a forked child inherits the set but not the names."""
    mine = f"/{_PREFIX}{os.getpid():x}_"
    for name in sorted(_live):
        if name.startswith(mine):
            unlink_segment(name)


atexit.register(_unlink_own_segments)


def create_segment(nbytes: int) -> str:
    """A new segment of `nbytes` (at least 1), not mapped here; returns its name. The first
    one of a process first removes segments that dead processes left behind."""
    if not _swept:
        _swept.append(True)
        remove_dead_segments()
    name = f"/{_PREFIX}{os.getpid():x}_{secrets.token_hex(5)}"  # <= 31 characters (macOS)
    fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    _live.add(name)
    try:
        os.ftruncate(fd, max(1, nbytes))
    except BaseException:
        unlink_segment(name)
        raise
    finally:
        os.close(fd)
    return name


def map_segment(name: str, nbytes: int, populate: bool = False) -> mmap.mmap:
    """Map an existing segment read-write; `populate` maps its pages at once (for reading
    what others wrote: one call instead of a fault per page)."""
    fd = _posixshmem.shm_open(name, os.O_RDWR, mode=0o600)
    try:
        flags = mmap.MAP_SHARED | (_POPULATE if populate else 0)
        return mmap.mmap(fd, max(1, nbytes), flags=flags)
    finally:
        os.close(fd)


def unlink_segment(name: str) -> None:
    """Remove a segment's name (its memory lives on while mapped); missing names are fine."""
    _live.discard(name)
    try:
        _posixshmem.shm_unlink(name)
    except FileNotFoundError:
        pass
