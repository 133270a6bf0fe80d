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

__all__ = ["CharacterTask", "draw_character", "draw_example"]


@lru_cache(maxsize=16)
def _output_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    return ys, xs


def _libm(function, values: np.ndarray) -> np.ndarray:
    """`function` (math.sin, math.cos) of each value, computed by the C library."""
    return np.array([function(value) for value in values.tolist()], dtype=np.float64)


def _jitter_inverse(
    angle: float, shear: float, x_scale: float, y_scale: float
) -> tuple[float, float, float, float]:
    """The inverse (a, b, c, d = [[a, b], [c, d]]) of rotation(angle) @ shear @ diag(scales),
    in plain float arithmetic: BLAS and LAPACK kernels (numpy's @ and linalg.inv) differ in
    the last bit between CPU generations, and the glyphs must not. The inverse of each factor
    is known: diag(1/sx, 1/sy) @ [[1, -shear], [0, 1]] @ rotation(-angle)."""
    cos, sin = math.cos(angle), math.sin(angle)
    # rotation(-angle) = [[cos, sin], [-sin, cos]]; then the inverse shear; then the scales
    row0 = (cos - shear * -sin, sin - shear * cos)
    row1 = (-sin, cos)
    return (row0[0] / x_scale, row0[1] / x_scale, row1[0] / y_scale, row1[1] / y_scale)


def _smooth_field(rng: np.random.Generator, size: int, amplitude: float) -> np.ndarray:
    """A smooth random displacement field: a plane wave of 0.5 to 1.5 cycles per image.

    sin(u(x) + v(y)) = sin u cos v + cos u sin v, so the wave is two outer products. Sines
    and cosines come from the C library, one value at a time: numpy's own float64 sin/cos
    differ in the last bit on AVX-512 machines (SVML), and the glyphs must not (issue 30).
    """
    axis = np.arange(size, dtype=np.float64)
    angle = rng.uniform(0.0, 2.0 * np.pi)
    wavenumber = 2.0 * np.pi * rng.uniform(0.5, 1.5) / size
    phase = rng.uniform(0.0, 2.0 * np.pi)
    u = wavenumber * math.cos(angle) * axis
    v = wavenumber * math.sin(angle) * axis + phase
    wave = np.outer(_libm(math.cos, v), _libm(math.sin, u))
    wave += np.outer(_libm(math.sin, v), _libm(math.cos, u))
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
    # output (x, y) offsets -> glyph (x, y) offsets
    inv_xx, inv_xy, inv_yx, inv_yy = _jitter_inverse(angle, shear, scale * aspect, scale / aspect)
    shift_x, shift_y = rng.uniform(-jitter.shift, jitter.shift, size=2) * size
    ys, xs = _output_grid(size)
    centre = (size - 1) / 2.0
    dx = xs - centre - shift_x + _smooth_field(rng, size, jitter.elastic * size)
    dy = ys - centre - shift_y + _smooth_field(rng, size, jitter.elastic * size)
    src_x = inv_xx * dx + inv_xy * dy + (width - 1) / 2.0
    src_y = inv_yx * dx + inv_yy * dy + (height - 1) / 2.0
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
