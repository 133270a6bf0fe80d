"""Decode, check and re-encode one image for a converted dataset (the shared writer's codec).

Every source yields raw bytes (or a pixel array); this stage decodes them fully (so truncated
files are caught), applies the source's crop, converts the colour mode (CMYK, palette, PNG
disguised as JPEG all end up as RGB or L), optionally resizes, and encodes deterministically.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFile

from beam_pipelines.conversion.codec_fast_paths import (
    PNG_SIGNATURE,
    decode_plain_png,
    encode_jpeg,
)
from beam_pipelines.conversion.jpeg_markers import JPEG_MAGIC, jpeg_header
from beam_pipelines.conversion.pixel_conventions import (
    PIXEL_CONVENTIONS,
    encode_reference_jpeg,
    invert_pixels,
    is_kept_as_is,
    reference_pixels,
)
from episodes.images.image_size_limit import refusal_reason, size_problem, use_image_size_limit
from episodes.util.cli_errors import UserError

__all__ = [
    "check_complete_jpeg",
    "decode_image",
    "encode_as_reference",
    "encode_image",
    "END_OF_IMAGE",
    "FORMATS",
    "ImageOptions",
    "ImageRejected",
    "kept_as_is",
    "open_image",
    "process_image",
    "to_mode",
]

ImageFile.LOAD_TRUNCATED_IMAGES = False
use_image_size_limit()  # beyond it, images are rejected below (verify and the reader share it)

FORMATS = {"jpeg": "JPEG", "png": "PNG"}


class ImageRejected(UserError, ValueError):
    """An input that is not a decodable image (truncated, empty, unknown format)."""


@dataclass(frozen=True)
class ImageOptions:
    """How the writer stores images."""

    image_format: str = "jpeg"  # jpeg | png
    mode: str = "RGB"  # RGB | L
    jpeg_quality: int = 95
    resize: int | None = None  # square side, or None to keep the source size
    # "meta-dataset": the reference converter's pixels (beam_pipelines.conversion.pixel_conventions)
    convention: str = "original"
    invert: bool = False  # white <-> black after conversion (the reference's Omniglot)

    def __post_init__(self):
        if self.image_format not in FORMATS:
            raise ValueError(
                f"image format {self.image_format!r}: expected one of {sorted(FORMATS)}"
            )
        if self.mode not in ("RGB", "L"):
            raise ValueError(f"image mode {self.mode!r}: expected RGB or L")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg quality {self.jpeg_quality}: expected 1..100")
        if self.convention not in PIXEL_CONVENTIONS:
            raise ValueError(
                f"pixel convention {self.convention!r}: expected one of {PIXEL_CONVENTIONS}"
            )
        if self.resize is not None and self.resize < 1:
            raise ValueError(f"resize {self.resize}: expected a positive side length")
        if self.resize is not None and (problem := size_problem(self.resize, self.resize)):
            raise ValueError(f"resize {self.resize}: the output would be an {problem}")


def decode_image(data: bytes | None = None, array: np.ndarray | None = None) -> Image.Image:
    """Fully decode encoded bytes (or wrap a uint8 array) into a PIL image."""
    if array is not None:
        arr = np.asarray(array)
        if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or arr.size == 0:
            raise ImageRejected(f"pixel array of dtype {arr.dtype} and shape {arr.shape}")
        if problem := size_problem(arr.shape[1], arr.shape[0]):
            raise ImageRejected(problem)
        return Image.fromarray(arr)
    if data and data.startswith(PNG_SIGNATURE):
        image = decode_plain_png(data)  # PIL's decoder without its Python layers, or None
        if image is not None:
            return image
    with _rejected_when_undecodable():
        image = open_image(data)
        image.load()
    return image


def open_image(data: bytes | None) -> Image.Image:
    """An image's header parsed (format, mode, size), its pixels not decoded yet."""
    if not data:
        raise ImageRejected("empty file")
    with _rejected_when_undecodable():
        image = Image.open(io.BytesIO(data))  # refuses images over the limit on opening
    if image.width < 1 or image.height < 1:
        raise ImageRejected(f"image of size {image.size}")
    return image


@contextlib.contextmanager
def _rejected_when_undecodable():
    """PIL's many exception types for bad input as one ImageRejected naming the cause."""
    try:
        yield
    except ImageRejected:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageRejected(refusal_reason(exc)) from None
    except Exception as exc:  # PIL raises many types for bad input
        reason = re.sub(r"<_io\.BytesIO object at 0x[0-9a-f]+>", "data", str(exc))
        raise ImageRejected(f"not a decodable image ({type(exc).__name__}: {reason})") from None


END_OF_IMAGE = b"\xff\xd9"


