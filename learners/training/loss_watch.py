"""One warning when training goes nowhere: the loss at chance level after the warm-up, or grown
far above its early value (issue 30 item 5). Training goes on; the warning names the step and
--lr, the usual cause (`--lr 1e9` trains at chance from step 2, `--lr 1e4` reaches 1e7).

Chance level is the cross-entropy of a uniform prediction, ln(ways) for an episode and
ln(classes) for a multiclass batch: a network whose outputs no longer depend on its input sits
exactly there. Methods whose loss is not a cross-entropy (Relation Net's MSE) have none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from learners.feed.episode_batch import episode_field

__all__ = [
    "AT_CHANCE_STEPS",
    "chance_loss",
    "CHANCE_TOLERANCE",
    "GROWTH",
    "LossWatch",
    "WARMUP_STEPS",
]

WARMUP_STEPS = 5  # steps before a loss at chance level counts (the first ones start there)
AT_CHANCE_STEPS = 5  # consecutive steps at chance level that make the warning
CHANCE_TOLERANCE = 1e-3  # |loss - chance| <= this share of chance counts as at chance
GROWTH = 1000.0  # a loss this many times its early value


def chance_loss(learner: Any, item: Any) -> float | None:
    """ln(ways) of an episode, ln(classes) of a multiclass batch (the mean over a meta-batch's
    items); None where the method's loss is not a cross-entropy."""
    if not getattr(learner, "loss_is_cross_entropy", False):
        return None
    if isinstance(item, list):
        levels = [chance_loss(learner, one) for one in item]
        known = [level for level in levels if level is not None]
        return sum(known) / len(known) if known else None
    if isinstance(item, tuple):  # (images, class ids) of a multiclass batch
        classes = len(getattr(learner.options, "train_class_ids", None) or ())
        return math.log(classes) if classes > 1 else None
    ways = int(episode_field(item, "support_labels").max()) + 1
    return math.log(ways) if ways > 1 else None


@dataclass
class LossWatch:
    """Feeds on (step, loss, chance) and returns the one warning line, once, when the loss has
    sat at chance level for AT_CHANCE_STEPS steps after WARMUP_STEPS, or exceeds GROWTH times
    its early value: the session's first loss (before any update), or chance level where that
    is higher (a resumed run's small first loss would make ordinary noise look like growth)."""

    lr: float
    start_step: int = 0
    warned: bool = False
    early: float | None = None
    at_chance: int = 0

    def observe(self, step: int, loss: float, chance: float | None) -> str | None:
        if self.warned or not math.isfinite(loss):
            return None
        line = self._growth(step, loss, chance) or self._chance(step, loss, chance)
        if line is not None:
            self.warned = True
        return line

    def _growth(self, step: int, loss: float, chance: float | None) -> str | None:
        if self.early is None:
            self.early = max(loss, chance or 0.0)
            return None
        base = self.early
        if base <= 0 or loss <= GROWTH * base:
            return None
        return (
            f"warning: step {step}: the training loss {loss:.4g} is over {GROWTH:g} times its "
            f"early value {base:.4g}: training is diverging; --lr {self.lr:g} is likely too "
            "high (training goes on)"
        )

    def _chance(self, step: int, loss: float, chance: float | None) -> str | None:
        if chance is None or abs(loss - chance) > CHANCE_TOLERANCE * chance:
            self.at_chance = 0
            return None
        self.at_chance += 1
        if step - self.start_step <= WARMUP_STEPS or self.at_chance < AT_CHANCE_STEPS:
            return None
        return (
            f"warning: step {step}: the training loss {loss:.4f} has sat at chance level "
            f"(ln of the classes, {chance:.4f}) for {self.at_chance} steps: the network "
            f"learns nothing; --lr {self.lr:g} is likely too high (training goes on)"
        )
