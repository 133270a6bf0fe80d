"""Decode one encoded image (JPEG, PNG, ...) into a square RGB uint8 array.

Resizing: JPEGs are first reduced inside the decoder with `Image.draft` (DCT scaling by 1/2,
1/4 or 1/8, only while the result stays at least `size` on both sides), then every image is
converted to RGB and resized to `size` x `size` with Pillow's BILINEAR filter (antialiased when
shrinking: its support grows with the scale factor), ignoring the aspect ratio as Meta-Dataset
does. An image already `size` x `size` is not resampled. Pillow releases the GIL while it
decodes and resamples, so a thread pool decodes in parallel.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageFile

ImageFile.LOAD_TRUNCATED_IMAGES = False

INTERPOLATION = "bilinear"  # Pillow Image.BILINEAR, after JPEG draft reduction
_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP", "TIFF", "PPM")


class ImageDecodeError(ValueError):
    """Bytes that Pillow cannot decode into an image."""


def _open_rgb(data: bytes, size: int | None) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data), formats=_FORMATS)
        if size is not None and image.format == "JPEG":
            image.draft("RGB", (size, size))
        image = image.convert("RGB")  # also forces the full decode
    except Exception as exc:  # Pillow raises many types for bad bytes
        raise ImageDecodeError(f"not a decodable image ({type(exc).__name__}: {exc})") from None
    if size is not None and image.size != (size, size):
        image = image.resize((size, size), Image.Resampling.BILINEAR)
    return image


def decode_image(data: bytes, size: int | None = 84) -> np.ndarray:
    """(size, size, 3) uint8 RGB array of an encoded image; `size=None` keeps the source size."""
    if size is not None and size < 1:
        raise ValueError(f"image size must be >= 1, got {size}")
    return np.asarray(_open_rgb(data, size))


def decode_image_into(data: bytes, out: np.ndarray) -> None:
    """Decode and resize into a preallocated (H, W, 3) uint8 array (H == W)."""
    size = out.shape[0]
    out[...] = np.asarray(_open_rgb(data, size))
