"""Episode descriptions computed ahead in a helper process, so the reader's thread only copies.

An episode description is a pure function of its index (`episodes.sampling.sampler`), so a helper
process can compute descriptions start, start+1, ... while the reader gathers pixels: on the
decoded cache, sampling is about a third of an episode's cost and, being Python, cannot overlap
with the copies on a thread (the GIL). Descriptions travel in pickled batches; the helper runs
at most `ahead` batches in front of the reader (credit-based flow control), and stops when the
stream ends or the reader closes it.
"""

from __future__ import annotations

import os
import pickle
import weakref
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from episodes.records.reader_errors import ReaderError
from episodes.sampling.episode import EpisodeDescription
from episodes.util.worker_processes import WorkerProcess, can_start_workers

__all__ = ["DescriptionPrefetcher", "DescriptionProcessError", "produce"]


class DescriptionProcessError(ReaderError):
    """The description helper process failed or exited."""


def produce(conn: Connection, sampler: Any, start: int, stop: int | None, batch: int) -> None:
    """Send batches of descriptions, one per credit received, until `stop` or None arrives."""
    index = start
    try:
        while stop is None or index < stop:
            try:
                credit = conn.recv()
            except (EOFError, OSError):
                return
            if credit is None:
                return
            end = index + batch if stop is None else min(index + batch, stop)
            try:
                descriptions = [sampler.episode(i) for i in range(index, end)]
            except Exception as exc:  # reported, then raised by the reader
                conn.send(("error", type(exc).__module__, type(exc).__name__, str(exc)))
                return
            conn.send(("ok", descriptions))
            index = end
        conn.send(("end",))
    except (BrokenPipeError, OSError):  # the reader went away
        return


def _stop(owner: int, process: Any, conn: Connection) -> None:
    """Stop the helper; only in the process that started it (not in a forked child)."""
    if os.getpid() != owner:
        return
    try:
        conn.send(None)
    except (OSError, ValueError):
        pass
    process.join(timeout=2)
    if process.is_alive():
        process.terminate()
        process.join(timeout=2)
    conn.close()


def _error_type(module: str, name: str) -> type[Exception] | None:
    """The exception class a helper reported, when it is one of this package's (or builtin)."""
    if module == "builtins" or module.startswith("episodes."):
        try:
            found = getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError):
            return None
        if isinstance(found, type) and issubclass(found, Exception):
            return found
    return None


class DescriptionPrefetcher:
    """Iterator over `sampler.episode(i)` for i in start..stop-1 (endless when stop is None),
    computed in a helper process `ahead` batches of `batch` in advance."""

    def __init__(
        self,
        sampler: Any,
        start: int = 0,
        stop: int | None = None,
        batch: int = 32,
        ahead: int = 4,
    ):
        if batch < 1 or ahead < 1:
            raise ReaderError(f"batch={batch}, ahead={ahead}: expected >= 1")
        try:
            pickle.dumps(sampler)
        except Exception as exc:
            raise ReaderError(
                f"the sampler ({type(sampler).__name__}) cannot be sent to a helper process "
                f"({type(exc).__name__}: {exc}); sample in the reader's process instead"
            ) from None
        why_not = can_start_workers()
        if why_not is not None:
            raise ReaderError(f"a description helper process cannot start: {why_not}")
        self._process = WorkerProcess(
            f"{__name__}:produce", (sampler, start, stop, batch), "episode-describe"
        )
        self._conn = self._process.connection
        for _ in range(ahead):
            self._conn.send(True)
        self._batch: list[EpisodeDescription] = []
        self._position = 0
        self._ended = False
        self._finalizer = weakref.finalize(self, _stop, os.getpid(), self._process, self._conn)

    def __iter__(self) -> Iterator[EpisodeDescription]:
        return self

    def __next__(self) -> EpisodeDescription:
        if self._position == len(self._batch):
            self._refill()
        description = self._batch[self._position]
        self._position += 1
        return description

    def _refill(self) -> None:
        if self._ended:
            raise StopIteration
        try:
            message = self._conn.recv()
        except (EOFError, OSError):
            self._ended = True
            self._process.join(timeout=1)
            self.close()
            raise DescriptionProcessError(
                f"description helper process {self._process.pid} exited unexpectedly "
                f"(exit code {self._process.exitcode})"
            ) from None
        if message[0] == "end":
            self._ended = True
            self.close()
            raise StopIteration
        if message[0] == "error":
            self._ended = True
            self.close()
            _, module, name, text = message
            error_type = _error_type(module, name)
            try:
                error = error_type(text) if error_type is not None else None
            except Exception:  # a constructor that wants other arguments
                error = None
            if error is None:
                raise DescriptionProcessError(f"description helper failed: {name}: {text}")
            raise error
        self._batch, self._position = message[1], 0
        try:
            self._conn.send(True)  # one more batch may be computed
        except OSError:
            pass  # the helper finished its range

    def close(self) -> None:
        """Stop the helper process (idempotent)."""
        self._finalizer()

    def __enter__(self) -> DescriptionPrefetcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
