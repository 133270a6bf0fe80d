"""Which alphabets a configuration writes, and whether each is a background or evaluation one."""

from __future__ import annotations

from dataclasses import dataclass

from beam_pipelines.glyph_dataset.config import (
    BACKGROUND,
    EVALUATION,
    GlyphDatasetConfig,
    GlyphDatasetError,
    check_values,
)
from beam_pipelines.glyph_dataset.fonts import FAMILIES
from beam_pipelines.glyph_dataset.glyph_selection import alphabet_catalogue

__all__ = ["AlphabetPlan", "BACKGROUND_SHARE", "plan_alphabets", "validate_config"]

BACKGROUND_SHARE = 0.6  # Omniglot: 30 of 50 alphabets are background alphabets


@dataclass(frozen=True)
class AlphabetPlan:
    """One alphabet of the output: its folder name, split folder and Unicode characters."""

    name: str
    split: str  # BACKGROUND or EVALUATION
    codepoints: tuple[int, ...]
    families: tuple[str, ...] = FAMILIES  # font families its drawers may use


def _split_of(position: int, total: int) -> str:
    """Spread background alphabets evenly over the priority order (3 of every 5 by default)."""
    n_background = min(total - 1, max(1, round(BACKGROUND_SHARE * total)))

    def ceil_share(k: int) -> int:  # ceil(k * n_background / total) in integers
        return -(-k * n_background // total)

    return BACKGROUND if ceil_share(position + 1) > ceil_share(position) else EVALUATION


def validate_config(config: GlyphDatasetConfig) -> None:
    """Raise GlyphDatasetError naming the first bad value, before any drawing."""
    check_values(config)
    available = len(alphabet_catalogue())
    if config.alphabets > available:
        raise GlyphDatasetError(
            f"--alphabets must be at most {available} (alphabets the bundled fonts cover), "
            f"got {config.alphabets}"
        )


def plan_alphabets(config: GlyphDatasetConfig) -> list[AlphabetPlan]:
    """The alphabets to write, in output order: background then evaluation, each by name."""
    validate_config(config)
    chosen = alphabet_catalogue()[: config.alphabets]
    plans = [
        AlphabetPlan(name, _split_of(i, len(chosen)), cps[: config.max_characters], families)
        for i, (name, cps, families) in enumerate(chosen)
    ]
    order = {BACKGROUND: 0, EVALUATION: 1}
    return sorted(plans, key=lambda plan: (order[plan.split], plan.name))
