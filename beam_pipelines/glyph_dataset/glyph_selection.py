"""Glyph selection: which characters of each script group become the catalogue's alphabets.

Done once, on small renders in each character's primary font: glyphs that are invisible, tiny,
solid blobs or near-duplicates of a glyph kept before are dropped; the rest are thinned evenly
and cut into the group's alphabet sizes.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from beam_pipelines.glyph_dataset.fonts import FAMILIES, primary_font, render_glyph
from beam_pipelines.glyph_dataset.script_groups import MIN_ALPHABET_SIZE, SCRIPT_GROUPS

__all__ = ["alphabet_catalogue", "CatalogueEntry", "glyph_signature"]

_SIGNATURE_EM = 48  # font size (pixels per em) of the selection renders
_SIGNATURE_SIDE = 16  # glyphs are compared as 16x16 aspect-preserving thumbnails
_DUPLICATE_RMS = 0.12  # thumbnails closer than this (RMS, ink in 0..1) count as duplicates
_TINY_EM_FRACTION = 0.22  # glyphs whose larger side is below this share of the em are dots
_SOLID_INK_FRACTION = 0.7  # mostly filled boxes are blobs, not characters
_LETTER_VARIANT_WORDS = (" WITH ", "MODIFIER", "LIGATURE", "SUBSCRIPT", "SUPERSCRIPT")


def _is_candidate(codepoint: int, letters_only: bool) -> bool:
    """Visible, named characters; letter groups drop accented and modifier variants."""
    char = chr(codepoint)
    name = unicodedata.name(char, "")
    category = unicodedata.category(char)
    if not name or category[0] in "MZC":  # marks, spaces, controls, private use, unassigned
        return False
    if letters_only:
        return category[0] == "L" and not any(word in name for word in _LETTER_VARIANT_WORDS)
    return True


def glyph_signature(codepoint: int, families: Sequence[str] = FAMILIES) -> np.ndarray | None:
    """Aspect-preserving 16x16 thumbnail (ink 0..255, as float32) of the primary glyph.

    None for unusable glyphs: not in any font, empty, tiny (a dot or an accent), or mostly a
    filled box. Integer values keep the distance sums exact on every machine.
    """
    from PIL import Image

    file = primary_font(codepoint, families)
    if file is None:
        return None
    ink = render_glyph(codepoint, file, _SIGNATURE_EM)
    if ink is None:
        return None
    height, width = ink.shape
    if max(height, width) < _TINY_EM_FRACTION * _SIGNATURE_EM:
        return None
    if min(height, width) > 0.3 * _SIGNATURE_EM and (ink > 0.5).mean() > _SOLID_INK_FRACTION:
        return None
    side = max(height, width)
    square = np.zeros((side, side), dtype=np.uint8)
    top, left = (side - height) // 2, (side - width) // 2
    square[top : top + height, left : left + width] = np.round(ink * 255).astype(np.uint8)
    thumb = Image.fromarray(square).resize((_SIGNATURE_SIDE, _SIGNATURE_SIDE), Image.BOX)
    return np.asarray(thumb, dtype=np.float32).ravel()


def _near_duplicates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean matrix: row i of `a` is within _DUPLICATE_RMS of row j of `b`.

    Rows hold 256 integers 0..255: every partial sum of a dot product is an integer below
    2**24, exact in float32 whatever the BLAS summation order, so the result is the same on
    every machine.
    """
    dots = (a @ b.T).astype(np.float64)
    norms_a = (a.astype(np.float64) ** 2).sum(1)
    norms_b = (b.astype(np.float64) ** 2).sum(1)
    squared = norms_a[:, None] + norms_b[None, :] - 2.0 * dots
    limit = (_DUPLICATE_RMS * 255.0) ** 2 * a.shape[1]
    return squared < limit


def _distinct_glyphs(
    codepoints: Sequence[int], signatures: np.ndarray, chosen: np.ndarray
) -> list[int]:
    """Greedy selection of glyphs unlike every earlier choice (this group's and before)."""
    if not codepoints:
        return []
    blocked = np.zeros(len(codepoints), dtype=bool)
    if len(chosen):
        blocked = _near_duplicates(signatures, chosen).any(axis=1)
    within = _near_duplicates(signatures, signatures)
    kept: list[int] = []
    for i in range(len(codepoints)):
        if not blocked[i] and not within[i, kept].any():
            kept.append(i)
    return kept


CatalogueEntry = tuple[str, tuple[int, ...], tuple[str, ...]]  # name, codepoints, families


def _cut(kept: list[int], sizes: Sequence[int]) -> list[list[int]]:
    """Thin `kept` evenly to sum(sizes), then cut it in order; parts below 14 are dropped."""
    wanted = sum(sizes)
    if len(kept) > wanted:
        kept = [kept[int(round(i))] for i in np.linspace(0, len(kept) - 1, wanted)]
    parts, start = [], 0
    for size in sizes:
        part = kept[start : start + size]
        if len(part) < MIN_ALPHABET_SIZE:
            break
        parts.append(part)
        start += len(part)
    return parts


@lru_cache(maxsize=1)
def alphabet_catalogue() -> tuple[CatalogueEntry, ...]:
    """Every alphabet this generator can draw, in priority order: (name, codepoints, families).

    Each group keeps glyphs that are visible, not tiny and not near-duplicates of a glyph kept
    before (in this or an earlier group), thinned evenly and cut into its alphabet sizes.
    """
    chosen = np.zeros((0, _SIGNATURE_SIDE**2), dtype=np.float32)
    used: set[int] = set()  # a codepoint belongs to one alphabet even where drawn differently
    catalogue: list[CatalogueEntry] = []
    for group in SCRIPT_GROUPS:
        cps, sigs = [], []
        for cp in dict.fromkeys(group.codepoints):
            if cp not in used and _is_candidate(cp, group.letters_only):
                signature = glyph_signature(cp, group.families)
                if signature is not None:
                    cps.append(cp)
                    sigs.append(signature)
        if not cps:
            continue
        signatures = np.stack(sigs)
        parts = _cut(_distinct_glyphs(cps, signatures, chosen), group.sizes)
        if not parts:
            continue
        chosen = np.concatenate([chosen, signatures[[i for part in parts for i in part]]])
        for number, part in enumerate(parts, start=1):
            name = group.name if len(group.sizes) == 1 else f"{group.name}_{number}"
            catalogue.append((name, tuple(cps[i] for i in part), group.families))
            used.update(cps[i] for i in part)
    return tuple(catalogue)
