"""What a learner is built from: the options every method shares, and the method's own options.

`LearnerConfig` holds the method name, the shared options (backbone, image size, width,
optimiser, learning rate, ...) and `options`, an instance of the method's own dataclass
(`MamlConfig`, `MulticlassConfig`, ... declared beside each method in `learners/methods/`).
`learners.methods.registry.resolved_config` fills `options` with the method's defaults when it is None.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from episodes.images.image_size_limit import MAX_IMAGE_SIDE
from learners.methods.config_fields import MethodConfig, check_fields, option
from learners.nn.backbones import BACKBONES, INPUT_ALIGNMENTS, BackboneConfig
from learners.nn.batch_norm import BATCH_NORM_MODES
from learners.optim.lr_schedule import LR_SCHEDULES, ScheduleConfig
from learners.optim.weight_decay import WEIGHT_DECAY_FORMS

__all__ = ["INPUT_SCALINGS", "LearnerConfig", "OPTIMIZERS"]

OPTIMIZERS = ("adam", "sgd")
# How pixels in [0, 1] become network inputs: ImageNet mean/std (Dhillon et al. A.4), or
# 2x - 1 as Meta-Dataset's decoder does (meta_dataset/data/decoder.py, ImageDecoder.decode_with_label).
INPUT_SCALINGS = ("imagenet", "meta-dataset")


@dataclass
class LearnerConfig:
    """The options every method shares, and the method's own (`options`); saved with each run
    and in every checkpoint."""

    method: str = option("protonet", "the registered method name", cli=False)
    backbone: str = option("cnn4", f"one of {', '.join(BACKBONES)}")
    image_size: int = option(
        84,
        "image side in pixels (episodes are resized to it)",
        minimum=1,
        maximum=MAX_IMAGE_SIDE,  # the image size limit of converted datasets
    )
    width: float = option(1.0, "channel width multiplier of the backbone", above=0)
    dropblock: bool = option(False, "DropBlock in ResNet-12")
    optimizer: str = option("adam", "adam, or sgd (Nesterov momentum 0.9)", choices=OPTIMIZERS)
    lr: float = option(1e-3, "learning rate", above=0)
    weight_decay: float = option(
        0.0, "weight decay (not on biases and BatchNorm parameters)", minimum=0
    )
    weight_decay_form: str = option(
        "coupled",
        "coupled: added to the gradient (torch SGD/Adam); decoupled: weights scaled by "
        "1 - lr x decay apart from the gradient step (SGDW/AdamW, fastai's true_wd)",
        choices=WEIGHT_DECAY_FORMS,
    )
    lr_schedule: str = option(
        "constant",
        "learning-rate schedule: constant, exponential (Meta-Dataset's staircase decay) or "
        "cosine-cycles (Dhillon et al.'s two cosine cycles)",
        choices=LR_SCHEDULES,
    )
    decay_every: int = option(5000, "exponential schedule: steps between decays", minimum=1)
    decay_rate: float = option(0.5, "exponential schedule: factor per decay", above=0)
    cosine_cycles: int = option(2, "cosine-cycles schedule: number of cycles", minimum=1)
    cycle_multiplier: float = option(
        2.0, "cosine-cycles schedule: each cycle this many times longer", above=0
    )
    cycle_lr_factor: float = option(
        0.1, "cosine-cycles schedule: peak rate factor per cycle", above=0
    )
    # learners.train --cosine-cycle-epochs (a list: its flag is learners.train's own) and the
    # steps of an epoch of a run given in --epochs (learners.training.run_length); 0: in steps
    cosine_cycle_epochs: list[int] = option(
        [], "cosine-cycles schedule: each cycle's length in epochs", cli=False
    )
    steps_per_epoch: int = option(0, "training steps of an epoch (--epochs)", cli=False)
    batch_norm: str | None = option(
        None,
        "BatchNorm moments: running (averages at test), support (Meta-Dataset: the support "
        "set's, for support and query) or episode (each set its own); default: the method's",
        choices=BATCH_NORM_MODES,
    )
    input_scaling: str = option(
        "imagenet",
        "pixels to inputs: imagenet (mean/std) or meta-dataset (scaled to [-1, 1])",
        choices=INPUT_SCALINGS,
    )
    input_alignment: str = option(
        "none",
        "deeplab: ResNet-18 resizes its input to the next multiple of 32 plus one (126 -> 129), "
        "as Meta-Dataset's (functional_backbones._resnet); none: as given",
        choices=INPUT_ALIGNMENTS,
    )
    options: MethodConfig | None = option(None, "the method's own options", cli=False)

    def to_dict(self) -> dict[str, Any]:
        """Shared options at the top level, the method's under "options" (read back by
        `learners.methods.registry.learner_config_from_dict`, which knows each method's options)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        values["options"] = None if self.options is None else self.options.to_dict()
        return values

    def check(self) -> None:
        """The shared options within their bounds (ValueError naming the flag otherwise)."""
        check_fields(self)

    def schedule(self) -> ScheduleConfig:
        """The learning-rate schedule these options describe."""
        return ScheduleConfig(
            self.lr_schedule,
            self.decay_every,
            self.decay_rate,
            self.cosine_cycles,
            self.cycle_multiplier,
            self.cycle_lr_factor,
            tuple(self.cosine_cycle_epochs),
            self.steps_per_epoch,
        )

    def backbone_config(self, track_running_stats: bool = True) -> BackboneConfig:
        return BackboneConfig(
            name=self.backbone,
            image_size=self.image_size,
            width=self.width,
            dropblock=self.dropblock,
            track_running_stats=track_running_stats,
            input_alignment=self.input_alignment,
        )
