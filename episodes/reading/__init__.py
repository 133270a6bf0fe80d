"""Episodes from records: the reader (descriptions in, decoded arrays out) and episode shards.

`reader` (EpisodeReader: decoding threads or processes, the decoded cache, prefetching),
`decode_processes` and `description_prefetch` (its helper processes), `episode_shards`
(materialised episodes as TFRecord shards, written by `python -m beam_pipelines.episodes`) and
`episode_grid` (a picture of one episode).
"""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = ["EpisodeReader", "EpisodeShardReader", "save_episode_grid"]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "EpisodeReader": "episodes.reading.reader",
        "EpisodeShardReader": "episodes.reading.episode_shards",
        "save_episode_grid": "episodes.reading.episode_grid",
    },
)
