"""The header facts of a JPEG that a conversion keeping it byte for byte needs, read from its
markers in microseconds: size, components, sample precision and where the first scan starts.

PIL's `Image.open` parses the same markers in Python with its plugin machinery (about a third
of the per-image time of converting a folder of JPEGs that are kept as they are); this walks
them with a few slices. Only the plain case is answered (a baseline, extended or progressive
8-bit frame, no multi-picture APP2 segment, well-formed segment lengths); anything else returns
None and the caller takes PIL's path, so what is accepted, converted or rejected is unchanged
for every file PIL parses.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "jpeg_header",
    "JPEG_MAGIC",
    "JpegHeader",
    "MULTI_PICTURE",
    "SOF_MARKERS",
    "STANDALONE",
    "START_OF_SCAN",
]

JPEG_MAGIC = b"\xff\xd8\xff"  # SOI and the next marker's 0xFF: what PIL opens as a JPEG
# Start-of-frame markers (PIL's JpegImagePlugin.MARKER "SOF" entries): C0-CF but DHT (C4),
# JPG (C8) and DAC (CC).
SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
START_OF_SCAN = 0xDA
STANDALONE = frozenset(range(0xD0, 0xD9)) | {0x01}  # RSTn, SOI, TEM: no length field
_SEGMENT = struct.Struct(">BBH")  # 0xFF, marker, segment length
_FRAME = struct.Struct(">BHHB")  # a frame header: precision, height, width, components
MULTI_PICTURE = b"MPF\x00"  # an APP2 segment PIL opens as MPO, not JPEG


class JpegHeader(NamedTuple):
    width: int
    height: int
    components: int
    scan_start: int  # offset of the first byte after the first SOS segment


def jpeg_header(data: bytes) -> JpegHeader | None:
    """The header of a plain 8-bit JPEG (module docstring), or None."""
    if not data.startswith(JPEG_MAGIC):
        return None
    pos, end, frame = 2, len(data), None
    segment_at = _SEGMENT.unpack_from
    while pos + 4 <= end:
        fill, marker, length = segment_at(data, pos)  # length: read, used by segments only
        if fill != 0xFF:
            return None
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in STANDALONE:
            pos += 2
            continue
        segment_end = pos + 2 + length
        if length < 2 or segment_end > end:
            return None
        if marker in SOF_MARKERS:
            if frame is not None or length < 8:
                return None
            precision, height, width, components = _FRAME.unpack_from(data, pos + 4)
            if precision != 8:
                return None
            frame = (width, height, components)
        elif marker == 0xE2 and data[pos + 4 : pos + 8] == MULTI_PICTURE:
            return None
        elif marker == START_OF_SCAN:
            if frame is None or frame[0] < 1 or frame[1] < 1:
                return None
            return JpegHeader(*frame, segment_end)
        pos = segment_end
    return None
