"""Synthetic few-shot data: each class is a pair of coloured Gaussian blobs; examples are jittered,
noisy renderings. Learnable in a few dozen steps, so tests and demos need no dataset on disk.

Episodes follow the episode contract of `learners.feed.episode_batch` and are a pure function of
(dataset seed, split, source seed, episode index), like the real sampler's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from learners import LearnerConfigError

__all__ = [
    "BlobDataset",
    "BlobDatasetConfig",
    "SPLITS",
    "SyntheticBatchSource",
    "SyntheticEpisodeConfig",
    "SyntheticEpisodeSource",
]

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class BlobDatasetConfig:
    image_size: int = 28
    train_classes: int = 32
    valid_classes: int = 8
    test_classes: int = 8
    noise: float = 0.8
    jitter: int = 3
    dataset_seed: int = 0


class BlobDataset:
    """Class templates (two blobs: centres, widths, colours) drawn once from `dataset_seed`."""

    def __init__(self, config: BlobDatasetConfig = BlobDatasetConfig()):
        self.config = config
        counts = (config.train_classes, config.valid_classes, config.test_classes)
        starts = np.cumsum((0, *counts))
        self.split_ids = {s: list(range(starts[i], starts[i + 1])) for i, s in enumerate(SPLITS)}
        rng = np.random.default_rng([config.dataset_seed, 7])
        total = int(starts[-1])
        self.centres = rng.uniform(0.25, 0.75, size=(total, 2, 2)) * config.image_size
        self.widths = rng.uniform(0.08, 0.2, size=(total, 2)) * config.image_size
        self.colours = rng.uniform(-0.5, 0.5, size=(total, 2, 3))
        grid = np.arange(config.image_size, dtype=np.float64)
        self._yy, self._xx = np.meshgrid(grid, grid, indexing="ij")

    def class_ids(self, split: str) -> list[int]:
        if split not in self.split_ids:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        return self.split_ids[split]

    def render(self, class_id: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` examples of `class_id` as (count, H, W, 3) uint8."""
        size, jitter = self.config.image_size, self.config.jitter
        images = np.full((count, size, size, 3), 0.5)
        shifts = rng.integers(-jitter, jitter + 1, size=(count, 2))
        for blob in range(2):
            cy = self.centres[class_id, blob, 0] + shifts[:, 0]
            cx = self.centres[class_id, blob, 1] + shifts[:, 1]
            dist = (self._yy[None] - cy[:, None, None]) ** 2 + (
                self._xx[None] - cx[:, None, None]
            ) ** 2
            bump = np.exp(-dist / (2 * self.widths[class_id, blob] ** 2))
            images += bump[..., None] * self.colours[class_id, blob][None, None, None, :]
        images += rng.normal(0.0, self.config.noise, size=images.shape)
        return np.clip(images * 255.0 + 0.5, 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class SyntheticEpisodeConfig:
    """Fixed N-way K-shot when `ways`/`shots` are set; otherwise variable ways (5..max_ways) and
    imbalanced shots (1..max_shots). `fixed_support_shots` draws support from a per-class pool
    drawn once (FIX-ML); `base_novel_lambda` takes each class from the test split with that
    probability and from the train split otherwise (FIX-ML's tau_BN(lambda))."""

    ways: int | None = 5
    shots: int | None = 5
    queries: int = 5
    max_ways: int = 10
    max_shots: int = 10
    fixed_support_shots: int | None = None
    base_novel_lambda: float | None = None


class SyntheticEpisodeSource:
    """Index-addressable episodes of one split of a `BlobDataset`."""

    random_access = True

    def __init__(
        self,
        split: str,
        seed: int = 0,
        config: SyntheticEpisodeConfig = SyntheticEpisodeConfig(),
        dataset: BlobDataset | None = None,
    ):
        self.dataset = dataset or BlobDataset()
        self.split = split
        self.seed = seed
        self.config = config
        self.classes = self.dataset.class_ids(split)
        self.source = f"synthetic_blobs/{split}"
        lam = config.base_novel_lambda
        if lam is not None and not 0.0 <= lam <= 1.0:
            raise LearnerConfigError(f"base_novel_lambda must lie in [0, 1], got {lam}")

    def _choose_classes(self, rng: np.random.Generator, ways: int) -> list[int]:
        lam = self.config.base_novel_lambda
        if lam is None:
            return [int(c) for c in rng.choice(self.classes, size=ways, replace=False)]
        base = list(self.dataset.class_ids("train"))
        novel = list(self.dataset.class_ids("test"))
        chosen = []
        for _ in range(ways):
            pool = novel if (rng.random() < lam and novel) or not base else base
            chosen.append(int(pool.pop(int(rng.integers(len(pool))))))
        return chosen

    def _support(self, class_id: int, shots: int, rng: np.random.Generator) -> np.ndarray:
        pool_size = self.config.fixed_support_shots
        if pool_size is None:
            return self.dataset.render(class_id, shots, rng)
        pool_rng = np.random.default_rng([self.dataset.config.dataset_seed, 11, class_id])
        return self.dataset.render(class_id, pool_size, pool_rng)[:shots]

    def episode(self, index: int) -> dict:
        rng = np.random.default_rng([self.seed, SPLITS.index(self.split), index])
        cfg = self.config
        ways = cfg.ways or int(rng.integers(5, min(cfg.max_ways, len(self.classes)) + 1))
        if ways > len(self.classes):
            raise LearnerConfigError(
                f"{ways} ways but split {self.split!r} has {len(self.classes)} classes"
            )
        classes = self._choose_classes(rng, ways)
        if cfg.fixed_support_shots is not None:
            shots = [cfg.fixed_support_shots] * ways
        elif cfg.shots is not None:
            shots = [cfg.shots] * ways
        else:
            shots = [int(s) for s in rng.integers(1, cfg.max_shots + 1, size=ways)]
        support = [self._support(c, k, rng) for c, k in zip(classes, shots)]
        query = [self.dataset.render(c, cfg.queries, rng) for c in classes]
        support_labels = np.repeat(np.arange(ways), shots)
        query_labels = np.repeat(np.arange(ways), cfg.queries)
        return {
            "support_images": np.concatenate(support),
            "support_labels": support_labels.astype(np.int64),
            "support_class_ids": np.asarray(classes, dtype=np.int64)[support_labels],
            "query_images": np.concatenate(query),
            "query_labels": query_labels.astype(np.int64),
            "query_class_ids": np.asarray(classes, dtype=np.int64)[query_labels],
            "source": self.source,
        }

    def episodes(self, start: int = 0) -> Iterator[dict]:
        return self.items(itertools.count(start))

    def items(self, indices: Iterable[int]) -> Iterator[dict]:
        for index in indices:
            yield self.episode(index)


class SyntheticBatchSource:
    """Non-episodic batches (images, class ids) over the training classes, for pre-training."""

    random_access = True

    def __init__(self, batch_size: int = 64, seed: int = 0, dataset: BlobDataset | None = None):
        if batch_size < 1:
            raise LearnerConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.dataset = dataset or BlobDataset()
        self.batch_size = batch_size
        self.seed = seed
        self.class_ids = self.dataset.class_ids("train")

    def batch(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, 99, index])
        ids = rng.choice(self.class_ids, size=self.batch_size)
        images = np.stack([self.dataset.render(int(c), 1, rng)[0] for c in ids])
        return images, ids.astype(np.int64)

    def batches(self, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.items(itertools.count(start))

    def items(self, indices: Iterable[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for index in indices:
            yield self.batch(index)
