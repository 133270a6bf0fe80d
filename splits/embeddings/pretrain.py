"""Pretrain the feature extractor of an embedding job on the dataset being partitioned.

ATG's recipe (Arnold & Sha, sec. 5): a network is trained by plain cross-entropy over the
entire set of classes, then its last layer is removed. Here that is a learners `multiclass` run
(the shared training loop of `learners.train`) whose training split is every class of the
dataset, written as a split file inside the run folder; the run folder keeps the checkpoint.
Re-running with the same options resumes or reuses the run.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from episodes.records.dataset_spec import DatasetSpec, load_spec
from episodes.records.split_file import SplitFile
from episodes.util.config_flags import ConfigError
from learners.feed.episode_source import EpisodeOptions
from learners.methods.registry import learner_config
from learners.train import train
from learners.training.run_dir import RunConfig, checkpoint_path

__all__ = [
    "ALL_CLASSES_SPLIT",
    "DEFAULT_EPOCHS",
    "PretrainConfig",
    "pretrain",
    "pretrain_run_config",
    "write_all_classes_split",
]

ALL_CLASSES_SPLIT = "all_classes_split.json"
DEFAULT_EPOCHS = 1.0


@dataclass(frozen=True)
class PretrainConfig:
    """Multiclass pre-training options; `steps` or `epochs` (passes over all images) set the
    length, `DEFAULT_EPOCHS` when neither is given."""

    backbone: str = "cnn4"
    image_size: int = 84
    width: float = 1.0
    steps: int | None = None
    epochs: float | None = None
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    device: str = "auto"
    checkpoint_every: int = 1000
    progress: bool = True

    def __post_init__(self) -> None:
        if self.steps is not None and self.epochs is not None:
            raise ConfigError("give --pretrain-steps or --pretrain-epochs, not both")
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"--pretrain-steps {self.steps}: expected >= 1")
        if self.epochs is not None and not self.epochs > 0:
            raise ConfigError(f"--pretrain-epochs {self.epochs}: expected > 0")
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size {self.batch_size}: expected >= 1")
        if self.image_size < 16:
            raise ConfigError(f"--image-size {self.image_size}: expected >= 16 pixels")

    def total_steps(self, total_images: int) -> int:
        """Training steps: `steps`, or ceil(epochs * images / batch size)."""
        if self.steps is not None:
            return self.steps
        epochs = DEFAULT_EPOCHS if self.epochs is None else self.epochs
        return max(1, math.ceil(epochs * total_images / self.batch_size))


def write_all_classes_split(spec: DatasetSpec, path: str | os.PathLike) -> Path:
    """A split file putting every class of `spec` in train (valid and test empty)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    split = SplitFile(
        dataset=spec.name,
        method="listed",
        train=list(spec.class_names),
        parameters={"purpose": "feature-extractor pre-training on every class (ATG sec. 5)"},
    )
    return split.save(path)


def pretrain_run_config(
    dataset_dir: str | os.PathLike,
    split_file: str | os.PathLike,
    steps: int,
    config: PretrainConfig,
) -> RunConfig:
    """The learners run of the pre-training (no validation: there are no held-out classes)."""
    learner = learner_config(
        "multiclass",
        backbone=config.backbone,
        image_size=config.image_size,
        width=config.width,
        lr=config.lr,
        label_smoothing=0.0,  # ATG's extractor: plain cross-entropy, not Dhillon et al.'s recipe
        mixup_alpha=0.0,
        pretrain_augment=False,  # plain batches too (learners.train augments by default)
    )
    return RunConfig(
        learner=learner,
        dataset=str(Path(dataset_dir).resolve()),
        split_file=str(Path(split_file).resolve()),
        episode_options=EpisodeOptions(image_size=config.image_size),
        seed=config.seed,
        total_steps=steps,
        checkpoint_every=min(config.checkpoint_every, steps),
        validation_episodes=0,
        batch_size=config.batch_size,
    )


def pretrain(
    dataset_dir: str | os.PathLike, run_dir: str | os.PathLike, config: PretrainConfig
) -> Path:
    """Train (or resume) the multiclass run in `run_dir`; returns its last checkpoint."""
    spec = load_spec(dataset_dir)
    if spec.num_classes < 2:
        raise ConfigError(f"--dataset {dataset_dir}: pre-training needs >= 2 classes")
    steps = config.total_steps(spec.total_images)
    split_file = write_all_classes_split(spec, Path(run_dir) / ALL_CLASSES_SPLIT)
    run = pretrain_run_config(dataset_dir, split_file, steps, config)
    train(run, str(run_dir), config.device, progress=config.progress)
    return checkpoint_path(run_dir, "last")
