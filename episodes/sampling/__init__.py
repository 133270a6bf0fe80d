"""Episode descriptions: the Meta-Dataset sampler, FIX-ML's pools and base/novel mixing.

A description is a pure function of (dataset spec, split, sampler config, seed, episode index)
and holds no pixels (`episodes.reading` turns it into images). Modules: `sampler_config` (what
episodes look like), `sampler_formulas` (the paper's formulas), `sampler` (Meta-Dataset's
sampler, one or several sources), `fixml` and `fixml_records` (FIX-ML), `sampler_factory`
(specs, split files and the sampler a command asks for), `sampling_mode` and `modes` (the
sampling modes, one plug-in module each: which sampler draws the episodes over which splits),
`episode` (the Episode types), `episode_stats` and `episode_cli` (the flags shared by the
commands that sample).
"""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = [
    "BaseHoldout",
    "Episode",
    "EpisodeDescription",
    "EpisodeSampler",
    "FixedSupportPool",
    "MixedSampler",
    "MultiSourceSampler",
    "SamplerConfig",
    "SamplerError",
    "SamplingMode",
    "get_mode",
    "load_dataset",
    "make_base_holdout",
    "make_fixed_support_pool",
    "make_sampler",
    "sample_episode",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        **dict.fromkeys(("Episode", "EpisodeDescription"), "episodes.sampling.episode"),
        **dict.fromkeys(
            ("EpisodeSampler", "MultiSourceSampler", "sample_episode"), "episodes.sampling.sampler"
        ),
        **dict.fromkeys(("SamplerConfig", "SamplerError"), "episodes.sampling.sampler_config"),
        **dict.fromkeys(
            ("MixedSampler", "make_base_holdout", "make_fixed_support_pool"),
            "episodes.sampling.fixml",
        ),
        **dict.fromkeys(("BaseHoldout", "FixedSupportPool"), "episodes.sampling.fixml_records"),
        **dict.fromkeys(("load_dataset", "make_sampler"), "episodes.sampling.sampler_factory"),
        "SamplingMode": "episodes.sampling.sampling_mode",
        "get_mode": "episodes.sampling.modes",
    },
)
