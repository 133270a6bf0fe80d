"""Whole files or objects read in order with several reads in flight (object storage).

A worker that reads a unit's images one object at a time waits a round trip per image; here a
process-wide pool of READ_THREADS threads keeps up to IN_FLIGHT reads going while the caller
encodes, and hands the results back in the order asked, so record order and bytes are those of
plain sequential reads. Memory stays bounded: at most IN_FLIGHT objects wait unconsumed. Local
files are read in the caller's thread (a page-cache read costs less than a hand-off).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from episodes.storage.paths import is_remote, read_bytes, read_local_file

READ_THREADS = 8
IN_FLIGHT = 16

__all__ = ["IN_FLIGHT", "READ_THREADS", "read_in_order"]

_POOL: tuple[int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """This process's reading threads (kept: each keeps its own store client)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(READ_THREADS, "object-read"))
        return _POOL[1]


def _read(path: str) -> bytes | OSError:
    try:
        return read_bytes(path)
    except OSError as exc:
        return exc


def _read_local(path: str) -> bytes | OSError:
    try:
        return read_local_file(path)
    except OSError as exc:
        return exc


def read_in_order(paths: Iterable[str], in_flight: int = IN_FLIGHT) -> Iterator[bytes | OSError]:
    """The bytes of each of `paths`, in order, or the OSError its read raised."""
    pending: deque[Future | bytes | OSError] = deque()
    for path in paths:
        if is_remote(path):
            pending.append(_pool().submit(_read, path))
        else:
            pending.append(_read_local(path))
        if len(pending) >= max(1, in_flight):
            yield _result(pending.popleft())
    while pending:
        yield _result(pending.popleft())


def _result(entry: Future | bytes | OSError) -> bytes | OSError:
    return entry.result() if isinstance(entry, Future) else entry
