"""Records of a converted dataset in object storage (s3://, gs://, any Beam FileSystems scheme),
read where they lie: example k of class c with one ranged read of the class's object.

Beam workers (episode shards, class embeddings) read a dataset given as a URL through this, so no
worker needs the dataset as a local folder. Each class's `.index` object is read once (or, if it
is missing or describes another size, rebuilt in memory from one streamed pass over the records);
then every record is one seek and read of an open object stream, CRC-verified like
`RecordReader`'s. At most `max_open_files` streams stay open (least recently used closed first).
"""

from __future__ import annotations

import posixpath
from typing import IO

import numpy as np

from episodes.records.dataset_spec import SPEC_FILENAME, DatasetSpec, SpecError
from episodes.records.record_index import RecordIndex, RecordIndexError
from episodes.records.record_reader import FileHandlePool, RecordReader
from episodes.records.tfrecord_io import CorruptRecordError, iter_record_offsets
from episodes.storage import paths as storage_paths

__all__ = [
    "ObjectRangePool",
    "RANGE_BUFFER_BYTES",
    "RemoteRecordReader",
    "SCAN_BUFFER_BYTES",
    "load_remote_dataset",
    "missing_records",
]

RANGE_BUFFER_BYTES = 256 << 10  # what one ranged read fetches at least (neighbours come along)
SCAN_BUFFER_BYTES = 8 << 20  # reading a whole records object to rebuild its index


class ObjectRangePool(FileHandlePool):
    """At most `capacity` open object streams; `read(url, offset, length)` seeks and reads."""

    kind = "object stream"

    def __init__(self, capacity: int = 16, buffer_bytes: int = RANGE_BUFFER_BYTES):
        super().__init__(capacity)
        self.buffer_bytes = buffer_bytes

    def _open(self, url: str) -> IO[bytes]:
        return storage_paths.open_binary(url, buffer_bytes=self.buffer_bytes)

    def _close(self, stream: IO[bytes]) -> None:
        stream.close()

    def _read_at(self, stream: IO[bytes], offset: int, length: int) -> bytes:
        stream.seek(offset)
        parts, missing = [], length
        while missing > 0:
            block = stream.read(missing)
            if not block:  # past the end: the record is cut short; its CRC check says so
                break
            parts.append(block)
            missing -= len(block)
        return b"".join(parts)


class RemoteRecordReader(RecordReader):
    """`RecordReader` of a dataset folder in object storage; `sizes` (a listing of the folder,
    {name: bytes}) saves one metadata request per class."""

    def __init__(
        self,
        dataset_url: str,
        file_pattern: str = "{}.tfrecords",
        max_open_files: int = 16,
        sizes: dict[str, int] | None = None,
    ):
        super().__init__(".", file_pattern, max_open_files)
        self.dataset_dir = storage_paths.folder_url(dataset_url)  # type: ignore[assignment]
        self._pool = ObjectRangePool(max_open_files)
        self._sizes = sizes

    def records_path(self, class_id: int) -> str:  # type: ignore[override]
        return storage_paths.join(self.dataset_dir, self.file_pattern.format(class_id))

    def _size(self, name: str) -> int | None:
        if self._sizes is None:
            self._sizes = storage_paths.list_objects(self.dataset_dir)
        return self._sizes.get(name)

    def _load_index(self, class_id: int) -> RecordIndex:
        name = self.file_pattern.format(class_id)
        url = self.records_path(class_id)
        size = self._size(name)
        if size is None:
            raise RecordIndexError(f"file {url}, class {class_id}: no such object")
        index_name = posixpath.splitext(name)[0] + ".index"
        index = None
        if self._size(index_name) is not None:
            index_url = storage_paths.join(self.dataset_dir, index_name)
            try:
                index = RecordIndex.from_bytes(storage_paths.read_bytes(index_url), index_url)
            except RecordIndexError:
                index = None  # unreadable: rebuilt from the records below, as the reader does
            if index is not None and index.file_size != size:
                index = None  # describes another file (stale): rebuilt below
        if index is None:
            index = self._build_index(url, class_id, size)
        self._check_first_label(index, url, class_id)  # type: ignore[arg-type]
        return index

    def _build_index(self, url: str, class_id: int, size: int) -> RecordIndex:
        """The offsets of every record of `url`, from one streamed pass (CRCs checked)."""
        try:
            with storage_paths.open_binary(url, buffer_bytes=SCAN_BUFFER_BYTES) as stream:
                offsets = [offset for offset, _ in iter_record_offsets(stream, where=url)]
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"file {url}, class {class_id}: {exc} (restore the object or convert the "
                "dataset again)"
            ) from None
        return RecordIndex(np.asarray(offsets, dtype=np.uint64), size)


def load_remote_dataset(url: str) -> tuple[DatasetSpec, dict[str, int]]:
    """The spec of a finished dataset folder in object storage and its listing; one line if
    there is nothing there, or no `dataset_spec.json` (a conversion that did not finish)."""
    listing = storage_paths.list_objects(url)
    if not listing:
        raise SpecError(f"{url}: no objects under this prefix; expected a converted dataset")
    if SPEC_FILENAME not in listing:
        raise SpecError(
            f"{url}: incomplete dataset: {len(listing)} objects but no {SPEC_FILENAME} (the "
            "conversion did not finish; convert again with --overwrite)"
        )
    return storage_paths.load_remote_spec(url), listing


def missing_records(spec: DatasetSpec, listing: dict[str, int], class_ids) -> list[str]:
    """Names of the records objects of `class_ids` absent from `listing`."""
    names = [spec.file_pattern.format(c) for c in class_ids]
    return [name for name in names if name not in listing]
