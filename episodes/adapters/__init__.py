"""Episodes for a training loop: a torch `IterableDataset` / `DataLoader` and a `tf.data`
pipeline over an EpisodeReader (each imports its framework only when used)."""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = ["EpisodeDataset", "episode_loader", "make_tf_dataset"]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "EpisodeDataset": "episodes.adapters.torch_adapter",
        "episode_loader": "episodes.adapters.torch_adapter",
        "make_tf_dataset": "episodes.adapters.tf_adapter",
    },
)
