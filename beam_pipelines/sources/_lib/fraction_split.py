"""Optional seeded class split for sources without a published split (EMNIST, LFW, CIFAR-100,
TFDS): `--split-fractions TRAIN VALID TEST` and `--split-seed`; without them classes have no
fixed split and users pass split files to the reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from beam_pipelines.sources._lib.source_config import ConfigError, SplitSeedConfig, option
from beam_pipelines.sources.base import LayoutError, split_by_fractions
from episodes.records.dataset_spec import Split
from episodes.records.split_sizes import validate_fractions

__all__ = ["fraction_rule", "fraction_splits", "FractionSplitConfig"]


@dataclass(frozen=True)
class FractionSplitConfig(SplitSeedConfig):
    """Options of the sources whose classes have no published split."""

    split_fractions: tuple[float, float, float] | None = option(
        None,
        "draw a seeded class split by these fractions (default: no split; pass a split file "
        "when sampling)",
        metavar=("TRAIN", "VALID", "TEST"),
    )

    title: ClassVar[str] = "seeded class split by fractions"

    def validate(self) -> None:
        super().validate()
        if self.split_fractions is not None:
            try:
                validate_fractions(self.split_fractions)
            except ValueError as exc:
                shown = " ".join(f"{f:g}" for f in self.split_fractions)
                raise ConfigError(f"--split-fractions {shown}: {exc}") from None


def fraction_splits(names: list[str], config: FractionSplitConfig) -> dict[str, Split | None]:
    """Split of every class name: None for all unless `--split-fractions` was given."""
    if not config.split_fractions:
        return dict.fromkeys(names)
    try:
        return dict(split_by_fractions(names, config.split_fractions, config.split_seed))
    except ValueError as exc:
        raise LayoutError(f"--split-fractions: {exc}") from None


def fraction_rule(config: FractionSplitConfig) -> str:
    if not config.split_fractions:
        return "none (classes have no fixed split; pass a split file)"
    return f"seeded by fractions {list(config.split_fractions)}, seed {config.split_seed}"
