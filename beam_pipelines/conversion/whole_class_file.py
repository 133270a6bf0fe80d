"""The class file of a work unit that holds a whole class, written while the unit is read.

Most sources read one class per work unit (a class folder, an Omniglot character, an ILSVRC
archive), with the files listed by name, i.e. in record order. Such a class needs no spill file
and no GroupByKey: its frames go straight into the class file as they arrive, and the file is
rewritten in record order (item key, then image hash) only when they did not arrive in it. The
bytes are those of `writer.write_class_file` over the same items. With object-store staging the
frames wait in one local temporary file and the class object is uploaded once, in order.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import numpy as np

from beam_pipelines.conversion.frame_spill import open_output
from episodes.records.example_proto import decode_image_example
from episodes.records.record_index import RecordIndex
from episodes.records.tfrecord_io import unframe_record
from episodes.storage.paths import is_remote, join, write_bytes

__all__ = ["class_file_names", "class_result", "JOIN_BELOW_BYTES", "WholeClassFile", "write_index"]

JOIN_BELOW_BYTES = 2**16  # a smaller image's frame is joined (a copy costs less than calls)


def class_file_names(class_id: int, file_pattern: str = "{}.tfrecords") -> tuple[str, str]:
    """The names of a class's record file and its index."""
    records = file_pattern.format(class_id)
    return records, os.path.splitext(records)[0] + ".index"


def class_result(class_id: int, lengths: list[int], digest: Any, keys: list[str]) -> dict[str, Any]:
    """What a written class file reports to the spec (frame lengths in file order)."""
    return {
        "class_id": int(class_id),
        "images": len(lengths),
        "bytes": int(sum(lengths)),
        "sha256": digest.hexdigest(),
        "duplicate_keys": len(keys) - len(set(keys)),
    }


def write_index(path: str, lengths: list[int]) -> None:
    """The `.index` sidecar of a class file whose frames have these lengths, in file order."""
    offsets = np.zeros(len(lengths), dtype=np.uint64)
    if lengths:
        offsets[1:] = np.cumsum(lengths[:-1], dtype=np.uint64)
    write_bytes(path, RecordIndex(offsets, int(sum(lengths))).to_bytes())


class WholeClassFile:
    """`add` each encoded frame of one class in arrival order; `close` leaves the class file
    and its index in `output_dir` and returns the class result.

    Records are ordered by (item key, image sha256); the hash only decides between equal keys,
    so it is computed only for those (the usual class has none): when a key repeats the one
    before it, and for the repeated keys of a class that arrived out of order (read back)."""

    def __init__(self, class_id: int, output_dir: str):
        self.class_id = class_id
        records_name, index_name = class_file_names(class_id)
        self.records_path = join(output_dir, records_name)
        self.index_path = join(output_dir, index_name)
        self.remote = is_remote(output_dir)
        # local: the class file itself; object store: a local file uploaded by `close`
        self.stream: BinaryIO = (
            tempfile.TemporaryFile(prefix="fewshot-class-")
            if self.remote
            else open_output(self.records_path)
        )
        self.entries: list[list] = []  # [item key, image sha256 or None, offset, length]
        self.size = 0
        self.in_order = True
        self.digest = hashlib.sha256()
        self._last_image = b""

    def add(self, key: str, image: bytes, frame: Sequence[bytes]) -> None:
        """`frame`: the record's TFRecord frame in pieces; `image`: the encoded image in it."""
        sha = None
        if self.entries and key <= self.entries[-1][0]:
            last = self.entries[-1]
            if last[1] is None:
                last[1] = hashlib.sha256(self._last_image).digest()
            sha = hashlib.sha256(image).digest()
            if (key, sha) < (last[0], last[1]):
                self.in_order = False
        if len(image) < JOIN_BELOW_BYTES:  # one write and one hash update: fewer calls
            frame = (b"".join(frame),)
        length = 0
        for piece in frame:
            self.stream.write(piece)
            if self.in_order:
                self.digest.update(piece)
            length += len(piece)
        self.entries.append([key, sha, self.size, length])
        self.size += length
        self._last_image = image

    def close(self) -> dict[str, Any]:
        ordered = self.entries if self.in_order else self._sorted()
        if self.remote:
            self._upload(ordered)
        elif not self.in_order:
            self._rewrite_in_order(ordered)
        else:
            self.stream.close()
        lengths = [entry[3] for entry in ordered]
        write_index(self.index_path, lengths)
        return class_result(self.class_id, lengths, self.digest, [e[0] for e in ordered])

    def _sorted(self) -> list[list]:
        """The entries in record order; the images of repeated keys hashed from the file."""
        counts: dict[str, int] = {}
        for entry in self.entries:
            counts[entry[0]] = counts.get(entry[0], 0) + 1
        self.stream.flush()
        with self._arrived() as source:
            for entry in self.entries:
                if entry[1] is None and counts[entry[0]] > 1:
                    source.seek(entry[2])
                    payload = unframe_record(source.read(entry[3]))
                    entry[1] = hashlib.sha256(decode_image_example(payload)[0]).digest()
        return sorted(self.entries, key=lambda e: (e[0], e[1] or b"", e[2]))

    @contextlib.contextmanager
    def _arrived(self) -> Iterator[BinaryIO]:
        """The frames written so far, for reading (local: the class file; else the temporary
        file, left open)."""
        if self.remote:
            yield self.stream
            return
        with open(self.records_path, "rb") as source:
            yield source

    def _copy_in_order(self, source: BinaryIO, target: BinaryIO, ordered: list) -> None:
        digest = hashlib.sha256()
        for _, _, offset, length in ordered:
            source.seek(offset)
            frame = source.read(length)
            target.write(frame)
            digest.update(frame)
        self.digest = digest

    def _upload(self, ordered: list) -> None:
        with self.stream as local, open_output(self.records_path) as out:
            self._copy_in_order(local, out, ordered)

    def _rewrite_in_order(self, ordered: list) -> None:
        self.stream.close()
        arrived = self.records_path + ".arrived"
        os.replace(self.records_path, arrived)
        try:
            with open(arrived, "rb") as source, open_output(self.records_path) as out:
                self._copy_in_order(source, out, ordered)
        finally:
            os.remove(arrived)

    def abandon(self) -> None:
        """Close without publishing (the unit failed: the job is failing)."""
        self.stream.close()
