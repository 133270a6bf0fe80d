"""Which pixels a Meta-Dataset source stores: the reference converter's, or the raw files'.

The reference (google-research/meta-dataset, `dataset_conversion/dataset_to_records.py`)
stores every image as an RGB JPEG: a source file that is already an RGB JPEG and needs no
crop or inversion is kept byte for byte; anything else is converted with PIL's plain
`convert("RGB")`, cropped (Aircraft boxes, MSCOCO's enlarged boxes), inverted (Omniglot only:
white strokes on black) and saved with PIL's default JPEG settings (quality 75). Published
Meta-Dataset numbers were measured on those pixels, so `--pixel-convention meta-dataset` is
the default of the ten Meta-Dataset sources; `--pixel-convention original` keeps the raw
files' polarity and colour mode in the source's own lossless or high-quality format (the
previous behaviour: Omniglot black strokes on white in greyscale PNG, Quickdraw greyscale PNG,
everything else JPEG at quality 95). Sources outside Meta-Dataset have no reference and always
use their own format.
"""

from __future__ import annotations

import io

from PIL import Image, ImageChops

from beam_pipelines.conversion.codec_fast_paths import encode_jpeg

__all__ = [
    "encode_reference_jpeg",
    "invert_pixels",
    "is_kept_as_is",
    "META_DATASET",
    "ORIGINAL",
    "pixel_convention",
    "PIXEL_CONVENTIONS",
    "REFERENCE_JPEG_QUALITY",
    "reference_pixels",
]

META_DATASET = "meta-dataset"
ORIGINAL = "original"
PIXEL_CONVENTIONS = (META_DATASET, ORIGINAL)
# PIL's default JPEG quality: the reference saves with `img.save(buf, format="JPEG")`.
REFERENCE_JPEG_QUALITY = 75


def pixel_convention(chosen: str | None, has_reference: bool) -> str:
    """The convention a conversion uses: `original` for a source without a reference
    conversion (EMNIST, LFW, CIFAR-100, TFDS: whatever was chosen, so `convert --all` can
    pass `--pixel-convention` to every source), else `chosen`, meta-dataset by default."""
    if chosen is not None and chosen not in PIXEL_CONVENTIONS:
        raise ValueError(f"--pixel-convention {chosen!r}: expected one of {PIXEL_CONVENTIONS}")
    if not has_reference:
        return ORIGINAL
    return chosen or META_DATASET


def is_kept_as_is(image: Image.Image) -> bool:
    """The reference keeps a source file's bytes when it is an RGB JPEG needing no change."""
    return image.format == "JPEG" and image.mode == "RGB"


def reference_pixels(image: Image.Image, invert: bool) -> Image.Image:
    """The reference's conversion of a decoded (and cropped) image: plain RGB, then inverted."""
    if image.mode != "RGB":
        image = image.convert("RGB")
    return invert_pixels(image) if invert else image


def invert_pixels(image: Image.Image) -> Image.Image:
    """255 - v in every band of an L or RGB image: ImageOps.invert's pixels, without the
    768-entry lookup table it rebuilds in Python per call (half the reference Omniglot
    conversion's per-image time)."""
    return ImageChops.invert(image)


def encode_reference_jpeg(image: Image.Image, quality: int = REFERENCE_JPEG_QUALITY) -> bytes:
    """JPEG as the reference saves it (PIL defaults: 4:2:0 subsampling, no optimisation)."""
    encoded = encode_jpeg(image, quality)  # the same bytes without Image.save's overhead
    if encoded is not None:
        return encoded
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()
