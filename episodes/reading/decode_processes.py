"""Decode episodes' records in worker processes, into shared memory: parallel on every core.

Pillow holds the GIL while it parses an image's headers in Python, so threads decoding small
images (84x84 JPEGs: about half of each decode) contend for it and barely beat one thread;
processes do not. Each worker opens its own readers of the same record files (indexes are
loaded, or built, by the parent first, so workers only read them) and decodes its share of an
episode's rows straight into a shared-memory segment (`episodes.util.shared_segments`), which the
parent then lends to the caller as the episode's array, without a copy. Shares are large (at
least `MIN_SHARE_IMAGES`, whole episodes where need be) and go to the least busy workers, and the
reader keeps enough episodes in flight that every worker has `BUSY_SHARES` queued: spreading
each episode over every worker with only `prefetch` episodes ahead made N workers wait on each
episode's slowest share, a plateau near 59 episodes/s however many (issue 21). A segment is used again
only once nothing references its mapping any more (the caller dropped every array over it), so
arrays handed out never alias memory that workers write again; a training loop that drops each
episode keeps reusing the same few segments, whose pages stay mapped in every process.

Workers start lazily as fresh interpreters (`episodes.util.worker_processes`) that import only this
module, never the caller's `__main__`: a script without an `if __name__ == "__main__":` guard,
or `python -c`, works as it is. Never `fork`, which is unsafe once threads run.
"""

from __future__ import annotations

import itertools
import mmap
import os
import random
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

from episodes.images.image_decode import (
    DEFAULT_RESIZE,
    ImageDecodeError,
    scale_images_into,
    usable_cores,
)
from episodes.images.record_images import RecordImages
from episodes.records.reader_errors import ReaderError
from episodes.records.record_index import RecordIndexError
from episodes.records.record_reader import CorruptRecordError, RecordReader
from episodes.util.shared_segments import (
    SHM_DIR,
    create_segment,
    map_segment,
    shared_memory_free,
    unlink_segment,
)
from episodes.util.worker_processes import WorkerProcess, can_start_workers

__all__ = [
    "BUSY_SHARES",
    "DecodeProcessError",
    "DecodeProcessPool",
    "IN_FLIGHT_BYTES",
    "MAX_AUTO_PROCESSES",
    "MIN_SHARE_IMAGES",
    "ReaderNote",
    "RecordSource",
    "auto_decode_processes",
    "check_shared_memory_room",
    "share_count",
    "split_rows",
    "worker_main",
]

# Errors a worker reports by name, re-raised in the parent with the worker's message (which
# already names the file, class and record).
_ERRORS: dict[str, type[Exception]] = {
    "CorruptRecordError": CorruptRecordError,
    "RecordIndexError": RecordIndexError,
    "ReaderError": ReaderError,
    "ImageDecodeError": ImageDecodeError,
}


class DecodeProcessError(ReaderError):
    """A decoding worker process failed (it exited, or raised an unexpected error)."""


@dataclass(frozen=True)
class RecordSource:
    """Where a worker finds one dataset's records (picklable)."""

    root: str
    file_pattern: str
    index_cache_dir: str | None = None
    max_open_files: int = 64


MIN_SHARE_IMAGES = 16  # an episode is cut into shares of at least this many images
# The pipeline deepens while a worker holds fewer shares than this: enough queued work to ride
# out a straggling share of the oldest episode (with 2, 12 emulated workers still plateaued
# when 1% of images stalled 30 ms; with 4 they kept scaling: docs/episodes.md, "Speed: decode processes by default").
BUSY_SHARES = 4
IN_FLIGHT_BYTES = 256 << 20  # ... and while the episodes in flight take less than this


