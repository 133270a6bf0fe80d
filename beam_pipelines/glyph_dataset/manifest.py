"""GENERATOR.json: what was generated, with which parameters and in which environment.

Its `generator` value is "beam_pipelines.glyph_dataset", this package's name (its home again
after a stay in `episodes`), so folders written before are still recognised as its output.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from beam_pipelines.glyph_dataset.alphabet_plan import AlphabetPlan
from beam_pipelines.glyph_dataset.config import BACKGROUND, GlyphDatasetConfig
from beam_pipelines.glyph_dataset.fonts import FONT_POOL, font_directory

__all__ = [
    "build_manifest",
    "environment_fingerprint",
    "GENERATOR_NAME",
    "GENERATOR_VERSION",
    "MANIFEST_NAME",
    "read_manifest",
]

GENERATOR_NAME = "beam_pipelines.glyph_dataset"  # the manifest identity of generated folders
GENERATOR_VERSION = "1.0"
MANIFEST_NAME = "GENERATOR.json"


def environment_fingerprint() -> dict[str, object]:
    """Versions and font digests the output bytes depend on (part of the cache key)."""
    import PIL
    import scipy
    from PIL import features

    folder = font_directory()
    digests = {
        face.file: hashlib.sha256((folder / face.file).read_bytes()).hexdigest()[:16]
        for face in FONT_POOL
    }
    return {
        "pillow": PIL.__version__,
        "freetype": features.version("freetype2"),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
        "unicode": unicodedata.unidata_version,
        "fonts": digests,
    }


def build_manifest(
    config: GlyphDatasetConfig, environment: dict[str, object], plans: Sequence[AlphabetPlan]
) -> dict[str, object]:
    """GENERATOR.json's content: identity, cache key (params, environment), counts and, per
    alphabet, each character's folder, global index, codepoint and Unicode name."""
    alphabets = []
    index = 0
    for plan in plans:
        characters = []
        for number, cp in enumerate(plan.codepoints, start=1):
            index += 1
            characters.append(
                {
                    "folder": f"character{number:02d}",
                    "index": index,
                    "codepoint": f"U+{cp:04X}",
                    "unicode_name": unicodedata.name(chr(cp), ""),
                }
            )
        alphabets.append({"name": plan.name, "split": plan.split, "characters": characters})
    n_background = sum(plan.split == BACKGROUND for plan in plans)
    return {
        "generator": GENERATOR_NAME,
        "version": GENERATOR_VERSION,
        "params": config.params(),
        "environment": environment,
        "layout": "omniglot",
        "counts": {
            "background_alphabets": n_background,
            "evaluation_alphabets": len(plans) - n_background,
            "characters": index,
            "images": index * config.examples,
        },
        "alphabets": alphabets,
    }


def read_manifest(output_dir: str | Path) -> dict | None:
    """The GENERATOR.json of an output folder, or None when absent or unreadable."""
    path = Path(output_dir) / MANIFEST_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
