"""Moved: the embedded glyph dataset generator is `beam_pipelines.glyph_dataset` (it writes a raw
dataset for the converters; the reader's package never used it). Until version 0.3.0 the old
command `python -m episodes.glyph_dataset` runs the new one after a one-line note, and the old
import paths (`from episodes.glyph_dataset import generate`, `episodes.glyph_dataset.config`,
...) give the new names and modules with a DeprecationWarning.
"""

from __future__ import annotations

from episodes.util.moved_modules import moved_names

__all__ = ["NEW"]

NEW = "beam_pipelines.glyph_dataset"
# A package's path: its old submodules are answered by the moved-modules finder (MOVED).
__path__: list[str] = []
__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        (
            "AlphabetPlan",
            "GlyphDatasetConfig",
            "GlyphDatasetError",
            "GlyphDatasetSummary",
            "generate",
            "plan_alphabets",
            "read_manifest",
        ),
        NEW,
    ),
)

if __name__ == "__main__":
    from episodes.util.moved_command import run_moved

    run_moved("episodes.glyph_dataset", NEW)
