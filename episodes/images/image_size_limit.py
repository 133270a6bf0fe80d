"""The one image size limit of the toolkit, shared by the converter, verify and the reader.

The converter rejects an image above it (naming its size and the limit), so every converted
image opens in `beam_pipelines.verify` and the reader, where Pillow refuses exactly what the
converter rejects. It is Pillow's default refusal threshold (twice its warning threshold of
89,478,485 pixels), so converted datasets also open in any Pillow with default settings.
"""

from __future__ import annotations

import re
import warnings

from PIL import Image

__all__ = [
    "MAX_IMAGE_PIXELS",
    "MAX_IMAGE_SIDE",
    "refusal_reason",
    "size_problem",
    "use_image_size_limit",
]

MAX_IMAGE_PIXELS = 178_956_970


def use_image_size_limit() -> None:
    """Make Pillow in this process refuse exactly what the converter rejects: it raises
    DecompressionBombError above twice its MAX_IMAGE_PIXELS (and only warns below that)."""
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS // 2
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


MAX_IMAGE_SIDE = 13_377  # the largest square under the limit (13,377^2 = 178,944,129 pixels)


def size_problem(width: int, height: int) -> str | None:
    """Why an image of this size is refused, or None."""
    if width * height <= MAX_IMAGE_PIXELS:
        return None
    return f"image of {width}x{height} = {_over_the_limit(width * height)}"


def refusal_reason(error: Image.DecompressionBombError) -> str:
    """The converter's reason for an image Pillow refused on opening (its message gives only
    the pixel count)."""
    found = re.search(r"\((\d+) pixels\)", str(error))
    return f"image of {_over_the_limit(int(found.group(1)))}" if found else str(error)


def _over_the_limit(pixels: int) -> str:
    return (
        f"{pixels / 1e6:.1f} megapixels, over the {MAX_IMAGE_PIXELS / 1e6:.1f}-megapixel "
        "limit of converted datasets"
    )
