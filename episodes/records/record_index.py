"""The `{class_id}.index` sidecar: byte offset of every record of `{class_id}.tfrecords`.

Layout (little endian): 8-byte magic `FSTIDX01`, u64 record count, u64 size of the records
file the index describes, then one u64 offset per record. With it a reader fetches example k
of class c with one seek and one read (length = next offset - offset), and a stale index (the
records file changed size) is detected before any wrong bytes are returned.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from episodes.records.tfrecord_io import iter_record_offsets
from episodes.util.atomic_files import write_bytes_atomically
from episodes.util.cli_errors import UserError

__all__ = [
    "IndexError_",
    "MAGIC",
    "RecordIndex",
    "RecordIndexError",
    "build_index",
    "cached_index_path",
    "index_path_for",
    "keep_index",
    "load_or_build_index",
    "read_index",
    "stale_index_message",
    "write_index",
]

MAGIC = b"FSTIDX01"
_HEAD = struct.Struct("<8sQQ")


class IndexError_(UserError, ValueError):
    """A missing, corrupt or stale record index."""


RecordIndexError = IndexError_


@dataclass(frozen=True)
class RecordIndex:
    """Offsets of the records of one TFRecord file, plus the file size they describe."""

    offsets: np.ndarray  # uint64, one per record
    file_size: int

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def span(self, k: int) -> tuple[int, int]:
        """(offset, frame length) of record k."""
        n = len(self)
        if not 0 <= k < n:
            raise IndexError(f"record {k} out of range: the file has {n} records")
        start = int(self.offsets[k])
        end = int(self.offsets[k + 1]) if k + 1 < n else self.file_size
        return start, end - start

    def to_bytes(self) -> bytes:
        head = _HEAD.pack(MAGIC, len(self), self.file_size)
        return head + np.asarray(self.offsets, dtype="<u8").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "index") -> RecordIndex:
        if len(data) < _HEAD.size:
            raise RecordIndexError(f"{where}: too short to be a record index ({len(data)} bytes)")
        magic, count, file_size = _HEAD.unpack_from(data)
        if magic != MAGIC:
            raise RecordIndexError(f"{where}: bad magic {magic!r}, expected {MAGIC!r}")
        if len(data) != _HEAD.size + 8 * count:
            raise RecordIndexError(
                f"{where}: header says {count} records but holds {(len(data) - _HEAD.size) // 8}"
            )
        offsets = np.frombuffer(data, dtype="<u8", offset=_HEAD.size).astype(np.uint64)
        if count and (np.any(np.diff(offsets.astype(np.int64)) <= 0) or offsets[-1] >= file_size):
            raise RecordIndexError(f"{where}: offsets are not increasing within the file")
        return cls(offsets=offsets, file_size=int(file_size))


def index_path_for(records_path: str | os.PathLike) -> Path:
    """`<dir>/<class>.tfrecords` -> `<dir>/<class>.index`."""
    path = Path(records_path)
    return path.with_suffix(".index")


def build_index(records_path: str | os.PathLike) -> RecordIndex:
    """Scan a TFRecord file (verifying CRCs) and return its index."""
    path = Path(records_path)
    with open(path, "rb") as stream:
        offsets = [offset for offset, _ in iter_record_offsets(stream, where=str(path))]
    return RecordIndex(np.asarray(offsets, dtype=np.uint64), path.stat().st_size)


def write_index(index: RecordIndex, index_path: str | os.PathLike) -> None:
    """Write atomically (temp file + rename), so readers never see a partial index."""
    write_bytes_atomically(index_path, index.to_bytes())


def read_index(
    index_path: str | os.PathLike, records_path: str | os.PathLike | None = None
) -> RecordIndex:
    """Read an index; when `records_path` is given, check it still describes that file."""
    index_path = Path(index_path)
    if not index_path.exists():
        raise RecordIndexError(f"{index_path}: record index not found")
    index = RecordIndex.from_bytes(index_path.read_bytes(), where=str(index_path))
    if records_path is not None:
        size = Path(records_path).stat().st_size
        if size != index.file_size:
            raise RecordIndexError(stale_index_message(index, index_path, records_path, size))
    return index


def stale_index_message(
    index: RecordIndex, index_path: str | os.PathLike, records_path: str | os.PathLike, size: int
) -> str:
    """Why an index no longer fits its records file: a file cut short names the record it ends
    inside (restore or re-convert it); any other change asks to delete the index."""
    if size < index.file_size:
        cut = int(np.searchsorted(index.offsets, size, side="right")) - 1
        whole = "" if cut < 0 or int(index.offsets[cut]) == size else "inside "
        return (
            f"{records_path} is cut short: {size} of the {index.file_size} bytes its index "
            f"{index_path} describes, ending {whole}record {max(cut, 0)} of {len(index)} "
            "(restore the file or convert the dataset again)"
        )
    return (
        f"{index_path}: stale index (describes {index.file_size} bytes, {records_path} has "
        f"{size}); delete it to rebuild"
    )


def load_or_build_index(
    records_path: str | os.PathLike, cache_dir: str | os.PathLike | None = None
) -> RecordIndex:
    """Index of a records file: the sidecar if present, else build it and keep it.

    Datasets converted by the reference Meta-Dataset tool have no `.index` files: the index
    is built on first use and written beside the records, or under `cache_dir` (or when the
    dataset folder is read-only, `~/.cache/fewshot-tasksets/index/...`).
    """
    records_path = Path(records_path)
    sidecar = index_path_for(records_path)
    candidates = [sidecar]
    cached = cached_index_path(records_path, cache_dir)
    candidates.append(cached)
    for candidate in candidates:
        if candidate.exists():
            try:
                return read_index(candidate, records_path)
            except RecordIndexError:
                if candidate == sidecar:
                    raise
    if not records_path.exists():
        raise RecordIndexError(f"{records_path}: records file not found")
    index = build_index(records_path)
    keep_index(index, records_path, cache_dir)
    return index


def keep_index(
    index: RecordIndex, records_path: str | os.PathLike, cache_dir: str | os.PathLike | None = None
) -> Path | None:
    """Write a built index beside its records, or under the cache folder when the dataset
    folder is read-only; return where it went (None when neither could be written)."""
    records_path = Path(records_path)
    for target in (index_path_for(records_path), cached_index_path(records_path, cache_dir)):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_index(index, target)
            return target
        except OSError:
            continue
    return None


def cached_index_path(records_path: str | os.PathLike, cache_dir: str | os.PathLike | None) -> Path:
    """Where the index of a records file in a read-only folder is kept."""
    records_path = Path(records_path)
    root = Path(cache_dir) if cache_dir else Path.home() / ".cache" / "fewshot-tasksets" / "index"
    resolved = records_path.resolve()
    return root / resolved.parent.relative_to(resolved.anchor) / (resolved.stem + ".index")
