"""Drawing: one character by `examples` simulated drawers, as one-bit PNG bytes.

Every example gets its own affine jitter, a smooth elastic warp and stroke-width jitter on
top of its drawer's style; the bytes are a pure function of the task.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from beam_pipelines.glyph_dataset.config import GlyphDatasetError
from beam_pipelines.glyph_dataset.drawer_style import JITTER, DrawerStyle, Jitter, drawer_style
from beam_pipelines.glyph_dataset.fonts import (
    FAMILIES,
    FONT_POOL,
    font_cmaps,
    primary_font,
    render_glyph,
)


@lru_cache(maxsize=16)
def _output_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    return ys, xs


def _smooth_field(rng: np.random.Generator, size: int, amplitude: float) -> np.ndarray:
    """A smooth random displacement field: a plane wave of 0.5 to 1.5 cycles per image.

    sin(u(x) + v(y)) = sin u cos v + cos u sin v, so the wave is two outer products.
    """
    axis = np.arange(size, dtype=np.float64)
    angle = rng.uniform(0.0, 2.0 * np.pi)
    wavenumber = 2.0 * np.pi * rng.uniform(0.5, 1.5) / size
    phase = rng.uniform(0.0, 2.0 * np.pi)
    u = wavenumber * math.cos(angle) * axis
    v = wavenumber * math.sin(angle) * axis + phase
    wave = np.outer(np.cos(v), np.sin(u)) + np.outer(np.sin(v), np.cos(u))
    return rng.normal(0.0, amplitude) * wave


def draw_example(
    glyph: np.ndarray,
    style: DrawerStyle,
    rng: np.random.Generator,
    size: int,
    em: int,
    jitter: Jitter = JITTER,
) -> np.ndarray:
    """One drawing of a glyph: boolean ink mask of shape (size, size).

    Affine jitter (rotation, scale, aspect, shear, translation) plus a smooth elastic warp are
    applied by inverse mapping; blur, a little noise and a jittered threshold vary the stroke.
    """
    from scipy import ndimage

    height, width = glyph.shape
    target = 0.62 * size
    fit = min(target / max(height, width), target / (0.45 * em))  # do not blow up small glyphs
    scale = fit * style.scale * (1.0 + rng.uniform(-jitter.scale, jitter.scale))
    aspect = math.exp(rng.normal(0.0, jitter.aspect))
    shear = style.slant + rng.normal(0.0, jitter.shear)
    tilt = np.clip(rng.normal(0.0, jitter.rotation), -3 * jitter.rotation, 3 * jitter.rotation)
    angle = style.rotation + math.radians(tilt)
    cos, sin = math.cos(angle), math.sin(angle)
    forward = (
        np.array([[cos, -sin], [sin, cos]])
        @ np.array([[1.0, shear], [0.0, 1.0]])
        @ np.diag([scale * aspect, scale / aspect])
    )
    inverse = np.linalg.inv(forward)  # output (x, y) offsets -> glyph (x, y) offsets
    shift_x, shift_y = rng.uniform(-jitter.shift, jitter.shift, size=2) * size
    ys, xs = _output_grid(size)
    centre = (size - 1) / 2.0
    dx = xs - centre - shift_x + _smooth_field(rng, size, jitter.elastic * size)
    dy = ys - centre - shift_y + _smooth_field(rng, size, jitter.elastic * size)
    src_x = inverse[0, 0] * dx + inverse[0, 1] * dy + (width - 1) / 2.0
    src_y = inverse[1, 0] * dx + inverse[1, 1] * dy + (height - 1) / 2.0
    ink = ndimage.map_coordinates(
        glyph, [src_y, src_x], output=np.float32, order=1, cval=0.0, prefilter=False
    )
    ink = ndimage.gaussian_filter(ink, sigma=jitter.blur * size)
    ink += jitter.noise * rng.standard_normal(ink.shape, dtype=np.float32)
    level = style.threshold + rng.uniform(-jitter.threshold, jitter.threshold)
    return ink > float(np.clip(level, 0.2, 0.7))


def _png_bytes(ink: np.ndarray) -> bytes:
    """One-bit PNG, black strokes on white, as Omniglot's files."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(~ink).save(buffer, format="PNG")
    return buffer.getvalue()


@dataclass(frozen=True)
class CharacterTask:
    """One character to draw: the unit of work sent to a worker process (picklable)."""

    seed: int
    size: int
    examples: int
    alphabet: str
    codepoint: int
    families: tuple[str, ...] = FAMILIES


def draw_character(task: CharacterTask) -> list[bytes]:
    """PNG bytes of drawers 1..examples for one character (pure function of the task)."""
    em = task.size
    cmaps = font_cmaps()
    glyphs: dict[str, np.ndarray | None] = {}

    def glyph_in(file: str) -> np.ndarray | None:
        if file not in glyphs:
            has = task.codepoint in cmaps[file]
            glyphs[file] = render_glyph(task.codepoint, file, em) if has else None
        return glyphs[file]

    allowed = {face.file for face in FONT_POOL if face.family in task.families}
    fallback = primary_font(task.codepoint, task.families)
    if fallback is None:
        raise GlyphDatasetError(f"U+{task.codepoint:04X} is in none of the fonts {task.families}")
    images = []
    for drawer in range(1, task.examples + 1):
        style = drawer_style(task.seed, task.alphabet, drawer)
        usable = (f for f in style.fonts if f in allowed and glyph_in(f) is not None)
        file = next(usable, fallback)
        glyph = glyph_in(file)
        if glyph is None:
            raise GlyphDatasetError(f"U+{task.codepoint:04X} renders empty in {file}")
        rng = np.random.default_rng([task.seed, task.codepoint, drawer, 2])
        images.append(_png_bytes(draw_example(glyph, style, rng, task.size, em)))
    return images
