"""FIX-ML's tau_BN(lambda) (Setlur et al., section 4.2): each class of an episode is novel (from
the split asked for) with probability lambda, else base (from `base_split`):
`episodes.sampling.fixml.MixedSampler`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.records.reader_errors import ReaderError
from episodes.sampling.fixml import MixedSampler
from episodes.sampling.modes import register_mode
from episodes.sampling.sampler_config import SamplerConfig
from episodes.sampling.sampling_mode import SamplingMode, mode_option

__all__ = ["MixedMode", "MixingOptions"]


@dataclass(frozen=True)
class MixingOptions:
    """lambda and the split of the base classes (the novel ones are the command's split)."""

    lam: float = mode_option(
        flag="--lambda",
        metavar="LAMBDA",
        help="mix base and novel classes: each class is novel (from --split) with probability "
        "LAMBDA in [0, 1], else base (from --base-split); FIX-ML section 4.2",
    )
    base_split: str = mode_option("train", help="base classes for --lambda (default train)")


@register_mode
class MixedMode(SamplingMode):
    """Base/novel mixing, one dataset at a time; fixed 5-way 5-shot 15-query episodes unless
    the sampler options say otherwise (FIX-ML's evaluation)."""

    name = "mixed"
    summary = "FIX-ML's base/novel mixture tau_BN(lambda) (Setlur et al. section 4.2)"
    Options = MixingOptions
    recorded = ("lambda", "base_split")

    def splits_read(self, split: Split) -> tuple[Split, ...]:
        return (split, Split.parse(self.options.base_split))

    def default_config(self) -> SamplerConfig:
        return SamplerConfig.fixed()

    def config_defaults(self) -> dict[str, Any]:
        return {"mode": "fixed"}

    def sampler(
        self, specs: Sequence[DatasetSpec], split: Split, config: SamplerConfig, seed: int
    ) -> MixedSampler:
        if len(specs) != 1:
            raise ReaderError("lambda mixing (base/novel) applies to one dataset at a time")
        options = self.options
        return MixedSampler(specs[0], options.base_split, split, options.lam, config, seed)

    def record(self) -> dict[str, Any]:
        return {"lambda": self.options.lam, "base_split": self.options.base_split}
