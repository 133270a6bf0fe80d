"""What a learner is built from: the options every method shares, and the method's own options.

`LearnerConfig` holds the method name, the shared options (backbone, image size, width,
optimiser, learning rate, ...) and `options`, an instance of the method's own dataclass
(`MamlConfig`, `MulticlassConfig`, ... declared beside each method in `learners/methods/`).
`learners.registry.resolved_config` fills `options` with the method's defaults when it is None.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from episodes.images.image_size_limit import MAX_IMAGE_SIDE
from learners.backbones import BACKBONES, BackboneConfig
from learners.config_fields import MethodConfig, check_fields, option

OPTIMIZERS = ("adam", "sgd")


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
    options: MethodConfig | None = option(None, "the method's own options", cli=False)

    def to_dict(self) -> dict[str, Any]:
        """Shared options at the top level, the method's under "options" (read back by
        `learners.registry.learner_config_from_dict`, which knows each method's options)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        values["options"] = None if self.options is None else self.options.to_dict()
        return values

    def check(self) -> None:
        """The shared options within their bounds (ValueError naming the flag otherwise)."""
        check_fields(self)

    def backbone_config(self, track_running_stats: bool = True) -> BackboneConfig:
        return BackboneConfig(
            name=self.backbone,
            image_size=self.image_size,
            width=self.width,
            dropblock=self.dropblock,
            track_running_stats=track_running_stats,
        )
