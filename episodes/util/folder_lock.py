"""One process at a time per folder: an exclusive `flock` on a lock file, freed by the kernel
when its process ends in any way (kill -9 included), so a lock is never left behind.

The lock file holds who has it (pid, host, start time), for the refusal's one line. Used by
conversions and episode shards (`beam_pipelines.runners.output_lock`: `.NAME.lock` beside the output)
and training runs (`learners.training.run_dir`: `.lock` inside the run folder). Local folders only.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from episodes.util.cli_errors import UserError

__all__ = ["FolderLock", "FolderLockedError", "acquire_folder_lock", "lock_holder"]


class FolderLockedError(UserError, FileExistsError):
    """Another live process holds the lock."""


@dataclass
class FolderLock:
    """A held lock; `release()` (or the process ending) frees it."""

    path: Path  # the lock file
    fd: int | None

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # still held: no other process is between open and lock
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_holder(path: Path) -> str:
    """Who holds the lock file `path`, as its holder wrote it."""
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "a process that has not written its name yet"


def acquire_folder_lock(
    path: str | os.PathLike, folder: str | os.PathLike, refusal: str
) -> FolderLock:
    """Lock file `path` for this process, or raise FolderLockedError with `refusal` formatted
    with `{folder}` and `{holder}`. OSErrors name `folder` (the path the user gave)."""
    path = Path(path)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # name the folder asked for, not the hidden lock file
            raise type(exc)(exc.errno, exc.strerror, str(folder)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise FolderLockedError(
                refusal.format(folder=folder, holder=lock_holder(path))
            ) from None
        try:  # the previous holder may have removed the file between our open and our lock
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    os.ftruncate(fd, 0)
    try:
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, started {started}\n".encode())
    except OSError as exc:  # a full disk: held all the same, its holder unnamed; the job's own
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):  # writes then say what is full
            os.close(fd)
            raise
    return FolderLock(path, fd)
