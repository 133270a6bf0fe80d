"""Encoded records parked in spill files, so that only small references travel through Beam.

A conversion's records would otherwise cross the GroupByKey whole: the local runner keeps every
grouped element in the launcher's memory (the whole dataset) and hands a worker a class at once.
Instead each encoding bundle appends its TFRecord frames to spill files and emits a `FrameRef`
(key, image hash, file, offset, length); the class writer reads its frames back one at a time.
With a local staging folder a bundle writes one spill file per class there (freed as soon as
its class is written). With object-store staging a bundle appends every frame to one local
temporary file and, when the bundle ends, uploads one object per class (that class's frames in
arrival order, so a reference's offset is known when the frame arrives): one upload at a time,
so a worker holds one upload part (episodes.storage.uploads) whatever the number of
classes in its bundle, where an open upload per (bundle, class) held 5 MB (S3) or 16 MB (GCS)
each. A class writer then reads each of its objects front to back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from typing import BinaryIO, NamedTuple

from apache_beam.io.filesystems import FileSystems

from episodes.storage.paths import (
    create_local_file,
    create_stream,
    discard_prefix,
    is_remote,
    join,
    open_binary,
)

__all__ = [
    "FrameRef",
    "frames_in_order",
    "open_output",
    "READ_BUFFER_BYTES",
    "release_spill_files",
    "remove_spill",
    "SPILL_FOLDER",
    "SpillWriter",
]

SPILL_FOLDER = "_spill"  # inside the staging folder; removed before the output is published


class FrameRef(NamedTuple):
    """Where one encoded record waits; sorts by (key, image sha256) as the class file does."""

    key: str
    sha256: bytes
    path: str
    offset: int
    length: int


def open_output(path: str) -> BinaryIO:
    """A binary stream writing one local file or one object."""
    if is_remote(path):
        return create_stream(path)
    return create_local_file(path)


READ_BUFFER_BYTES = 4 * 2**20  # a class writer reads its spill objects front to back


class SpillWriter:
    """One bundle's spill files: `add` appends a frame to its class's file (opened on first
    use) in a local staging folder, or to the bundle's one local temporary file that `close`
    uploads as one object into an object-store staging prefix."""

    def __init__(self, staging_dir: str):
        self.folder = FileSystems.join(staging_dir, SPILL_FOLDER)
        self.tag = uuid.uuid4().hex
        self.files: dict[int, tuple[str, BinaryIO, list[int]]] = {}
        self.remote = is_remote(staging_dir)
        self.local_file: BinaryIO | None = None
        # remote: per class, its object's path, size so far and (local offset, length) frames
        self.pending: dict[int, tuple[str, list[int], list[tuple[int, int]]]] = {}

    def add(self, class_id: int, key: str, sha256: bytes, frame: bytes) -> FrameRef:
        if self.remote:
            return self._add_remote(class_id, key, sha256, frame)
        if class_id not in self.files:
            path = FileSystems.join(self.folder, f"c{class_id:06d}-{self.tag}.frames")
            self.files[class_id] = (path, open_output(path), [0])
        path, stream, size = self.files[class_id]
        stream.write(frame)
        ref = FrameRef(key, sha256, path, size[0], len(frame))
        size[0] += len(frame)
        return ref

    def _add_remote(self, class_id: int, key: str, sha256: bytes, frame: bytes) -> FrameRef:
        if self.local_file is None:
            self.local_file = tempfile.TemporaryFile(prefix="fewshot-spill-")
        if class_id not in self.pending:
            path = join(self.folder, f"c{class_id:06d}-{self.tag}.frames")
            self.pending[class_id] = (path, [0], [])
        path, size, frames = self.pending[class_id]
        frames.append((self.local_file.tell(), len(frame)))
        self.local_file.write(frame)
        ref = FrameRef(key, sha256, path, size[0], len(frame))
        size[0] += len(frame)
        return ref

    def close(self) -> None:
        """Close the local spill files, or upload the bundle's frames, one object per class."""
        for _, stream, _ in self.files.values():
            stream.close()
        self.files = {}
        if self.local_file is None:
            return
        local, pending = self.local_file, self.pending
        self.local_file, self.pending = None, {}
        with local:
            for path, _, frames in pending.values():
                with create_stream(path) as out:
                    for offset, length in frames:
                        local.seek(offset)
                        out.write(local.read(length))


def frames_in_order(refs: list[FrameRef]) -> Iterator[bytes]:
    """The frames of `refs`, in the order of `refs`, holding one frame (plus a copy buffer) in
    memory. Local spill files are read in place; object-store ones are first copied, each with
    forward reads, into one local temporary file."""
    by_path: dict[str, list[int]] = {}
    for i, ref in enumerate(refs):
        by_path.setdefault(ref.path, []).append(i)
    if not any(is_remote(p) for p in by_path):
        handles = {p: open(p, "rb") for p in by_path}
        try:
            for ref in refs:
                handles[ref.path].seek(ref.offset)
                yield handles[ref.path].read(ref.length)
        finally:
            for handle in handles.values():
                handle.close()
        return
    local_offset = [0] * len(refs)
    with tempfile.TemporaryFile(prefix="fewshot-frames-") as local:
        for path, members in by_path.items():
            members.sort(key=lambda i: refs[i].offset)
            with open_binary(path, buffer_bytes=READ_BUFFER_BYTES) as stream:
                for i in members:
                    if stream.tell() != refs[i].offset:
                        stream.seek(refs[i].offset)
                    local_offset[i] = local.tell()
                    local.write(stream.read(refs[i].length))
        for i, ref in enumerate(refs):
            local.seek(local_offset[i])
            yield local.read(ref.length)


def release_spill_files(refs: Iterable[FrameRef]) -> None:
    """Delete a written class's local spill files at once (each holds one class of one bundle),
    which bounds the extra disk of a local job. Object-store ones stay until `remove_spill`:
    a runner that retries the class writer's bundle must still find them."""
    local = sorted({ref.path for ref in refs if not is_remote(ref.path)})
    for path in local:
        os.remove(path)


def remove_spill(staging_dir: str | os.PathLike) -> None:
    """Remove the spill folder of a finished job's staging folder (before it is published)."""
    if is_remote(staging_dir):
        discard_prefix(join(str(staging_dir), SPILL_FOLDER))
    else:
        shutil.rmtree(os.path.join(staging_dir, SPILL_FOLDER), ignore_errors=True)
