"""How long a training run is: `--steps` steps, or (multiclass) `--epochs` passes over the
training images, with the cosine cycles' lengths in epochs (`--cosine-cycle-epochs 40 80`).

An epoch is floor(training images / images per step) steps, at least one: the images of the
training classes a run trains on (held-out ones excluded) over `--batch-size` x the global
meta-batch, as fastai counts an epoch in batches with the last partial one dropped
(few-shot-baseline pretrain.py@c3f5b69d:49 `num_samples = len(data.train_dl) // num_gpus`,
the per-GPU batch being 256 // num_gpus). Dhillon et al. train two cosine cycles of 40 and 80
epochs (utils.py@c3f5b69d:61 `cycle_length` 40, pretrain.py:50-59: cycle c lasts
40 x 2 ** c epochs, 120 in all). Batches are still drawn uniformly with replacement
(`learners.feed.episode_source.ReaderBatchSource`): an epoch is a length, not a permutation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from episodes.util.cli_errors import UserError

__all__ = [
    "check_length_flags",
    "check_length_source",
    "cycles_note",
    "DEFAULT_CHECKPOINT_EVERY",
    "resolve_run_length",
    "RUN_LENGTH_KEY",
    "RunLength",
    "RunLengthError",
    "steps_per_epoch",
]

DEFAULT_CHECKPOINT_EVERY = 1000  # steps between snapshots of a run given in --steps
RUN_LENGTH_KEY = "run_length"  # config.json `extra` key, written for a run in epochs only


class RunLengthError(UserError, ValueError):
    """A run length that cannot be (two lengths, none, or epochs the data cannot count)."""


@dataclass(frozen=True)
class RunLength:
    """The resolved length: total steps, and for a run in epochs the epoch's steps."""

    total_steps: int
    checkpoint_every: int
    epochs: int | None = None
    steps_per_epoch: int = 0  # 0: the run's length is in steps
    trained_images: int | None = None
    cycle_steps: tuple[int, ...] = ()  # the cosine cycles in steps, for a run in epochs

    def record(self) -> dict[str, object]:
        """What config.json's `extra` records of a run in epochs (None: a run in steps)."""
        return {
            "trained_images": self.trained_images,
            "steps_per_epoch": self.steps_per_epoch,
            "cosine_cycle_steps": list(self.cycle_steps),
        }


def steps_per_epoch(images: int, images_per_step: int) -> int:
    """Steps of one pass over `images`: whole steps of `images_per_step`, at least one."""
    return max(1, images // images_per_step)


def check_length_flags(
    episodes: int | None, epochs: int | None, cycle_epochs: Sequence[int] | None, lr_schedule: str
) -> None:
    """One length, at least one epoch, cycles of at least one epoch on the cosine schedule;
    RunLengthError in one line otherwise."""
    if episodes is not None and epochs is not None:
        raise RunLengthError(
            f"--epochs {epochs} and --steps {episodes}: a run has one length; give one of them"
        )
    if episodes is None and epochs is None:
        raise RunLengthError("the run's length is missing: give --steps N or --epochs N")
    if epochs is not None and epochs < 1:
        raise RunLengthError(f"--epochs {epochs}: expected >= 1")
    if cycle_epochs:
        shown = " ".join(str(e) for e in cycle_epochs)
        if min(cycle_epochs) < 1:
            raise RunLengthError(f"--cosine-cycle-epochs {shown}: each cycle needs >= 1 epoch")
        if lr_schedule != "cosine-cycles":
            raise RunLengthError(
                f"--cosine-cycle-epochs {shown} applies to --lr-schedule cosine-cycles, not "
                f"{lr_schedule}"
            )


def check_length_source(epochs: int | None, method: str, episodic: bool, synthetic: bool) -> None:
    """Epochs are passes over a converted dataset's training images, for multiclass methods."""
    if epochs is not None and episodic:
        raise RunLengthError(
            f"--epochs applies to multiclass methods (passes over the training images); "
            f"{method} trains on episodes: give --steps"
        )
    if epochs is not None and synthetic:
        raise RunLengthError(
            "--epochs on --synthetic data: the generated images have no fixed number to pass "
            "over; give --steps"
        )


def resolve_run_length(
    episodes: int | None,
    epochs: int | None,
    checkpoint_every: int | None,
    cycle_epochs: Sequence[int],
    trained_images: int | None,
    images_per_step: int,
) -> RunLength:
    """The run's steps: `episodes`, or `epochs` x the steps of an epoch of `trained_images`;
    snapshots every `checkpoint_every` steps (default: every epoch, else every 1,000 steps)."""
    if epochs is None:
        assert episodes is not None
        every = DEFAULT_CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
        return RunLength(episodes, every)
    assert trained_images is not None
    per_epoch = steps_per_epoch(trained_images, images_per_step)
    return RunLength(
        total_steps=epochs * per_epoch,
        checkpoint_every=per_epoch if checkpoint_every is None else checkpoint_every,
        epochs=epochs,
        steps_per_epoch=per_epoch,
        trained_images=trained_images,
        cycle_steps=tuple(e * per_epoch for e in cycle_epochs),
    )


def cycles_note(epochs: int | None, cycle_epochs: Sequence[int]) -> str | None:
    """A note when the cosine cycles do not end with the run (the rate is 0 after the last
    cycle; a run shorter than the cycles stops inside one)."""
    if epochs is None or not cycle_epochs or sum(cycle_epochs) == epochs:
        return None
    shown = " + ".join(str(e) for e in cycle_epochs)
    if sum(cycle_epochs) > epochs:
        return f"note: the cosine cycles ({shown} epochs) outlast the run's {epochs}: it stops inside one"
    return (
        f"note: the cosine cycles ({shown} epochs) end before the run's {epochs} epochs: the "
        "learning rate is 0 after them"
    )
