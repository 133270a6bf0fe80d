"""TFRecord framing without TensorFlow.

Each record is: u64 length (little endian), u32 masked CRC32C of the length bytes, payload,
u32 masked CRC32C of the payload. This is the format `tf.io.TFRecordWriter` writes and
`tf.data.TFRecordDataset` reads, so files written here are readable by either tool.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from episodes.util.cli_errors import UserError
from episodes.util.moved_modules import moved_names

__all__ = [
    "CorruptRecordError",
    "FOOTER_SIZE",
    "FRAME_OVERHEAD",
    "HEADER_SIZE",
    "frame_pieces",
    "frame_record",
    "iter_frames",
    "iter_record_offsets",
    "iter_records",
    "masked_crc32c",
    "unframe_record",
    "write_records",
]

try:  # C implementation (fast); a dependency of the project.
    import google_crc32c as _gcrc

    def crc32c(data: bytes) -> int:
        """CRC-32C (Castagnoli) of `data`."""
        return _gcrc.value(bytes(data))

    def crc32c_extend(crc: int, data: bytes) -> int:
        """CRC-32C of the bytes whose CRC is `crc` followed by `data`."""
        return _gcrc.extend(crc, data)

    _extend = _gcrc.extend  # crc32c_extend without the Python call (one per record piece)

except ImportError:  # pragma: no cover - fallback when google-crc32c is missing
    import crcmod.predefined as _crcmod

    _CRC_FN = _crcmod.mkPredefinedCrcFun("crc-32c")

    def crc32c(data: bytes) -> int:
        """CRC-32C (Castagnoli) of `data`."""
        return _CRC_FN(bytes(data))

    def crc32c_extend(crc: int, data: bytes) -> int:
        """CRC-32C of the bytes whose CRC is `crc` followed by `data`."""
        return _CRC_FN(bytes(data), crc)

    _extend = crc32c_extend


_MASK_DELTA = 0xA282EAD8
HEADER_SIZE = 12  # u64 length + u32 masked crc
FOOTER_SIZE = 4  # u32 masked crc of the payload
FRAME_OVERHEAD = HEADER_SIZE + FOOTER_SIZE

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")


class CorruptRecordError(UserError, ValueError, RuntimeError):
    """A TFRecord record whose frame (length, CRC) does not verify or whose payload does not
    parse, named by file (and, from the reader, class and record number). One class for what
    were two (`RecordCorruptError`, a ValueError, and the reader's `CorruptRecordError`, a
    RuntimeError): it is both, so either `except` still catches it."""


__getattr__ = moved_names(__name__, {"RecordCorruptError": f"{__name__}:CorruptRecordError"})


def masked_crc32c(data: bytes) -> int:
    """The masked CRC used by TFRecord framing: rotate right by 15 and add a constant."""
    return _masked(crc32c(data))


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_pieces(pieces: Sequence[bytes]) -> list[bytes]:
    """`frame_record(b"".join(pieces))` as a list of pieces: a large payload part (an image) is
    framed without being copied into one buffer first."""
    crc = size = 0
    for piece in pieces:
        crc = _extend(crc, piece)
        size += len(piece)
    length = _LEN.pack(size)
    return [length + _CRC.pack(masked_crc32c(length)), *pieces, _CRC.pack(_masked(crc))]


def frame_record(payload: bytes) -> bytes:
    """Return `payload` wrapped in a TFRecord frame."""
    length = _LEN.pack(len(payload))
    return b"".join(
        (length, _CRC.pack(masked_crc32c(length)), payload, _CRC.pack(masked_crc32c(payload)))
    )


def unframe_record(frame: bytes | memoryview, where: str = "record") -> bytes:
    """Verify a complete frame (header, payload, footer) and return its payload."""
    frame = memoryview(frame)
    if len(frame) < FRAME_OVERHEAD:
        raise CorruptRecordError(f"{where}: truncated frame of {len(frame)} bytes")
    length_bytes = frame[:8]
    (length,) = _LEN.unpack(length_bytes)
    (length_crc,) = _CRC.unpack(frame[8:12])
    if masked_crc32c(length_bytes) != length_crc:
        raise CorruptRecordError(f"{where}: length CRC mismatch")
    if len(frame) != length + FRAME_OVERHEAD:
        raise CorruptRecordError(
            f"{where}: frame holds {len(frame) - FRAME_OVERHEAD} payload bytes, header says {length}"
        )
    payload = frame[12 : 12 + length]
    (payload_crc,) = _CRC.unpack(frame[12 + length :])
    if masked_crc32c(payload) != payload_crc:
        raise CorruptRecordError(f"{where}: payload CRC mismatch")
    return bytes(payload)


def iter_frames(stream: BinaryIO, where: str = "file") -> Iterator[tuple[int, bytes, bool]]:
    """Yield (offset, payload, payload CRC ok) for every record of an open file.

    A broken frame (truncated, or a length whose CRC fails) ends the stream with
    CorruptRecordError: nothing after it can be located. A payload whose CRC fails is still
    delimited, so it is yielded with ok=False and the caller decides (raise, or count it)."""
    offset = stream.tell()
    index = 0
    while True:
        header = stream.read(HEADER_SIZE)
        if not header:
            return
        if len(header) < HEADER_SIZE:
            raise CorruptRecordError(f"{where}: record {index} at byte {offset}: truncated header")
        (length,) = _LEN.unpack(header[:8])
        (length_crc,) = _CRC.unpack(header[8:])
        if masked_crc32c(header[:8]) != length_crc:
            raise CorruptRecordError(
                f"{where}: record {index} at byte {offset}: length CRC mismatch"
            )
        body = stream.read(length + FOOTER_SIZE)
        if len(body) < length + FOOTER_SIZE:
            raise CorruptRecordError(f"{where}: record {index} at byte {offset}: truncated payload")
        payload = body[:length]
        (payload_crc,) = _CRC.unpack(body[length:])
        yield offset, payload, masked_crc32c(payload) == payload_crc
        offset += length + FRAME_OVERHEAD
        index += 1


def iter_record_offsets(stream: BinaryIO, where: str = "file") -> Iterator[tuple[int, bytes]]:
    """Yield (offset, payload) for every record of an open file, verifying both CRCs."""
    for index, (offset, payload, ok) in enumerate(iter_frames(stream, where)):
        if not ok:
            raise CorruptRecordError(
                f"{where}: record {index} at byte {offset}: payload CRC mismatch"
            )
        yield offset, payload


def iter_records(path: str) -> Iterator[bytes]:
    """Yield every verified payload of a TFRecord file."""
    with open(path, "rb") as stream:
        for _, payload in iter_record_offsets(stream, where=str(path)):
            yield payload


def write_records(path: str, payloads: list[bytes]) -> list[int]:
    """Write payloads as TFRecords; return the byte offset of each record."""
    offsets = []
    position = 0
    with open(path, "wb") as out:
        for payload in payloads:
            frame = frame_record(payload)
            offsets.append(position)
            out.write(frame)
            position += len(frame)
    return offsets
