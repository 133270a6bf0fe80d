"""Reading members of the archives raw datasets ship as: tar (plain, .gz, .bz2, .xz) and zip.

Compressed tar streams cannot be seeked, so the plan lists a tar once (`list_tar_members`,
one streaming pass that records where each member's bytes start in the *uncompressed*
stream) and a worker reads its members with `read_tar_members`: it re-opens the archive and
seeks forward member by member. A forward seek in a gzip/bz2/xz stream decompresses and
discards, so one unit costs one decompression up to its last member; units made of members
that are contiguous in the archive keep the total cost at a few passes over the archive.
An archive may be a local file or an object in storage (a URL: read as a stream of large
ranged reads, episodes.storage.paths.open_binary).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from beam_pipelines.sources.base import LayoutError
from episodes.storage.paths import is_remote, open_binary

__all__ = [
    "announce",
    "archive_size",
    "compression_of",
    "describe",
    "list_tar_members",
    "open_archive_file",
    "open_decompressed",
    "open_file_or_zip_member",
    "read_named_tar_members",
    "read_tar_members",
    "STREAM_BUFFER_BYTES",
    "STREAM_ERRORS",
    "TarMember",
    "zip_names",
]

# Errors a damaged compressed stream or archive raises while being read.
STREAM_ERRORS = (
    EOFError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    tarfile.TarError,
    zipfile.BadZipFile,
)
_ANNOUNCE_BYTES = 50 * 2**20


@dataclass(frozen=True)
class TarMember:
    """A regular file inside a tar: its name and where its bytes lie in the uncompressed stream."""

    name: str
    offset: int
    size: int


STREAM_BUFFER_BYTES = 8 * 2**20  # what one read of an archive object fetches


def open_archive_file(path: str | Path, buffer_bytes: int = STREAM_BUFFER_BYTES) -> BinaryIO:
    """A seekable binary stream of a local file or of an object (`path` a URL)."""
    return open_binary(str(path), buffer_bytes=buffer_bytes)


def archive_size(path: str | Path) -> int:
    """The size in bytes of a local file or an object."""
    if is_remote(path):
        with open_archive_file(path, 2**16) as stream:
            return stream.seek(0, io.SEEK_END)
    return Path(path).stat().st_size


def compression_of(path: str | Path) -> str | None:
    """'gzip', 'bz2', 'xz' or None (uncompressed), from the file's magic bytes."""
    with open_archive_file(path, 2**16) as stream:
        head = stream.read(6)
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:3] == b"BZh":
        return "bz2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    return None


@contextmanager
def open_decompressed(path: str | Path) -> Iterator[BinaryIO]:
    """The file's uncompressed byte stream (forward seeks decompress and discard)."""
    openers = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}
    kind = compression_of(path)
    with open_archive_file(path) as raw:
        if kind is None:
            yield raw
            return
        with openers[kind](raw, "rb") as stream:
            yield stream


def announce(path: str | Path, action: str) -> None:
    """One stderr line before a pass over a large archive (planning can take seconds)."""
    size = archive_size(path)
    if size >= _ANNOUNCE_BYTES:
        print(f"{action} {path} ({size / 2**20:,.0f} MiB) ...", file=sys.stderr, flush=True)


def list_tar_members(path: str | Path) -> list[TarMember]:
    """Every regular file of a tar archive, in archive order (one streaming pass)."""
    announce(path, "listing")
    members = []
    try:
        with open_archive_file(path) as raw, tarfile.open(fileobj=raw, mode="r|*") as archive:
            for info in archive:
                if info.isfile():
                    members.append(TarMember(info.name, info.offset_data, info.size))
    except STREAM_ERRORS as exc:
        where = f" after {members[-1].name}" if members else ""
        raise LayoutError(f"{path}: not a readable tar archive{where} ({exc})") from None
    return members


def read_tar_members(
    path: str | Path, members: Sequence[TarMember]
) -> Iterator[tuple[TarMember, bytes | None, str | None]]:
    """Yield (member, data, None) in offset order, or (member, None, reason) for a member the
    archive cannot deliver (truncated or damaged stream: that member and every later one)."""
    broken: str | None = None
    with open_decompressed(path) as stream:
        for member in sorted(members, key=lambda m: m.offset):
            if broken is None:
                try:
                    stream.seek(member.offset)
                    data = stream.read(member.size)
                    if len(data) != member.size:
                        broken = (
                            f"archive ends inside this member ({len(data)} of {member.size} bytes)"
                        )
                except STREAM_ERRORS as exc:
                    broken = f"damaged archive stream ({type(exc).__name__}: {exc})"
            if broken is not None:
                yield member, None, broken
                continue
            yield member, data, None


def read_named_tar_members(path: str | Path, names: Sequence[str]) -> dict[str, bytes]:
    """The bytes of several named members, in one streaming pass (missing names are absent)."""
    announce(path, "reading")
    wanted, found = set(names), {}
    try:
        with open_archive_file(path) as raw, tarfile.open(fileobj=raw, mode="r|*") as archive:
            for info in archive:
                if info.name in wanted and info.isfile():
                    handle = archive.extractfile(info)
                    assert handle is not None
                    found[info.name] = handle.read()
                    if len(found) == len(wanted):
                        break
    except STREAM_ERRORS as exc:
        raise LayoutError(f"{path}: not a readable tar archive ({exc})") from None
    return found


def zip_names(path: str | Path) -> list[str]:
    """Names of the regular files of a zip archive."""
    try:
        with open_archive_file(path, 2**20) as raw, zipfile.ZipFile(raw) as archive:
            return [n for n in archive.namelist() if not n.endswith("/")]
    except (zipfile.BadZipFile, OSError) as exc:
        raise LayoutError(f"{path}: not a readable zip archive ({exc})") from None


@contextmanager
def open_file_or_zip_member(path: str, member: str | None = None) -> Iterator[BinaryIO]:
    """A binary stream of a plain file (`member` None) or of one member of the zip at `path`."""
    with open_archive_file(path) as raw:
        if member is None:
            yield raw
            return
        with zipfile.ZipFile(raw) as archive, archive.open(member) as stream:
            yield stream


def describe(path: str | Path, member: str | None = None) -> str:
    """How reports name a file that may live inside an archive: `archive:member` or the path."""
    return f"{path}:{member}" if member else str(path)
