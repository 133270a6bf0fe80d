"""Embedded default dataset: glyphs of real scripts, drawn by 20 simulated drawers.

`make demo` must run on a machine with no download, so this package writes a raw dataset in
Omniglot's exact archive layout (Lake et al. 2015; Meta-Dataset uses it as its Omniglot
source): ``images_background/<Alphabet>/characterNN/<index>_<drawer>.png`` and
``images_evaluation/...``, 105x105 one-bit PNGs with black strokes on white.

Characters are real glyphs from the fonts matplotlib ships (DejaVu, STIX), grouped into
"alphabets" by Unicode script or block. Each drawer has a consistent style (font family,
weight, slant, size) and every example gets its own affine jitter, a smooth elastic warp and
stroke-width jitter. Output is a pure function of the parameters, the fonts and the library
versions recorded in ``GENERATOR.json``.

Modules, in the order the work flows: `config` (parameters and their checks), `fonts` (the
font pool, one-glyph rendering), `script_groups` (the Unicode blocks), `glyph_selection` (the
catalogue of alphabets), `alphabet_plan` (which alphabets a configuration writes),
`drawer_style` and `drawing` (the simulated drawers), `output_writers` (folders or zips),
`manifest` (GENERATOR.json), `output_check` (write, replace or reuse), `summary`,
`generation` (`generate`) and `cli` (``python -m beam_pipelines.glyph_dataset --output DIR``).
"""

from beam_pipelines.glyph_dataset.alphabet_plan import AlphabetPlan, plan_alphabets
from beam_pipelines.glyph_dataset.config import GlyphDatasetConfig, GlyphDatasetError
from beam_pipelines.glyph_dataset.generation import generate
from beam_pipelines.glyph_dataset.manifest import read_manifest
from beam_pipelines.glyph_dataset.summary import GlyphDatasetSummary

__all__ = [
    "AlphabetPlan",
    "GlyphDatasetConfig",
    "GlyphDatasetError",
    "GlyphDatasetSummary",
    "generate",
    "plan_alphabets",
    "read_manifest",
]
