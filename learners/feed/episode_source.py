"""Where learners get their data: an episode source (episodes by index) and a batch source
(non-episodic (images, class_ids) batches for multiclass pre-training).

Implementations: the synthetic blobs of `learners.feed.synthetic_episodes` (dataset name
"synthetic"), converted datasets through `episodes.reading.reader.EpisodeReader` (imported lazily, so this
package works without it), and materialised episode shards (`episodes.reading.episode_shards`).
Sources are addressed by index, so training can resume at any step and evaluation reads the
same episodes on every machine. `items(indices)` reads any increasing indices (what a
background loader's worker w of W reads: start+w, start+w+W, ...); `random_access` says whether
skipped indices cost nothing (False for shards, which are read front to back). A
`ShardedSource` is one torchrun rank's share of a training stream (`learners.training.distributed`).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from episodes.records.local_dataset import is_remote
from learners import LearnerConfigError, LearnerInputError
from learners.feed.class_holdout import ClassRecords, HoldOut, split_class_records
from learners.feed.sampler_options import sampler_config
from learners.feed.synthetic_episodes import (
    BlobDataset,
    BlobDatasetConfig,
    SyntheticBatchSource,
    SyntheticEpisodeConfig,
    SyntheticEpisodeSource,
)

if TYPE_CHECKING:
    from learners.training.distributed import ShardPlan

__all__ = [
    "BatchSource",
    "check_episode_options",
    "close_source",
    "dataset_dirs",
    "EpisodeOptions",
    "EpisodeRequest",
    "EpisodeSource",
    "open_batch_source",
    "open_episode_source",
    "open_sharded",
    "ReaderBatchSource",
    "ReaderEpisodeSource",
    "ShardedSource",
    "ShardEpisodeSource",
    "SYNTHETIC",
]

SYNTHETIC = "synthetic"


class EpisodeSource(Protocol):
    random_access: bool

    def episodes(self, start: int = 0) -> Iterator[Any]:
        """Episodes start, start+1, ... (dicts or objects following the episode contract)."""
        ...

    def items(self, indices: Iterable[int]) -> Iterator[Any]:
        """The episodes of increasing `indices`, in that order."""
        ...


class BatchSource(Protocol):
    class_ids: Sequence[int]
    random_access: bool

    def batches(self, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Batches start, start+1, ... of (images (B,H,W,3), class ids (B,))."""
        ...

    def items(self, indices: Iterable[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The batches of increasing `indices`, in that order."""
        ...


def close_source(source: Any) -> None:
    """Release a source's files, threads and decoding processes (synthetic ones hold none)."""
    close = getattr(source, "close", None)
    if close is not None:
        close()


@dataclass(frozen=True)
class EpisodeOptions:
    """Episode shape and sampling variants shared by train and evaluate.

    None for ways/shots/query keeps Meta-Dataset's variable episodes; fixed `ways` draws the
    classes uniformly over the split, the class hierarchies off (Meta-Dataset's sampler refuses
    fixed ways with a hierarchy; its fixed-ways setups set ignore_dag_ontology and
    ignore_bilevel_ontology, as here). `fix_ml_pool` is a FIX-ML
    fixed-support pool (JSON of `episodes.sampling.fixml`, or k for the synthetic data);
    `base_novel_lambda` samples from tau_BN(lambda) with the train split as base classes.
    `sampler` holds the other options of Meta-Dataset's sampler that were given
    (`learners.feed.sampler_options`; e.g. max_ways), by SamplerConfig field name."""

    ways: int | None = None
    shots: int | None = None
    query: int | None = None
    image_size: int = 84
    fix_ml_pool: str | None = None
    base_novel_lambda: float | None = None
    sampler: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As config.json records it: `sampler` only when an option was given, so a run
        without one records what runs before 0.2.0 recorded."""
        values = asdict(self)
        if not values["sampler"]:
            del values["sampler"]
        return values


@dataclass(frozen=True)
class EpisodeRequest:
    """Which episodes a reader source reads (what `open_episode_source` was asked for), passed
    whole to the source and its FIX-ML sampler rather than argument by argument."""

    dataset: str
    split: str
    split_file: str | None
    options: EpisodeOptions
    seed: int


def _synthetic_config(options: EpisodeOptions) -> SyntheticEpisodeConfig:
    if options.sampler:
        shown = ", ".join(f"--{name.replace('_', '-')}" for name in options.sampler)
        raise LearnerConfigError(
            f"{shown}: options of Meta-Dataset's sampler, which --synthetic episodes do not "
            "use; drop them or give --dataset"
        )
    pool = int(options.fix_ml_pool) if options.fix_ml_pool is not None else None
    return SyntheticEpisodeConfig(
        ways=options.ways,
        shots=options.shots,
        queries=options.query or 5,
        fixed_support_shots=pool,
        base_novel_lambda=options.base_novel_lambda,
    )


def _synthetic_dataset(options: EpisodeOptions) -> BlobDataset:
    return BlobDataset(BlobDatasetConfig(image_size=options.image_size))


def dataset_dirs(dataset: str) -> list[str]:
    """Comma-separated converted dataset folders; each must exist."""
    dirs = [d for d in dataset.split(",") if d]
    for d in dirs:
        if is_remote(d):
            raise LearnerInputError(
                f"--dataset {d}: the learners read a local folder; copy it first with `python -m "
                f"episodes.fetch --dataset {d} --output LOCAL_FOLDER` and pass LOCAL_FOLDER"
            )
        if not Path(d).is_dir():
            raise LearnerInputError(f"--dataset {d}: no such folder (expected a converted dataset)")
    if not dirs:
        raise LearnerConfigError("--dataset is empty")
    return dirs


def _sampler_config(options: EpisodeOptions) -> Any:
    return sampler_config(options.ways, options.shots, options.query, options.sampler)


class ReaderEpisodeSource:
    """Episodes of converted datasets via `episodes.reading.reader.EpisodeReader` (lazy import).

    FIX-ML: a fixed-support pool (`python -m episodes.fixml pool`) drives an
    `episodes.sampling.sampler.EpisodeSampler(..., pool=...)`; base/novel mixing is the reader's
    `mix_lambda` (train split as base classes). `decode_processes` > 0 decodes records in that
    many worker processes, ahead of the caller (the reader's background loading);
    `decode_device="cuda"` decodes JPEG records on the GPU (`episodes.images.gpu_decode`)."""

    random_access = True

    def __init__(
        self, request: EpisodeRequest, decode_processes: int = 0, decode_device: str = "cpu"
    ):
        from episodes.reading.reader import EpisodeReader

        options = request.options
        dirs = dataset_dirs(request.dataset)
        config = _sampler_config(options)
        sampler = None
        if options.fix_ml_pool is not None:
            sampler = _fixed_support_sampler(dirs, config, request)
        extra = {}
        if options.base_novel_lambda is not None:
            extra["mix_lambda"] = options.base_novel_lambda
        self.reader = EpisodeReader(
            dirs,
            request.split,
            config,
            request.seed,
            sampler=sampler,
            image_size=options.image_size,
            split_file=request.split_file,
            decode_processes=decode_processes,
            decode_device=decode_device,
            **extra,
        )

    def episodes(self, start: int = 0) -> Iterator[Any]:
        return self.reader.episodes(start)

    def items(self, indices: Iterable[int]) -> Iterator[Any]:
        return self.reader.read_many(self.reader.describe(i) for i in indices)

    def close(self) -> None:
        self.reader.close()


def _fixed_support_sampler(dirs: list[str], config: Any, request: EpisodeRequest) -> Any:
    """FIX-ML (Setlur et al. sec. 4): the saved pool is every base class's whole support."""
    from episodes.sampling.fixml_records import FixedSupportPool
    from episodes.sampling.sampler import EpisodeSampler
    from episodes.sampling.sampler_factory import load_dataset

    pool_file = request.options.fix_ml_pool
    if len(dirs) != 1:
        raise LearnerConfigError("a FIX-ML fixed-support pool applies to one dataset folder")
    if not Path(str(pool_file)).is_file():
        raise LearnerInputError(f"--fix-ml-pool {pool_file}: no such pool JSON file")
    pool = FixedSupportPool.load(pool_file)
    spec = load_dataset(dirs[0], request.split_file)
    return EpisodeSampler(spec, request.split, config, request.seed, pool=pool)


class ShardEpisodeSource:
    """Materialised evaluation episodes (`episodes.reading.episode_shards`), in episode order."""

    random_access = False  # read front to back: a skipped episode is still read and decoded

    def __init__(self, path: str, image_size: int):
        from episodes.reading.episode_shards import EpisodeShardReader

        if not Path(path).exists():
            raise LearnerInputError(f"--episode-shards {path}: no such file or folder")
        self.reader = EpisodeShardReader(path, image_size=image_size)

    def episodes(self, start: int = 0) -> Iterator[Any]:
        return itertools.islice(iter(self.reader), start, None)

    def items(self, indices: Iterable[int]) -> Iterator[Any]:
        wanted = iter(indices)
        target = next(wanted, None)
        for index, episode in enumerate(self.reader):
            if target is None:
                return
            if index == target:
                yield episode
                target = next(wanted, None)


@dataclass
class _BatchPlan:
    """One multiclass batch: (dataset position, description) per dataset it draws from, and the
    permutation that shuffles the concatenated images."""

    parts: list[tuple[int, Any]]
    order: np.ndarray

    def join(self, episodes: Sequence[Any], id_stride: int) -> tuple[Any, np.ndarray]:
        """The parts' images and dataset-unique class ids, concatenated and shuffled (torch
        tensors when the reader decoded on the GPU, else numpy arrays)."""
        ids = np.concatenate(
            [e.support_class_ids + p * id_stride for (p, _), e in zip(self.parts, episodes)]
        )[self.order]
        images = [e.support_images for e in episodes]
        if isinstance(images[0], np.ndarray):
            return np.concatenate(images)[self.order], ids
        import torch

        joined = torch.cat(images)
        return joined[torch.as_tensor(self.order, device=joined.device)], ids


class ReaderBatchSource:
    """Uniformly drawn training examples of converted datasets, as batches for pre-training.

    Batch i is a pure function of (seed, i) (`plan`). Class ids are made unique across
    datasets by adding `dataset position * ID_STRIDE`. Batches are read through the reader's
    `read_many`, so `decode_processes` decode several batches ahead, as for episodes; with
    `decode_device="cuda"` the images are a uint8 CUDA tensor."""

    ID_STRIDE = 1_000_000
    random_access = True

    def __init__(
        self,
        dataset: str,
        split_file: str | None,
        batch_size: int,
        image_size: int,
        seed: int,
        decode_processes: int = 0,
        decode_device: str = "cpu",
        hold_out: HoldOut | None = None,
    ):
        from episodes.reading.reader import EpisodeReader

        if batch_size < 1:
            raise LearnerConfigError(f"--batch-size must be >= 1, got {batch_size}")
        self.reader = EpisodeReader(
            dataset_dirs(dataset),
            "train",
            None,
            seed,
            image_size=image_size,
            split_file=split_file,
            decode_processes=decode_processes,
            decode_device=decode_device,
        )
        self.batch_size = batch_size
        self.seed = seed
        self.tables = []  # per dataset: (spec, class ids, cumulative image counts)
        # per dataset, with a hold-out: each class's trained and held-out records
        self.records: list[list[ClassRecords]] | None = None if hold_out is None else []
        for spec in self.reader.specs:
            classes = np.asarray(spec.classes("train"), dtype=np.int64)
            counts = np.asarray([spec.images_per_class[c] for c in classes], dtype=np.int64)
            if self.records is not None:
                split = split_class_records(hold_out, spec.name, classes, counts, seed)
                self.records.append(split)
                counts = np.asarray([len(r.trained) for r in split], dtype=np.int64)
            self.tables.append((spec, classes, np.cumsum(counts)))
        self.class_ids = [
            position * self.ID_STRIDE + int(c)
            for position, (_, classes, _) in enumerate(self.tables)
            for c in classes
        ]

    def plan(self, index: int) -> _BatchPlan:
        """Which records make batch `index` (one description per dataset it draws from) and
        the order its images are shuffled into: a pure function of (seed, index)."""
        from episodes.sampling.episode import EpisodeDescription

        rng = np.random.default_rng([self.seed, 2024, index])
        totals = np.asarray([t[2][-1] for t in self.tables])
        parts = []
        for position, count in enumerate(rng.multinomial(self.batch_size, totals / totals.sum())):
            if count == 0:
                continue
            spec, classes, cumulative = self.tables[position]
            flat = rng.integers(0, cumulative[-1], size=count)
            slots = np.searchsorted(cumulative, flat, side="right")
            records = flat - np.concatenate([[0], cumulative[:-1]])[slots]
            if self.records is not None:  # the n-th trained record of its class
                trained = self.records[position]
                records = np.asarray([trained[s].trained[r] for s, r in zip(slots, records)])
            chosen = sorted(set(slots.tolist()))
            description = EpisodeDescription(
                source=spec.name,
                split=self.reader.split,
                episode_index=index,
                class_ids=tuple(int(classes[s]) for s in chosen),
                support=tuple(tuple(int(r) for r in records[slots == s]) for s in chosen),
                query=tuple(() for _ in chosen),
            )
            parts.append((position, description))
        return _BatchPlan(parts, rng.permutation(self.batch_size))

    def batch(self, index: int) -> tuple[Any, np.ndarray]:
        return next(self.items([index]))

    def batches(self, start: int = 0) -> Iterator[tuple[Any, np.ndarray]]:
        return self.items(itertools.count(start))

    def items(self, indices: Iterable[int]) -> Iterator[tuple[Any, np.ndarray]]:
        """Batches of `indices` through the reader's `read_many`, so they are read ahead like
        episodes (decode processes, its prefetch); each batch's per-dataset descriptions are
        read in a row and joined in the batch's shuffled order."""
        plans: collections.deque[_BatchPlan] = collections.deque()

        def descriptions() -> Iterator[Any]:
            for index in indices:
                plan = self.plan(index)
                plans.append(plan)
                for _, description in plan.parts:
                    yield description

        episodes = self.reader.read_many(descriptions())
        try:
            for first in episodes:
                plan = plans.popleft()  # appended when its first description was drawn
                read = [first] + [next(episodes) for _ in plan.parts[1:]]
                yield plan.join(read, self.ID_STRIDE)
        finally:
            episodes.close()

    def held_out_batches(self, batch_size: int) -> Iterator[tuple[Any, np.ndarray]]:
        """The held-out images of every training class, in (dataset, class, record) order, as
        batches of up to `batch_size` (images, dataset-unique class ids); none without a
        hold-out."""
        from episodes.sampling.episode import EpisodeDescription

        descriptions = []
        for position, split in enumerate(self.records or []):
            spec = self.tables[position][0]
            items = [(r.class_id, int(n)) for r in split for n in r.held_out]
            for first in range(0, len(items), batch_size):
                chunk = items[first : first + batch_size]
                classes = sorted({c for c, _ in chunk})
                description = EpisodeDescription(
                    source=spec.name,
                    split=self.reader.split,
                    episode_index=first // batch_size,
                    class_ids=tuple(classes),
                    support=tuple(tuple(n for c, n in chunk if c == k) for k in classes),
                    query=tuple(() for _ in classes),
                )
                descriptions.append((position, description))
        read = self.reader.read_many(d for _, d in descriptions)
        try:
            for (position, _), episode in zip(descriptions, read):
                ids = episode.support_class_ids + position * self.ID_STRIDE
                yield episode.support_images, ids
        finally:
            read.close()

    def close(self) -> None:
        self.reader.close()


def check_episode_options(options: EpisodeOptions, dataset: str) -> None:
    """Refuse, before any work, the episode options the source would refuse when opened (a
    sampler option off its bounds, or one that --synthetic episodes do not use)."""
    if dataset == SYNTHETIC:
        _synthetic_config(options)
    else:
        _sampler_config(options)


def open_episode_source(
    dataset: str,
    split: str,
    split_file: str | None,
    options: EpisodeOptions,
    seed: int,
    decode_processes: int = 0,
    decode_device: str = "cpu",
) -> EpisodeSource:
    """Episodes of `split` from "synthetic" or from comma-separated converted dataset folders
    (decoding records in `decode_processes` worker processes when > 0, on the GPU with
    `decode_device="cuda"`)."""
    if split not in ("train", "valid", "test"):
        raise LearnerConfigError(f"split {split!r}: expected 'train', 'valid' or 'test'")
    if dataset == SYNTHETIC:
        return SyntheticEpisodeSource(
            split, seed, _synthetic_config(options), _synthetic_dataset(options)
        )
    if split_file is not None and not Path(split_file).is_file():
        raise LearnerInputError(f"--split-file {split_file}: no such file")
    request = EpisodeRequest(dataset, split, split_file, options, seed)
    return ReaderEpisodeSource(request, decode_processes, decode_device)


def open_batch_source(
    dataset: str,
    split_file: str | None,
    batch_size: int,
    options: EpisodeOptions,
    seed: int,
    decode_processes: int = 0,
    decode_device: str = "cpu",
    hold_out: HoldOut | None = None,
) -> BatchSource:
    """Training batches for multiclass pre-training (read ahead like episodes), never of the
    images `hold_out` sets apart."""
    if dataset == SYNTHETIC:
        return SyntheticBatchSource(batch_size, seed, _synthetic_dataset(options))
    if split_file is not None and not Path(split_file).is_file():
        raise LearnerInputError(f"--split-file {split_file}: no such file")
    return ReaderBatchSource(
        dataset,
        split_file,
        batch_size,
        options.image_size,
        seed,
        decode_processes,
        decode_device,
        hold_out,
    )


class ShardedSource:
    """Rank r's share of a training stream (`learners.training.distributed.ShardPlan`): position p of
    this stream is global item `plan.global_index(p)` of `inner`, so the feed, its loader
    workers and a resumed run read positions as before and no two ranks read the same item."""

    def __init__(self, inner: Any, plan: ShardPlan):
        self.inner = inner
        self.plan = plan
        self.random_access = getattr(inner, "random_access", True)
        if hasattr(inner, "class_ids"):
            self.class_ids = inner.class_ids

    def items(self, indices: Iterable[int]) -> Iterator[Any]:
        return self.inner.items(self.plan.global_index(p) for p in indices)

    def episodes(self, start: int = 0) -> Iterator[Any]:
        return self.items(itertools.count(start))

    def batches(self, start: int = 0) -> Iterator[Any]:
        return self.items(itertools.count(start))

    def close(self) -> None:
        close_source(self.inner)


def open_sharded(open_source: Any, plan: ShardPlan, **kwargs: Any) -> ShardedSource:
    """`open_source(**kwargs)` wrapped as a `ShardedSource` (picklable with a picklable
    `open_source`, so loader workers open their own)."""
    return ShardedSource(open_source(**kwargs), plan)
