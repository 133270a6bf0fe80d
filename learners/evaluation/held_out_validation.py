"""Validation on held-out images of the training classes (`learners.train --validation
held-out`): the accuracy of a multiclass run's classifier on the images its batches never
draw (`learners.feed.class_holdout`), as Dhillon et al. select the pre-training epoch
(few-shot-baseline pretrain.py@c3f5b69d:74-79: SaveModelCallback on the validation accuracy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from learners.evaluation.metrics import AccuracySummary, summarize_accuracies
from learners.methods.learner import Learner

__all__ = ["held_out_accuracy", "held_out_hook"]


def held_out_accuracy(
    learner: Learner, batches: Iterable[tuple[Any, np.ndarray]]
) -> AccuracySummary:
    """Share of the held-out images whose predicted training class is their own (mean, std,
    95% CI over the images, n the images)."""
    predict = getattr(learner, "predicted_class_ids", None)
    if predict is None:
        raise ValueError(
            f"--validation held-out: {learner.config.method} has no classifier over the "
            "training classes (a multiclass method's); validate it on few-shot episodes"
        )
    correct: list[np.ndarray] = []
    for images, class_ids in batches:
        correct.append(predict(images) == np.asarray(class_ids))
    if not correct:
        raise ValueError("--validation held-out: no held-out images to validate on")
    return summarize_accuracies(np.concatenate(correct).astype(np.float64))


def held_out_hook(
    batches: Callable[[], Iterable[tuple[Any, np.ndarray]]],
) -> Callable[[Learner], AccuracySummary]:
    """A training-loop hook: the accuracy on the same held-out images each time."""

    def validate(learner: Learner) -> AccuracySummary:
        return held_out_accuracy(learner, batches())

    return validate
