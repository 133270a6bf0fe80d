"""Meta-Dataset's sampling: episodes of one dataset, or of several with each episode's source
drawn uniformly (Triantafillou et al., sections 3.2 and 5): `episodes.sampling.sampler`."""

from __future__ import annotations

from collections.abc import Sequence

from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.sampling.modes import register_mode
from episodes.sampling.sampler import EpisodeSampler, EpisodeStream, MultiSourceSampler
from episodes.sampling.sampler_config import SamplerConfig
from episodes.sampling.sampling_mode import SamplingMode

__all__ = ["MetaDatasetMode"]


@register_mode
class MetaDatasetMode(SamplingMode):
    """The default: the classes of `split`, by the Meta-Dataset sampler."""

    name = "meta_dataset"
    summary = "Meta-Dataset's sampler over one dataset, or several (a source per episode)"

    def sampler(
        self, specs: Sequence[DatasetSpec], split: Split, config: SamplerConfig, seed: int
    ) -> EpisodeStream:
        if len(specs) == 1:
            return EpisodeSampler(specs[0], split, config, seed)
        return MultiSourceSampler(list(specs), split, config, seed)