def check_complete_jpeg(data: bytes, scan_start: int) -> None:
    """A JPEG whose first scan starts at `scan_start` must hold an end-of-image marker after
    it: a truncated file (the usual damage: a cut download or copy) has none, and the marker
    cannot occur inside scan data (0xFF is stuffed there). For files kept byte for byte, whose
    pixels nothing needs: a full decode would cost several times the rest of their conversion;
    the reference converter checks only the header."""
    if data.rfind(END_OF_IMAGE, scan_start) < 0:  # searched from the end, where it lies
        raise ImageRejected("truncated JPEG: no end-of-image marker after its scan data")


def to_mode(image: Image.Image, mode: str) -> Image.Image:
    """Convert any PIL mode (CMYK, P, LA, RGBA, I;16, 1) to RGB or L."""
    if image.mode == mode:
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, rgba)
    elif image.mode in ("I;16", "I;16B", "I"):
        arr = np.asarray(image, dtype=np.float64)
        span = max(arr.max() - arr.min(), 1.0)
        image = Image.fromarray(((arr - arr.min()) / span * 255).astype(np.uint8))
    return image.convert(mode)


def encode_image(image: Image.Image, options: ImageOptions) -> bytes:
    """Encode deterministically (no timestamps or random metadata)."""
    buffer = io.BytesIO()
    if options.image_format == "jpeg":
        encoded = encode_jpeg(image, options.jpeg_quality)  # Image.save's bytes, or None
        if encoded is not None:
            return encoded
        image.save(buffer, format="JPEG", quality=options.jpeg_quality, optimize=False)
    else:
        image.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def process_image(
    data: bytes | None,
    options: ImageOptions,
    array: np.ndarray | None = None,
    crop_box: tuple[int, int, int, int] | None = None,
) -> bytes:
    """Decode, crop (left, top, right, bottom; clipped to the image), convert, resize, encode."""
    if kept_as_is(data, options, crop_box):
        return data
    image = decode_image(data, array)
    if crop_box is not None:
        left, top, right, bottom = crop_box
        left, top = max(0, int(left)), max(0, int(top))
        right, bottom = min(image.width, int(right)), min(image.height, int(bottom))
        if right <= left or bottom <= top:
            raise ImageRejected(
                f"crop box {crop_box} is empty inside an image of size {image.size}"
            )
        image = image.crop((left, top, right, bottom))
    if options.convention == "meta-dataset":
        return encode_as_reference(data, image, options, cropped=crop_box is not None)
    image = to_mode(image, options.mode)
    if options.invert:
        image = invert_pixels(image)
    if options.resize is not None and image.size != (options.resize, options.resize):
        image = image.resize((options.resize, options.resize), Image.Resampling.BILINEAR)
    return encode_image(image, options)


def kept_as_is(
    data: bytes | None, options: ImageOptions, crop_box: tuple[int, int, int, int] | None
) -> bool:
    """True when the reference convention keeps `data` byte for byte (an RGB JPEG needing no
    crop, inversion or resize, stored as RGB JPEG), checked decodable without decoding it
    whole (`check_complete_jpeg`); False when the image must be converted."""
    if data is None or options.convention != "meta-dataset" or crop_box is not None:
        return False
    if options.invert or options.resize is not None:
        return False
    if options.image_format != "jpeg" or options.mode != "RGB":
        return False
    if not data.startswith(JPEG_MAGIC):
        # PIL opens only such bytes as a JPEG (its JPEG plugin's test): anything else is
        # converted, and `decode_image` rejects it with the reason opening it here would give
        return False
    header = jpeg_header(data)
    if header is not None and header.components == 3:  # PIL: a JPEG of mode RGB
        if size_problem(header.width, header.height) is None:
            check_complete_jpeg(data, header.scan_start)
            return True
    image = open_image(data)
    if not is_kept_as_is(image):
        return False
    check_complete_jpeg(data, image.fp.tell())
    return True


def encode_as_reference(
    data: bytes | None, image: Image.Image, options: ImageOptions, cropped: bool
) -> bytes:
    """The reference converter's stored image: the source bytes when they are an RGB JPEG
    needing no change, else plain RGB conversion, inversion, PIL-default JPEG."""
    unchanged = not cropped and not options.invert and options.resize is None
    wants_rgb_jpeg = options.image_format == "jpeg" and options.mode == "RGB"
    if data is not None and unchanged and wants_rgb_jpeg and is_kept_as_is(image):
        return data
    image = reference_pixels(image, options.invert)
    if options.mode != "RGB":  # an explicit --image-mode L on top of the convention
        image = image.convert(options.mode)
    if options.resize is not None and image.size != (options.resize, options.resize):
        image = image.resize((options.resize, options.resize), Image.Resampling.BILINEAR)
    if options.image_format == "jpeg":
        return encode_reference_jpeg(image, options.jpeg_quality)
    return encode_image(image, options)
