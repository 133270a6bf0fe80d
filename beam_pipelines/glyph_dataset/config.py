"""What a glyph dataset is made of (seed, alphabets, drawers, image side) and its checks.

Omniglot's shape is the default: 20 drawers per character, 105x105 images, background and
evaluation alphabets in ``images_background/`` and ``images_evaluation/``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from episodes.util.cli_errors import UserError

__all__ = [
    "BACKGROUND",
    "check_values",
    "EVALUATION",
    "GlyphDatasetConfig",
    "GlyphDatasetError",
    "OMNIGLOT_DRAWERS",
    "OMNIGLOT_SIZE",
]

BACKGROUND = "images_background"
EVALUATION = "images_evaluation"
OMNIGLOT_DRAWERS = 20
OMNIGLOT_SIZE = 105


class GlyphDatasetError(UserError, ValueError):
    """Bad parameters or an output folder that may not be written; message names the value."""


@dataclass(frozen=True)
class GlyphDatasetConfig:
    """What to generate. Defaults reproduce Omniglot's shape: 30 + 20 alphabets, 20 drawers."""

    seed: int = 0
    alphabets: int = 50
    examples: int = OMNIGLOT_DRAWERS
    size: int = OMNIGLOT_SIZE
    max_characters: int | None = None  # keep only the first N characters of each alphabet
    as_zip: bool = False  # write images_background.zip / images_evaluation.zip

    def params(self) -> dict[str, object]:
        """The parameters that determine the output bytes (the cache key in GENERATOR.json)."""
        return asdict(self)


def check_values(config: GlyphDatasetConfig) -> None:
    """Checks that need no fonts; raise GlyphDatasetError naming the first bad value."""
    checks = (
        (
            isinstance(config.seed, int) and config.seed >= 0,
            f"--seed must be an integer >= 0, got {config.seed!r}",
        ),
        (
            isinstance(config.alphabets, int) and config.alphabets >= 2,
            f"--alphabets must be >= 2 (one background and one evaluation alphabet), "
            f"got {config.alphabets!r}",
        ),
        (
            isinstance(config.examples, int) and 1 <= config.examples <= 99,
            f"--examples must be between 1 and 99 (two-digit drawer ids), got {config.examples!r}",
        ),
        (
            isinstance(config.size, int) and 28 <= config.size <= 512,
            f"--image-size must be between 28 and 512 pixels, got {config.size!r}",
        ),
        (
            config.max_characters is None
            or (isinstance(config.max_characters, int) and config.max_characters >= 1),
            f"--max-characters must be >= 1, got {config.max_characters!r}",
        ),
    )
    for ok, message in checks:
        if not ok:
            raise GlyphDatasetError(message)
