"""The simulated drawers: each one's habits (fonts, slant, tilt, size, stroke weight) and the
spread of the per-example jitter, all drawn from the seed.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from beam_pipelines.glyph_dataset.config import OMNIGLOT_SIZE
from beam_pipelines.glyph_dataset.fonts import FAMILIES, FONT_POOL

__all__ = ["drawer_style", "DrawerStyle", "JITTER", "Jitter"]


@dataclass(frozen=True)
class Jitter:
    """Spread of the random drawing parameters (angles in degrees, lengths per image side)."""

    drawer_slant: float = 0.1  # sd of a drawer's shear
    drawer_rotation: float = 3.0  # sd of a drawer's tilt
    drawer_scale: tuple[float, float] = (0.9, 1.06)
    drawer_threshold: tuple[float, float] = (0.32, 0.58)
    bold_share: float = 0.3  # drawers who prefer bold cuts
    rotation: float = 5.0  # sd per example, clipped to +-3 sd
    scale: float = 0.08  # +- per example
    aspect: float = 0.06  # sd of log aspect ratio
    shear: float = 0.06  # sd per example
    shift: float = 0.035  # +- translation
    elastic: float = 0.012  # sd of the warp amplitude
    blur: float = 0.9 / OMNIGLOT_SIZE  # gaussian sigma before thresholding
    noise: float = 0.04  # sd of pixel noise before thresholding
    threshold: float = 0.06  # +- per example around the drawer's threshold


JITTER = Jitter()


@dataclass(frozen=True)
class DrawerStyle:
    """A drawer's habits, shared by all characters of one alphabet."""

    fonts: tuple[str, ...]  # font files in order of preference
    slant: float  # shear, x per y
    rotation: float  # radians
    scale: float
    threshold: float  # stroke threshold on blurred ink; lower draws thicker strokes


@lru_cache(maxsize=4096)
def drawer_style(seed: int, alphabet: str, drawer: int, jitter: Jitter = JITTER) -> DrawerStyle:
    """Deterministic style of drawer `drawer` (1-based) for one alphabet."""
    rng = np.random.default_rng([seed, zlib.crc32(alphabet.encode()), drawer, 1])
    families = [FAMILIES[i] for i in rng.permutation(len(FAMILIES))]
    bold = bool(rng.random() < jitter.bold_share)
    by_key = {(face.family, face.bold): face.file for face in FONT_POOL}
    fonts = tuple(by_key[(family, bold)] for family in families) + tuple(
        by_key[(family, not bold)] for family in families
    )
    return DrawerStyle(
        fonts=fonts,
        slant=float(rng.normal(0.0, jitter.drawer_slant)),
        rotation=float(np.deg2rad(rng.normal(0.0, jitter.drawer_rotation))),
        scale=float(rng.uniform(*jitter.drawer_scale)),
        threshold=float(rng.uniform(*jitter.drawer_threshold)),
    )
