"""One progress line for a conversion, however many workers encode images, on any runner.

Each encoder counts its images in a small file of the job's scratch folder (`_spill/` of the
staging folder: a local file, or an object of the staging prefix in object storage, rewritten
at most every second locally and every REMOTE_WRITE_EVERY_S seconds in object storage); a
thread of the launcher sums them every few seconds and prints `[convert] done/planned images
(rate, ETA)` against the plan's real total. Beam's own metrics would do on some runners only
(the local runner and Dask report none while a job runs); files work wherever the workers
can write the staging folder, which every conversion needs anyway.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

from beam_pipelines.conversion.frame_spill import SPILL_FOLDER
from episodes.storage.paths import is_remote, join, list_objects, read_bytes, write_bytes
from episodes.util.atomic_files import write_text_atomically
from episodes.util.progress_lines import ProgressLines

__all__ = [
    "counted_images",
    "ImageCounter",
    "PREFIX",
    "progress_folder",
    "ProgressReporter",
    "REMOTE_WRITE_EVERY_S",
    "WRITE_EVERY_S",
]

WRITE_EVERY_S = 1.0
REMOTE_WRITE_EVERY_S = 5.0  # one small PUT per encoder every 5 s at most
PREFIX = "progress-"


def progress_folder(staging_dir: str | os.PathLike) -> Path | str:
    """Where the encoders of a job count: a local folder or an object-store prefix."""
    if is_remote(staging_dir):
        return join(str(staging_dir), SPILL_FOLDER)
    return Path(staging_dir) / SPILL_FOLDER


class ImageCounter:
    """An encoder's count, written to its own file or object at most every few seconds."""

    def __init__(self, staging_dir: str):
        folder = progress_folder(staging_dir)
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.remote = isinstance(folder, str)
        self.path = join(folder, name) if self.remote else folder / name
        self.every_s = REMOTE_WRITE_EVERY_S if self.remote else WRITE_EVERY_S
        self.count = 0
        self.flushed = 0
        self.written = 0.0

    def advance(self) -> None:
        self.count += 1
        if time.monotonic() - self.written >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if self.count == self.flushed and self.written:
            return
        if self.remote:
            try:
                write_bytes(self.path, str(self.count).encode())
            except OSError:  # progress only: the conversion itself goes on
                pass
        else:
            write_text_atomically(self.path, str(self.count))
        self.flushed, self.written = self.count, time.monotonic()


def counted_images(folder: Path | str) -> int:
    """The sum of the encoders' counts under `folder` (a local folder or a prefix)."""
    if isinstance(folder, str):
        try:
            names = [n for n in list_objects(folder) if n.startswith(PREFIX)]
        except OSError:
            return 0
        paths = [join(folder, n) for n in names]
        read = read_bytes
    else:
        paths = list(folder.glob(f"{PREFIX}*"))
        read = Path.read_bytes
    total = 0
    for path in paths:
        try:
            total += int(read(path) or 0)
        except (OSError, ValueError):  # replaced while read: the next poll counts it
            continue
    return total


class ProgressReporter:
    """Launcher thread: every `every_s` seconds, one line of all encoders' count."""

    def __init__(
        self,
        staging_dir: str | os.PathLike,
        planned: int,
        label: str = "convert",
        every_s: float = 5.0,
    ):
        self.folder = progress_folder(staging_dir)
        self.lines = ProgressLines(label, planned, "images", every_s=0.0)
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="convert-progress", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            done = counted_images(self.folder)
            if done > self.lines.count:
                self.lines.advance(done - self.lines.count)

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def __exit__(self, exc_type, *_) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
            if exc_type is None and self.lines.count:  # it printed: end on the final count
                self.lines.advance(counted_images(self.folder) - self.lines.count)
