"""The font pool (matplotlib's bundled DejaVu and STIX faces) and one-glyph rendering.

Fonts are found in matplotlib's package folder without importing matplotlib; which codepoints
each face really draws is read from its cmap with fontTools (a matplotlib dependency).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from beam_pipelines.glyph_dataset.config import GlyphDatasetError

__all__ = [
    "FAMILIES",
    "font_cmaps",
    "font_directory",
    "FONT_POOL",
    "FontFace",
    "primary_font",
    "render_glyph",
]

FAMILIES: tuple[str, ...] = ("sans", "serif", "mono", "stix")  # font families of the pool


@dataclass(frozen=True)
class FontFace:
    """One font file of the pool; `family` groups regular and bold cuts."""

    file: str
    family: str
    bold: bool


FONT_POOL: tuple[FontFace, ...] = (
    FontFace("DejaVuSans.ttf", "sans", False),
    FontFace("DejaVuSerif.ttf", "serif", False),
    FontFace("DejaVuSansMono.ttf", "mono", False),
    FontFace("STIXGeneral.ttf", "stix", False),
    FontFace("DejaVuSans-Bold.ttf", "sans", True),
    FontFace("DejaVuSerif-Bold.ttf", "serif", True),
    FontFace("DejaVuSansMono-Bold.ttf", "mono", True),
    FontFace("STIXGeneralBol.ttf", "stix", True),
)


def font_directory() -> Path:
    """matplotlib's bundled TrueType folder, found without importing matplotlib."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise GlyphDatasetError(
            "matplotlib is not installed: its bundled fonts (mpl-data/fonts/ttf) are needed"
        )
    for location in spec.submodule_search_locations:
        folder = Path(location) / "mpl-data" / "fonts" / "ttf"
        if folder.is_dir():
            return folder
    raise GlyphDatasetError("matplotlib's font folder mpl-data/fonts/ttf was not found")


@lru_cache(maxsize=1)
def font_cmaps() -> dict[str, frozenset[int]]:
    """Codepoints each pool font maps to a real glyph (not .notdef), read with fontTools."""
    from fontTools.ttLib import TTFont

    folder = font_directory()
    cmaps: dict[str, frozenset[int]] = {}
    for face in FONT_POOL:
        path = folder / face.file
        if not path.is_file():
            raise GlyphDatasetError(f"font file {path} is missing from matplotlib's fonts")
        with TTFont(str(path), lazy=True) as font:
            best = font.getBestCmap() or {}
            cmaps[face.file] = frozenset(cp for cp, name in best.items() if name != ".notdef")
    return cmaps


@lru_cache(maxsize=64)
def _truetype(file: str, em: int):
    from PIL import ImageFont

    return ImageFont.truetype(
        str(font_directory() / file), size=em, layout_engine=ImageFont.Layout.BASIC
    )


def render_glyph(codepoint: int, file: str, em: int) -> np.ndarray | None:
    """Ink of one glyph (float32 in 0..1), cropped to its bounding box; None when empty."""
    from PIL import Image, ImageDraw

    font = _truetype(file, em)
    char = chr(codepoint)
    left, top, right, bottom = font.getbbox(char)
    if right <= left or bottom <= top:
        return None
    pad = 2
    image = Image.new("L", (right - left + 2 * pad, bottom - top + 2 * pad), 0)
    ImageDraw.Draw(image).text((pad - left, pad - top), char, fill=255, font=font)
    ink = np.asarray(image, dtype=np.float32) / 255.0
    rows = np.flatnonzero(ink.max(axis=1) > 0.25)
    cols = np.flatnonzero(ink.max(axis=0) > 0.25)
    if rows.size == 0:
        return None
    return ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def primary_font(codepoint: int, families: Sequence[str] = FAMILIES) -> str | None:
    """The first regular pool font of `families` with a glyph for `codepoint` (its shape)."""
    cmaps = font_cmaps()
    for face in FONT_POOL:
        if not face.bold and face.family in families and codepoint in cmaps[face.file]:
            return face.file
    return None
