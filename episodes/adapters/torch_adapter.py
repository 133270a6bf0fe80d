"""PyTorch adapter: episodes as an `IterableDataset`, shared out among DataLoader workers.

Worker w of W reads episode indices start+w, start+w+W, ...; the DataLoader takes one item
from each worker in turn, so the loader yields episodes start, start+1, ... in order, each
exactly once, whatever `num_workers`. Each worker builds its own EpisodeReader (own file
handles, threads and memory maps) the first time it iterates. No TensorFlow is involved.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from episodes.reading.reader import EpisodeReader
from episodes.sampling.episode import ARRAY_FIELDS, Episode

__all__ = ["EpisodeDataset", "episode_loader", "episode_to_tensors", "worker_indices"]


def episode_to_tensors(episode: Episode, channels_first: bool = False) -> dict[str, Any]:
    """Dict of torch tensors (sharing the numpy memory) plus source, split, index, names."""
    out: dict[str, Any] = {}
    for name in ARRAY_FIELDS:
        tensor = torch.from_numpy(np.ascontiguousarray(getattr(episode, name)))
        if channels_first and name.endswith("_images"):
            tensor = tensor.permute(0, 3, 1, 2).contiguous()
        out[name] = tensor
    out["source"] = episode.source
    out["split"] = episode.split
    out["episode_index"] = episode.episode_index
    out["class_names"] = list(episode.class_names)
    return out


def worker_indices(start: int, count: int, worker_id: int, num_workers: int) -> range:
    """Episode indices that worker `worker_id` of `num_workers` reads."""
    return range(start + worker_id, start + count, num_workers)


class EpisodeDataset(IterableDataset):
    """`count` episodes from `start` of an EpisodeReader built from the same arguments.

    The arguments are checked once here (a clear error before any worker starts); the readers
    themselves are created inside each worker process."""

    def __init__(
        self,
        dataset_dirs: str | os.PathLike | Sequence[str | os.PathLike],
        split: Any,
        config: Any = None,
        seed: int = 0,
        *,
        num_episodes: int,
        start: int = 0,
        channels_first: bool = False,
        **reader_options: Any,
    ):
        super().__init__()
        if num_episodes < 0 or start < 0:
            raise ValueError(f"num_episodes={num_episodes}, start={start}: expected >= 0")
        self.reader_args = (dataset_dirs, split, config, seed)
        self.reader_options = dict(reader_options)
        self.num_episodes = num_episodes
        self.start = start
        self.channels_first = channels_first
        EpisodeReader(*self.reader_args, **self.reader_options).close()  # validate now
        self._reader: EpisodeReader | None = None
        self._reader_pid: int | None = None

    def __len__(self) -> int:
        return self.num_episodes

    def reader(self, in_worker: bool = False) -> EpisodeReader:
        """This process's reader (one decoding thread per DataLoader worker by default)."""
        if self._reader is None or self._reader_pid != os.getpid():
            options = dict(self.reader_options)
            if in_worker:
                options.setdefault("num_threads", 1)
                # DataLoader workers are the parallel processes (and, being daemonic, could not
                # start decoding processes of their own).
                options["decode_processes"] = 0
                options["sampler_process"] = False
            self._reader = EpisodeReader(*self.reader_args, **options)
            self._reader_pid = os.getpid()
        return self._reader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker_id, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        reader = self.reader(in_worker=info is not None)
        indices = worker_indices(self.start, self.num_episodes, worker_id, num_workers)
        for episode in reader.read_many(reader.describe(i) for i in indices):
            yield episode_to_tensors(episode, self.channels_first)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None  # threads and file handles stay in their process
        state["_reader_pid"] = None
        return state


def episode_loader(
    dataset: EpisodeDataset,
    num_workers: int = 0,
    pin_memory: bool | None = None,
    prefetch_factor: int | None = 2,
    persistent_workers: bool = False,
) -> DataLoader:
    """A DataLoader yielding one episode dict per step (no batching of episodes).

    `pin_memory=None` pins when CUDA is available (faster host-to-GPU copies)."""
    if pin_memory is None:
        pin_memory = torch.cuda.is_available()
    return DataLoader(
        dataset,
        batch_size=None,
        num_workers=num_workers,
        pin_memory=pin_memory,
        prefetch_factor=prefetch_factor if num_workers > 0 else None,
        persistent_workers=persistent_workers and num_workers > 0,
    )