def share_count(total: int, processes: int, min_share: int = MIN_SHARE_IMAGES) -> int:
    """How many workers decode an episode of `total` images: the largest divisor of
    `processes` that leaves shares of at least `min_share` images (1: the whole episode to one
    worker). Small shares cost a round trip each for little work, and an episode spread over
    every worker is done only when its slowest share is; a divisor spreads consecutive
    episodes evenly over the workers, while several episodes are decoded at once
    (`DecodeProcessPool.hungry`)."""
    most = max(1, min(processes, total // max(1, min_share)))
    return max(d for d in range(1, most + 1) if processes % d == 0)


def split_rows(rows: np.ndarray, parts: int) -> list[np.ndarray]:
    """`rows` cut into at most `parts` contiguous pieces of nearly equal length (none empty)."""
    parts = max(1, min(parts, len(rows)))
    return [piece for piece in np.array_split(rows, parts) if len(piece)]


# ------------------------------------------------------------------------------ worker side


def worker_main(
    conn: Connection,
    sources: Mapping[str, RecordSource],
    image_size: int,
    resize: str,
    dtype: str = "uint8",
    float_range: tuple[float, float] = (0.0, 1.0),
    emulate_decode_s: float = 0.0,
    emulate_stalls: tuple[float, float] = (0.0, 0.0),
) -> None:
    """Serve ("decode", ticket, segment name, bytes, source, rows bytes, total) until None.

    `emulate_decode_s` > 0 (benchmarks only: `benchmarks/episodes.py --emulate-decode-ms`)
    sleeps that long per image instead of decoding it, leaving its rows unwritten: a sleep
    takes no CPU, so N workers on a 2-core machine scale as they would on N cores.
    `emulate_stalls` (share, seconds) stalls that share of the images (the same ones whatever
    the dispatch: drawn from the episode and row) that much longer: the stragglers of real
    decoding (a worker descheduled, a garbage collection, a cold page)."""
    readers: dict[str, RecordImages] = {}
    mapped: dict[str, mmap.mmap] = {}
    shape = (image_size, image_size, 3)
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the parent went away
                return
            if message is None:
                return
            if message[0] == "drop":
                segment = mapped.pop(message[1], None)
                if segment is not None:
                    segment.close()
                continue
            _, ticket, segment_name, nbytes, source, rows_bytes, total = message
            images = None
            try:
                segment = mapped.get(segment_name)
                if segment is None:
                    segment = mapped[segment_name] = map_segment(segment_name, nbytes)
                images = np.ndarray((total, *shape), dtype, buffer=segment)
                reader = readers.get(source)
                if reader is None:
                    where = sources[source]
                    reader = readers[source] = RecordImages(
                        RecordReader(
                            where.root,
                            where.file_pattern,
                            where.max_open_files,
                            where.index_cache_dir,
                        ),
                        resize,
                    )
                rows = np.frombuffer(rows_bytes, np.int64).reshape(-1, 3).tolist()
                if emulate_decode_s > 0:
                    share, stall = emulate_stalls
                    for row, _, _ in rows:
                        draw = random.Random(ticket * 1_000_003 + row).random()
                        time.sleep(emulate_decode_s + (stall if draw < share else 0.0))
                elif images.dtype == np.uint8:
                    reader.decode_rows(rows, images)
                else:  # decode this share, then scale it into place (rows are consecutive)
                    first = rows[0][0] if rows else 0
                    pixels = np.empty((len(rows), *shape), np.uint8)
                    reader.decode_rows([(r - first, c, k) for r, c, k in rows], pixels)
                    scale_images_into(pixels, images[first : first + len(rows)], float_range)
                images = None  # release the buffer export, so a "drop" can unmap it
                conn.send(("ok", ticket))
            except Exception as exc:  # reported to the parent, which raises it
                images = None
                conn.send(("error", ticket, type(exc).__name__, str(exc)))
    finally:
        for reader in readers.values():
            reader.close()
        for segment in mapped.values():
            segment.close()


# ------------------------------------------------------------------------------ parent side


MAX_AUTO_PROCESSES = 8


class ReaderNote(UserWarning):
    """The reader chose a slower way than it could have, and says why (one line)."""


def auto_decode_processes(episode_bytes: int, prefetch: int, folder: str = SHM_DIR) -> int:
    """The reader's default `decode_processes`: one per usable core (at most 8) where worker
    processes can start and shared memory holds the episodes in flight (`prefetch` + 2 of
    `episode_bytes`); else 0 (inline), with a one-line `ReaderNote` saying why. One core: 0."""
    cores = usable_cores()
    if cores < 2:
        return 0
    why_not = can_start_workers()
    free = shared_memory_free(folder)
    need = (prefetch + 2) * episode_bytes
    if why_not is None and free is not None and need > free:
        why_not = (
            f"{folder} has {free / 2**20:.0f} MB free, decode processes need about "
            f"{need / 2**20:.0f} MB (e.g. docker run --shm-size 1g)"
        )
    if why_not is not None:
        warnings.warn(
            f"decoding inline: {why_not}; pass decode_processes=0 to choose inline yourself",
            ReaderNote,
            stacklevel=3,
        )
        return 0
    return min(cores, MAX_AUTO_PROCESSES)


def check_shared_memory_room(nbytes: int, folder: str = SHM_DIR) -> None:
    """Fail clearly when the shared-memory filesystem cannot hold `nbytes` more: writing past
    its end would kill the workers with SIGBUS (containers often get only 64 MB)."""
    free = shared_memory_free(folder)
    if free is not None and nbytes > free:
        raise DecodeProcessError(
            f"{folder} has {free / 2**20:.0f} MB free but an episode needs "
            f"{nbytes / 2**20:.0f} MB: enlarge it (e.g. docker run --shm-size 1g), or decode in "
            "threads (decode_processes=0)"
        )


class _Segment:
    """A shared-memory segment, mapped here; lent to the caller while arrays use its map."""

    def __init__(self, nbytes: int):
        check_shared_memory_room(nbytes)
        self.name = create_segment(nbytes)
        self.nbytes = nbytes
        self.map = map_segment(self.name, nbytes)

    def in_use(self) -> bool:
        """Whether arrays (or anything else) still reference the map besides this object."""
        return sys.getrefcount(self.map) > 2  # this attribute and getrefcount's argument

    def pixels(self, total: int, size: int, dtype: np.dtype) -> np.ndarray:
        count = total * size * size * 3
        return np.frombuffer(self.map, dtype, count=count).reshape(total, size, size, 3)


@dataclass
class _Ticket:
    number: int
    segment: _Segment
    total: int
    workers: list[tuple[int, int]]  # (worker position, images) of each share of this episode
    discarded: bool = False
    error: Exception | None = None
    done: bool = False


def _shutdown(
    owner: int, processes: list, connections: list[Connection], segments: set[str]
) -> None:
    """Stop the workers and unlink every segment's name (its memory goes with the last map:
    arrays already handed out stay valid); also run at garbage collection and exit; only in
    the process that started them: a forked child (a DataLoader worker) inherits this
    finalizer, and must leave its parent's workers and shared memory alone."""
    if os.getpid() != owner:
        return
    for conn in connections:
        try:
            conn.send(None)
        except (OSError, ValueError):
            pass
    for process in processes:
        process.join(timeout=2)
        if process.is_alive():
            process.terminate()
            process.join(timeout=2)
    for conn in connections:
        conn.close()
    for name in segments:
        unlink_segment(name)
    processes.clear()
    connections.clear()
    segments.clear()


class DecodeProcessPool:
    """`processes` worker processes decoding (row, class id, record) rows of a source into
    episode arrays. `submit` hands out an episode's rows and returns a ticket; `collect` waits
    for it and returns the (total, S, S, 3) pixels: uint8, or `dtype` floats scaled onto
    `float_range` by the workers (`image_decode.scale_images`: the same bits). Tickets complete
    in submission order. An episode goes, in `share_count` contiguous shares, to the workers
    with the fewest images still to decode; each worker serves its shares first come, first
    served, so its replies arrive in submission order too. `hungry` says when the caller should
    submit more episodes before collecting one, so that every worker has work queued.
    """

    def __init__(
        self,
        processes: int,
        sources: Mapping[str, RecordSource],
        image_size: int,
        resize: str = DEFAULT_RESIZE,
        segment_bytes: int = 0,
        spare_segments: int = 4,
        dtype: str = "uint8",
        float_range: tuple[float, float] = (0.0, 1.0),
        min_share: int = MIN_SHARE_IMAGES,
        emulate_decode_s: float = 0.0,
        emulate_stalls: tuple[float, float] = (0.0, 0.0),
    ):
        if processes < 1:
            raise ReaderError(f"decode processes={processes}: expected >= 1")
        self.num_processes = processes
        self.sources = dict(sources)
        self.image_size = image_size
        self.resize = resize
        self._processes: list = []
        self._connections: list[Connection] = []
        self.dtype = np.dtype(dtype)  # float: workers scale their rows (no pass in the parent)
        self.float_range = (float(float_range[0]), float(float_range[1]))
        self.segment_bytes = segment_bytes  # segments hold at least this (the largest episode)
        self.spare_segments = spare_segments  # free segments kept for reuse
        self._free: list[_Segment] = []
        self._lent: list[_Segment] = []  # handed out as episode arrays
        self._segments: set[str] = set()  # names of segments created and not yet unlinked
        self._pending: deque[_Ticket] = deque()
        self.min_share = min_share
        self.emulate_decode_s = emulate_decode_s  # benchmarks only (see `worker_main`)
        self.emulate_stalls = emulate_stalls
        self._queued_images = [0] * processes  # per worker: images sent, reply not yet read
        self._queued_shares = [0] * processes
        self._turn = 0  # the worker first in line among equally busy ones
        self._numbers = itertools.count()
        self._broken: DecodeProcessError | None = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(
            self, _shutdown, os.getpid(), self._processes, self._connections, self._segments
        )

    # -- lifecycle ----------------------------------------------------------------------

    def _start(self) -> None:
        if self._processes:
            return
        why_not = can_start_workers()
        if why_not is not None:
            raise ReaderError(f"decode_processes > 0: {why_not}; use decode_processes=0 here")
        for _ in range(self.num_processes):
            process = WorkerProcess(
                f"{__name__}:worker_main",
                (
                    self.sources,
                    self.image_size,
                    self.resize,
                    self.dtype.str,
                    self.float_range,
                    self.emulate_decode_s,
                    self.emulate_stalls,
                ),
                "episode-decode",
            )
            self._processes.append(process)
            self._connections.append(process.connection)

    def close(self) -> None:
        self._pending.clear()
        self._finalizer()

    # -- segments -----------------------------------------------------------------------

    def _take_segment(self, nbytes: int) -> _Segment:
        """A free segment of at least `nbytes` (segments whose arrays were all dropped are
        free again), else a new one."""
        still_lent = []
        for segment in self._lent:
            (still_lent if segment.in_use() else self._free).append(segment)
        self._lent = still_lent
        fitting = [s for s in self._free if s.nbytes >= nbytes]
        if fitting:
            segment = min(fitting, key=lambda s: s.nbytes)
            self._free.remove(segment)
        else:
            segment = _Segment(max(nbytes, self.segment_bytes))
            self._segments.add(segment.name)
        while len(self._free) > self.spare_segments:  # drop the smallest spares
            self._retire(min(self._free, key=lambda s: s.nbytes))
        return segment

    def _retire(self, segment: _Segment) -> None:
        self._free.remove(segment)
        for conn in self._connections:
            conn.send(("drop", segment.name))
        self._segments.discard(segment.name)
        unlink_segment(segment.name)

    # -- work ---------------------------------------------------------------------------

    def submit(self, source: str, rows: Sequence[tuple[int, int, int]], total: int) -> _Ticket:
        """Hand out the rows (row, class id, record) of an episode of `total` images."""
        with self._lock:
            self._check_usable()
            self._start()
            while self._pending and self._pending[0].discarded:  # reclaim abandoned segments
                self._drain_until(self._pending[0])
            size = self.image_size
            segment = self._take_segment(total * size * size * 3 * self.dtype.itemsize)
            array = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
            ticket = _Ticket(next(self._numbers), segment, total, [])
            self._pending.append(ticket)
            pieces = split_rows(array, share_count(len(array), self.num_processes, self.min_share))
            for position, piece in zip(self._least_busy(len(pieces)), pieces):
                message = ("decode", ticket.number, segment.name, segment.nbytes, source)
                try:
                    self._connections[position].send((*message, piece.tobytes(), total))
                except OSError:  # a broken pipe: the worker is gone
                    raise self._worker_died(position) from None
                ticket.workers.append((position, len(piece)))
                self._queued_images[position] += len(piece)
                self._queued_shares[position] += 1
            return ticket

    def _least_busy(self, count: int) -> list[int]:
        """`count` distinct worker positions with the fewest images queued, ties taken in
        turn (so that every worker gets work, and each one's files stay warm alike)."""
        n, turn = self.num_processes, self._turn
        order = sorted(range(n), key=lambda w: (self._queued_images[w], (w - turn) % n))
        self._turn = (turn + count) % n
        return order[:count]

    def hungry(self) -> bool:
        """Whether a worker holds fewer than `BUSY_SHARES` shares and another episode would fit
        in memory: the caller should then submit one more before collecting."""
        if min(self._queued_shares) >= BUSY_SHARES:
            return False
        in_flight = sum(t.segment.nbytes for t in self._pending)
        if in_flight + self.segment_bytes > IN_FLIGHT_BYTES:
            return False
        free = shared_memory_free()
        return free is None or free > 4 * max(self.segment_bytes, 1)

    def _receive(self, ticket: _Ticket) -> None:
        """Read every worker's reply to `ticket` (which is the oldest pending one)."""
        for position, count in ticket.workers:
            conn = self._connections[position]
            try:
                reply = conn.recv()
            except (EOFError, OSError):
                raise self._worker_died(position) from None
            self._queued_images[position] -= count
            self._queued_shares[position] -= 1
            if reply[1] != ticket.number:  # pragma: no cover - protocol invariant
                raise DecodeProcessError(
                    f"decode worker replied to episode {reply[1]}, expected {ticket.number}"
                )
            if reply[0] == "error" and ticket.error is None:
                kind, message = reply[2], reply[3]
                error_type = _ERRORS.get(kind)
                ticket.error = (
                    error_type(message)
                    if error_type is not None
                    else DecodeProcessError(f"decode worker failed: {kind}: {message}")
                )
        ticket.done = True

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise DecodeProcessError(f"the decoding workers stopped earlier: {self._broken}")

    def _worker_died(self, position: int) -> DecodeProcessError:
        """The error for a worker that exited; the pool stops (no later reply would come)."""
        process = self._processes[position]
        process.join(timeout=1)
        error = DecodeProcessError(
            f"decode worker process {process.pid} exited unexpectedly "
            f"(exit code {process.exitcode})"
        )
        self._broken = error
        self._pending.clear()
        self._free.clear()
        self._finalizer()
        return error

    def _drain_until(self, ticket: _Ticket) -> None:
        """Read replies in submission order up to and including `ticket`'s."""
        while self._pending:
            oldest = self._pending.popleft()
            self._receive(oldest)
            if oldest.discarded:
                self._free.append(oldest.segment)
            if oldest is ticket:
                return

    def collect(self, ticket: _Ticket) -> np.ndarray:
        """The pixels of `ticket` once every worker finished its share: an array over the
        episode's segment (no copy), lent until every array over it is dropped."""
        with self._lock:
            if not ticket.done:
                self._check_usable()
                self._drain_until(ticket)
            if ticket.error is not None:
                if self._broken is None:
                    self._free.append(ticket.segment)
                raise ticket.error
            self._lent.append(ticket.segment)
            return ticket.segment.pixels(ticket.total, self.image_size, self.dtype)

    def discard(self, ticket: _Ticket) -> None:
        """Forget a submitted ticket; its segment is free again once its replies are read."""
        with self._lock:
            if ticket.done:  # replies read already (it left the pending queue then)
                self._free.append(ticket.segment)
            else:
                ticket.discarded = True
