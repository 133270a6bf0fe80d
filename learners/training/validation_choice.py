"""What a training run validates on, and so which checkpoint becomes `best.pt`: few-shot
episodes of the valid split (the default), or held-out images of the training classes
(`--validation held-out --held-out-per-class N_OR_PERCENT`, multiclass methods; Dhillon et
al.'s `train_val` selection, few-shot-baseline pretrain.py@c3f5b69d:74-79).

config.json records the choice only for a held-out run (`extra.validation`,
`extra.held_out_per_class`), so runs of few-shot validation, older ones included, compare
unchanged on resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from learners.feed.class_holdout import FLAG as HOLD_OUT_FLAG
from learners.feed.class_holdout import HoldOut, HoldOutError

__all__ = [
    "checked_hold_out",
    "HOLD_OUT_KEY",
    "hold_out_record",
    "recorded_hold_out",
    "VALIDATION_KEY",
    "ValidationRequest",
    "VALIDATIONS",
]

FEW_SHOT, HELD_OUT = "few-shot", "held-out"
VALIDATIONS = (FEW_SHOT, HELD_OUT)
VALIDATION_KEY = "validation"  # config.json `extra` keys, written for a held-out run only
HOLD_OUT_KEY = "held_out_per_class"


@dataclass(frozen=True)
class ValidationRequest:
    """The validation flags of a run, and what they are checked against."""

    validation: str
    held_out_per_class: str | None
    validation_episodes: int
    method: str
    episodic: bool
    batch_norm: str | None
    synthetic: bool


def checked_hold_out(request: ValidationRequest) -> HoldOut | None:
    """The hold-out of `--validation held-out` (None for few-shot validation), checked: a
    multiclass method with BatchNorm's running averages, on converted data, with a count of
    images to hold out; HoldOutError in one line otherwise."""
    if request.validation != HELD_OUT:
        if request.held_out_per_class is not None:
            raise HoldOutError(
                f"{HOLD_OUT_FLAG} {request.held_out_per_class} without --validation held-out: "
                "the held-out images would be neither trained nor validated on"
            )
        return None
    if request.episodic:
        raise HoldOutError(
            f"--validation held-out applies to multiclass methods (a classifier over the "
            f"training classes); {request.method} validates on few-shot episodes"
        )
    if request.synthetic:
        raise HoldOutError(
            "--validation held-out on --synthetic data: the generated images cannot be held "
            "out; validate on few-shot episodes"
        )
    if request.batch_norm not in (None, "running"):  # multiclass methods default to running
        raise HoldOutError(
            f"--validation held-out with --batch-norm {request.batch_norm}: each batch of "
            "held-out images would be normalised by its own moments, so the accuracy would "
            "depend on how they are batched; use --batch-norm running or few-shot validation"
        )
    if request.held_out_per_class is None:
        raise HoldOutError(
            f"--validation held-out needs {HOLD_OUT_FLAG} N_OR_PERCENT (the images of each "
            "training class to hold out, e.g. 10%)"
        )
    if request.validation_episodes == 0:
        raise HoldOutError(
            "--validation held-out with --validation-episodes 0 (no validation): leave "
            "--validation-episodes out"
        )
    return HoldOut.parse(request.held_out_per_class)


def hold_out_record(hold_out: HoldOut) -> dict[str, Any]:
    """What config.json's `extra` records of a held-out run."""
    return {VALIDATION_KEY: HELD_OUT, HOLD_OUT_KEY: hold_out.text()}


def recorded_hold_out(extra: dict[str, Any]) -> HoldOut | None:
    """The images a run holds out, from its config.json `extra` (None: few-shot validation)."""
    text = extra.get(HOLD_OUT_KEY)
    return None if text is None else HoldOut.parse(text)
