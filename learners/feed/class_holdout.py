"""Held-out images of the training classes: a deterministic per-class hold-out that multiclass
pre-training never trains on and validates on instead (`learners.train --validation held-out`).

Dhillon et al. keep the pre-training epoch with the best accuracy on images of the training
classes set apart from training ("images from ImageNet-1k belonging to the training classes
of Mini-ImageNet as the validation set", sec. 4 "Hyper-parameters"; few-shot-baseline
pretrain.py@c3f5b69d:43 reads them from train_val.csv, :74-79 keeps the best epoch). Here a
class's held-out records are drawn once from (seed, dataset name, class id): a count per class
(`20`) or a share of each class's images (`10%`), the same on every run and machine with the
same seed, and disjoint from the records its batches draw from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from episodes.sampling.sampler_formulas import draw_distinct, episode_rng, stable_hash
from episodes.util.cli_errors import UserError

__all__ = [
    "ClassRecords",
    "FLAG",
    "held_out_records",
    "HoldOut",
    "HoldOutError",
    "LABEL",
    "split_class_records",
    "trained_image_count",
]

FLAG = "--held-out-per-class"
LABEL = "held-out-validation"  # keeps these draws apart from FIX-ML's and the batches'


class HoldOutError(UserError, ValueError):
    """A hold-out that cannot be made (bad spelling, or a class too small to keep training)."""


@dataclass(frozen=True)
class HoldOut:
    """How many images of each training class are held out: `count` of them, or `percent` of
    each class's images (rounded, at least one)."""

    count: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, text: str) -> HoldOut:
        """`20` (images per class) or `10%` (of each class's images); one line otherwise."""
        value = text.strip()
        try:
            if value.endswith("%"):
                percent = float(value[:-1])
                if 0 < percent < 100:
                    return cls(percent=percent)
            else:
                count = int(value)
                if count >= 1:
                    return cls(count=count)
        except ValueError:
            pass
        raise HoldOutError(
            f"{FLAG} {text}: expected a count of images per class (e.g. 20) or a share of each "
            "class's images (e.g. 10%, between 0% and 100%)"
        )

    def text(self) -> str:
        """The flag's spelling (what config.json records)."""
        return f"{self.count}" if self.count is not None else f"{self.percent:g}%"

    def size(self, images: int) -> int:
        """Images held out of a class of `images`."""
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(1, round(images * self.percent / 100))


def held_out_records(
    hold_out: HoldOut, images: int, dataset: str, class_id: int, seed: int
) -> np.ndarray:
    """The sorted record numbers of class `class_id` (of `images` records) held out: a pure
    function of (seed, dataset name, class id). HoldOutError when no image would be left to
    train on."""
    size = hold_out.size(images)
    if size >= images:
        raise HoldOutError(
            f"{FLAG} {hold_out.text()}: class {class_id} of {dataset} has {images} images, so "
            "none would be left to train on; hold out fewer"
        )
    # drawn as FIX-ML's base hold-out draws (episodes.sampling.fixml.make_base_holdout)
    rng = episode_rng(seed, class_id, (stable_hash(dataset), stable_hash(LABEL)))
    return np.sort(draw_distinct(rng, np.array([images]), np.array([size])))


@dataclass(frozen=True)
class ClassRecords:
    """One training class's records: those its batches draw from and those held out."""

    class_id: int
    trained: np.ndarray
    held_out: np.ndarray


def split_class_records(
    hold_out: HoldOut | None,
    dataset: str,
    class_ids: Sequence[int],
    images_per_class: Sequence[int],
    seed: int,
) -> list[ClassRecords]:
    """Each class's trained and held-out records (every record trained without a hold-out)."""
    classes = []
    for class_id, images in zip(class_ids, images_per_class):
        held = (
            np.zeros(0, dtype=np.int64)
            if hold_out is None
            else held_out_records(hold_out, int(images), dataset, int(class_id), seed)
        )
        trained = np.setdiff1d(np.arange(int(images), dtype=np.int64), held)
        classes.append(ClassRecords(int(class_id), trained, held.astype(np.int64)))
    return classes


def trained_image_count(
    dataset_dirs: Sequence[str], split_file: str | None, hold_out: HoldOut | None, seed: int
) -> int:
    """Images of the training classes a multiclass run trains on (held-out ones excluded),
    every dataset together."""
    from episodes.sampling.sampler_factory import load_dataset

    total = 0
    for folder in dataset_dirs:
        spec = load_dataset(folder, split_file)
        classes = spec.classes("train")
        counts = [spec.images_per_class[c] for c in classes]
        records = split_class_records(hold_out, spec.name, classes, counts, seed)
        total += sum(len(r.trained) for r in records)
    return total
