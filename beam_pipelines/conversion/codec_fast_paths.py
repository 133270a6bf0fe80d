"""The writer codec's two plain cases done with PIL's own C codecs, without its Python layers.

Converting a folder of small images spends more time in PIL's Python than in its codecs:
`Image.open` + `load` of a 105x105 PNG parse its chunks with a stream object and a dispatch per
chunk (several times the zlib decode itself), and `Image.save(..., "JPEG")` builds the encoder
settings from its keyword arguments and the image's info on every call. Here:

- `decode_plain_png`: a PNG made of IHDR, IDAT chunks and IEND only (no palette, text, gamma,
  transparency or interlacing), of a mode PIL reads as 1, L, LA, RGB or RGBA at 8 bits or less,
  is decoded with the decoder PIL's PNG plugin uses, given the same bytes (the IDAT chunks'
  data, joined). Anything else, and any file whose header PIL's `Image.open` would refuse or
  warn about, returns None and goes through PIL's path, so what is accepted or rejected and
  why is PIL's. The image is the one `Image.open(...).load()` gives, but for its `format`
  (None; only a JPEG's format is looked at) and its info (empty, as PIL's is for such a file).
- `encode_jpeg`: the bytes of `image.save(buffer, format="JPEG", quality=q)` for an RGB image
  whose info holds no comment (the only image info PIL's JPEG writer reads), written by the
  encoder PIL's writer makes, with the settings PIL's writer derived for that quality (read
  back from a save of a 1x1 image, not restated here). A self-check against `Image.save` on a
  small image, once per process and quality, turns the path off (None) if the bytes differ.
"""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image, PngImagePlugin

__all__ = ["decode_plain_png", "encode_jpeg", "PNG_SIGNATURE"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_IHDR = struct.Struct(">4sIIBBBBBI")  # type, width, height, depth, colour, compression, filter,
# interlace, CRC
_PLAIN_MODES = frozenset({"1", "L", "LA", "RGB", "RGBA"})
_JPEG_BLOCK = 65536  # PIL's ImageFile.MAXBLOCK: the encoder's output buffer, at least
_jpeg_settings: dict[int, tuple | None] = {}


def decode_plain_png(data: bytes) -> Image.Image | None:
    """The decoded pixels of a plain PNG (module docstring), or None for PIL's path."""
    if not data.startswith(PNG_SIGNATURE) or data[8:12] != b"\x00\x00\x00\x0d":
        return None
    if len(data) < 33:
        return None
    cid, width, height, depth, colour, compression, filtering, interlace, crc = _IHDR.unpack_from(
        data, 12
    )
    if cid != b"IHDR" or compression or filtering or interlace:
        return None
    if zlib.crc32(data[12:29]) != crc:  # PIL refuses a broken header chunk
        return None
    modes = PngImagePlugin._MODES.get((depth, colour))
    if modes is None or modes[0] not in _PLAIN_MODES or depth > 8:
        return None
    if width < 1 or height < 1 or _over_pil_limit(width * height):
        return None
    idat = _idat_data(data, 33)
    if idat is None:
        return None
    mode, rawmode = modes
    size = (width, height)
    pixels = Image.core.new(mode, size)
    decoder = Image._getdecoder(mode, "zip", rawmode)
    try:
        decoder.setimage(pixels, (0, 0, width, height))
        consumed, status = decoder.decode(idat)
    finally:
        decoder.cleanup()
    if consumed >= 0 or status < 0:  # rows missing, or a broken stream: PIL says which
        return None
    return Image.Image()._new(pixels)


def _over_pil_limit(pixels: int) -> bool:
    """Whether `Image.open` would warn about (or refuse) an image of this many pixels."""
    return Image.MAX_IMAGE_PIXELS is not None and pixels > Image.MAX_IMAGE_PIXELS


def _idat_data(data: bytes, pos: int) -> bytes | None:
    """The joined data of the IDAT chunks from `pos` on when IEND follows them and nothing
    else comes between (what follows IEND PIL never reads); None otherwise."""
    end = len(data)
    parts = []
    while pos + 8 <= end:
        length = int.from_bytes(data[pos : pos + 4], "big")
        cid = data[pos + 4 : pos + 8]
        if cid == b"IEND":
            return b"".join(parts) if parts else None
        if cid != b"IDAT" or pos + 12 + length > end:
            return None
        parts.append(data[pos + 8 : pos + 8 + length])
        pos += 12 + length
    return None


def encode_jpeg(image: Image.Image, quality: int) -> bytes | None:
    """`image.save(buffer, format="JPEG", quality=quality)`'s bytes, or None where this path
    does not apply (module docstring): then the caller saves with PIL."""
    if image.mode != "RGB" or "comment" in image.info or hasattr(image, "encoderinfo"):
        return None
    settings = _jpeg_settings.get(quality, ())
    if settings == ():
        settings = _jpeg_settings[quality] = _checked_jpeg_settings(quality)
    if settings is None:
        return None
    return _encode(image, settings)


def _encode(image: Image.Image, settings: tuple) -> bytes:
    """ImageFile._save's tile loop for a JPEG into memory (one tile: the whole image)."""
    encoder = Image._getencoder("RGB", "jpeg", "RGB", settings)
    chunks = []
    try:
        encoder.setimage(image.im, (0, 0) + image.size)
        block = max(_JPEG_BLOCK, image.size[0] * 4)
        while True:
            _, status, chunk = encoder.encode(block)
            chunks.append(chunk)
            if status:
                break
    finally:
        encoder.cleanup()
    if status < 0:
        raise OSError(f"encoder error {status} when writing image file")
    return b"".join(chunks)


def _checked_jpeg_settings(quality: int) -> tuple | None:
    """The encoder settings PIL's JPEG writer uses at `quality` for an image without info,
    if encoding with them gives `Image.save`'s bytes (else None: this path stays off)."""
    probe = Image.new("RGB", (1, 1))
    try:
        probe.save(io.BytesIO(), format="JPEG", quality=quality)
        settings = tuple(probe.encoderconfig)
        ramp = Image.linear_gradient("L").resize((48, 40))
        ring = Image.radial_gradient("L").resize((48, 40))
        mirrored = ramp.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        sample = Image.merge("RGB", (ramp, ring, mirrored))
        expected = io.BytesIO()
        sample.save(expected, format="JPEG", quality=quality)
        if _encode(sample, settings) != expected.getvalue():
            return None
    except Exception:  # an older or newer PIL whose writer works otherwise: its own path
        return None
    return settings
