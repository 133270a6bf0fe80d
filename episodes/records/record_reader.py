"""Random access to converted datasets: example k of class c with one seek, CRCs verified.

No TensorFlow on this path. Open file handles are bounded by an LRU pool, whatever the class
count, and indexes are loaded lazily per class.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from episodes.records.example_proto import ExampleDecodeError, decode_image_example
from episodes.records.record_index import RecordIndex, RecordIndexError, load_or_build_index
from episodes.records.tfrecord_io import (
    FRAME_OVERHEAD,
    CorruptRecordError,
    masked_crc32c,
    unframe_record,
)

__all__ = [
    "CorruptRecordError",
    "FileHandlePool",
    "MAX_READ_BYTES",
    "MAX_READ_GAP",
    "RecordReader",
    "verified_payload",
]

MAX_READ_GAP = 0  # read_payloads: records this close (bytes) share one read
MAX_READ_BYTES = 4 << 20  # ... up to this many bytes per read
_FRAME_HEAD = struct.Struct("<QI")  # payload length, masked CRC of the length bytes
_FRAME_FOOT = struct.Struct("<I")  # masked CRC of the payload


def verified_payload(frame: bytes) -> bytes | None:
    """The payload of a complete TFRecord frame whose length and CRCs verify, else None
    (then `tfrecord_io.unframe_record` says what is wrong). Fewer copies than unframe_record."""
    length = len(frame) - FRAME_OVERHEAD
    if length < 0:
        return None
    declared, length_crc = _FRAME_HEAD.unpack_from(frame)
    if declared != length or masked_crc32c(frame[:8]) != length_crc:
        return None
    payload = frame[12 : 12 + length]
    if masked_crc32c(payload) != _FRAME_FOOT.unpack_from(frame, 12 + length)[0]:
        return None
    return payload


class FileHandlePool:
    """At most `capacity` open files; least recently used handles are closed first.
    Subclasses open other handles (remote_records.ObjectRangePool: object streams) through
    `_open`, `_close` and `_read_at`."""

    kind = "file handle"

    def __init__(self, capacity: int = 64):
        if capacity < 1:
            raise ValueError(f"{self.kind} pool capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._handles: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def _open(self, path: str) -> Any:
        return os.open(path, os.O_RDONLY)

    def _close(self, fd: Any) -> None:
        os.close(fd)

    def _read_at(self, fd: Any, offset: int, length: int) -> bytes:
        """os.pread: no shared file position between threads."""
        return os.pread(fd, length, offset)

    def read(self, path: str, offset: int, length: int) -> bytes:
        """Read `length` bytes at `offset` of `path`, opening it (and closing the least
        recently used handle past `capacity`) if it is not open."""
        with self._lock:
            handle = self._handles.get(path)
            if handle is None:
                handle = self._open(path)
                self._handles[path] = handle
                while len(self._handles) > self.capacity:
                    _, old = self._handles.popitem(last=False)
                    self._close(old)
            else:
                self._handles.move_to_end(path)
            return self._read_at(handle, offset, length)

    @property
    def open_count(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        with self._lock:
            while self._handles:
                _, handle = self._handles.popitem()
                self._close(handle)

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


class RecordReader:
    """Reads records of a converted dataset folder by (class id, record number)."""

    def __init__(
        self,
        dataset_dir: str | os.PathLike,
        file_pattern: str = "{}.tfrecords",
        max_open_files: int = 64,
        index_cache_dir: str | os.PathLike | None = None,
    ):
        self.dataset_dir = Path(dataset_dir)
        self.file_pattern = file_pattern
        self.index_cache_dir = index_cache_dir
        self._pool = FileHandlePool(max_open_files)
        self._indexes: dict[int, RecordIndex] = {}
        self._paths: dict[int, str] = {}  # class id -> records path as a string (hot path)
        self._index_lock = threading.Lock()

    def records_path(self, class_id: int) -> Path:
        return self.dataset_dir / self.file_pattern.format(class_id)

    def index(self, class_id: int) -> RecordIndex:
        index = self._indexes.get(class_id)
        if index is None:
            with self._index_lock:
                index = self._indexes.get(class_id)
                if index is None:
                    index = self._load_index(class_id)
                    self._indexes[class_id] = index
        return index

    def _load_index(self, class_id: int) -> RecordIndex:
        """The class's index, or one line naming the file, the class and the bad record."""
        path = self.records_path(class_id)
        try:
            index = load_or_build_index(path, self.index_cache_dir)
        except (RecordIndexError, CorruptRecordError) as exc:
            text = str(exc).replace(f"{path}: ", "").replace(f"{path} ", "the file ")
            if isinstance(exc, RecordIndexError):  # an index to rebuild, or a file cut short
                raise RecordIndexError(f"file {path}, class {class_id}: {text}") from None
            text += " (restore the file or convert the dataset again)"
            raise CorruptRecordError(f"file {path}, class {class_id}: {text}") from None
        self._check_first_label(index, path, class_id)
        return index

    def _check_first_label(self, index: RecordIndex, path: Path, class_id: int) -> None:
        """File names are not trusted: a class file whose first record carries another
        class's label (files renamed or swapped) would serve images under the wrong class."""
        if len(index) == 0:
            return
        offset, length = index.span(0)
        frame = self._pool.read(str(path), offset, length)
        payload = verified_payload(frame)
        if payload is None:  # a damaged record: reading it names it, in the reader's order
            return
        try:
            _, label = decode_image_example(payload)
        except ExampleDecodeError:  # not an image record: what reads it says so
            return
        if label != class_id:
            raise CorruptRecordError(
                f"file {path}, class {class_id}: its first record is labelled class {label} "
                "(class files renamed or swapped?): restore the files or convert the dataset "
                "again"
            )

    def num_records(self, class_id: int) -> int:
        return len(self.index(class_id))

    def read_payload(self, class_id: int, k: int) -> bytes:
        """Serialized tf.train.Example of record k of class `class_id`."""
        offset, length = self.index(class_id).span(k)
        path = self._paths.get(class_id)
        if path is None:
            path = self._paths[class_id] = str(self.records_path(class_id))
        frame = self._pool.read(path, offset, length)
        payload = verified_payload(frame)
        if payload is None:
            payload = self._unframe(frame, path, class_id, k)
        return payload

    def read_payloads(
        self, class_id: int, records: Sequence[int], max_gap: int = MAX_READ_GAP
    ) -> list[bytes]:
        """Payloads of records `records` of one class, in that order, CRC-verified like
        `read_payload`; records at most `max_gap` bytes apart share one read (fewer system
        calls: an episode usually takes many records of each class)."""
        index = self.index(class_id)
        spans = [index.span(k) for k in records]  # IndexError for a record out of range
        path = self._paths.get(class_id)
        if path is None:
            path = self._paths[class_id] = str(self.records_path(class_id))
        order = sorted(range(len(spans)), key=spans.__getitem__)
        payloads: list[bytes] = [b""] * len(spans)
        i = 0
        while i < len(order):
            first = spans[order[i]][0]
            end = first + spans[order[i]][1]
            j = i + 1
            while j < len(order):
                offset, length = spans[order[j]]
                if offset - end > max_gap or offset + length - first > MAX_READ_BYTES:
                    break
                end = max(end, offset + length)
                j += 1
            block = self._pool.read(path, first, end - first)
            for n in order[i:j]:
                offset, length = spans[n]
                frame = block[offset - first : offset - first + length]
                payload = verified_payload(frame)
                if payload is None:
                    payload = self._unframe(frame, path, class_id, records[n])
                payloads[n] = payload
            i = j
        return payloads

    def _unframe(self, frame: bytes, path: str, class_id: int, k: int) -> bytes:
        try:
            return unframe_record(frame, where=f"record {k}")
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"corrupt record: file {path}, class {class_id}, {exc}"
            ) from exc

    def read_example(self, class_id: int, k: int) -> tuple[bytes, int]:
        """(encoded image bytes, label) of record k of class `class_id`."""
        payload = self.read_payload(class_id, k)
        try:
            return decode_image_example(payload)
        except ExampleDecodeError as exc:
            raise CorruptRecordError(
                f"corrupt record: file {self.records_path(class_id)}, class {class_id}, "
                f"record {k}: {exc}"
            ) from exc

    @property
    def open_files(self) -> int:
        return self._pool.open_count

    def close(self) -> None:
        self._pool.close()
