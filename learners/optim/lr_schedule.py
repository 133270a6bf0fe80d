"""Learning-rate schedules of the papers' training recipes, as pure functions of the step.

- `constant`: the base rate throughout.
- `exponential`: Meta-Dataset's staircase decay, lr * decay_rate ** floor(t / decay_every) with
  t the number of updates already made (`tf.train.exponential_decay(..., staircase=True)` on the
  global step, meta_dataset/trainer.py; `decay_every`, `decay_rate` in each gin/best/*.gin).
- `cosine-cycles`: Dhillon et al.'s pre-training (few-shot-baseline pretrain.py: two cycles,
  each `cycle_multiplier` times longer than the one before, the peak rate multiplied by 0.1 per
  cycle, each annealed from its peak to 0 by fastai's annealing_cos,
  end + (start - end) / 2 * (1 + cos(pi * pct))). The cycles may be given in epochs
  (`cycle_epochs`, e.g. 40 and 80: utils.py `cycle_length` 40 times `cycle_multiplier ** c`):
  each is then `epochs x steps_per_epoch` steps long, or, for a run whose length is given in
  steps (no `steps_per_epoch`), the share of the horizon its epochs are of all cycles' epochs.

The cosine schedule needs its length (the run's total steps when training started); it is kept
in the optimiser's parameter groups (`schedule_horizon`), so it is saved in every checkpoint
and a resumed run, even one continued with a larger --steps, follows the same curve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from learners import LearnerConfigError

__all__ = [
    "apply_schedule",
    "BASE_LR_KEY",
    "check_cycle_lengths",
    "check_schedule_options",
    "cosine_cycles_lr",
    "cycle_lengths",
    "epoch_cycle_lengths",
    "exponential_lr",
    "HORIZON_KEY",
    "LR_SCHEDULES",
    "schedule_cycle_lengths",
    "SCHEDULE_OPTIONS",
    "ScheduleConfig",
    "scheduled_lr",
]

LR_SCHEDULES = ("constant", "exponential", "cosine-cycles")
# The options each schedule reads (LearnerConfig fields): one given with another schedule would
# be ignored, so it is refused, as an option of another method is.
SCHEDULE_OPTIONS: dict[str, tuple[str, ...]] = {
    "constant": (),
    "exponential": ("decay_every", "decay_rate"),
    "cosine-cycles": ("cosine_cycles", "cycle_multiplier", "cycle_lr_factor"),
}
HORIZON_KEY = "schedule_horizon"
BASE_LR_KEY = "schedule_base_lr"


@dataclass(frozen=True)
class ScheduleConfig:
    """The schedule's name and its constants (the LearnerConfig fields of the same names)."""

    name: str = "constant"
    decay_every: int = 5000
    decay_rate: float = 0.5
    cycles: int = 2
    cycle_multiplier: float = 2.0
    cycle_lr_factor: float = 0.1
    cycle_epochs: tuple[int, ...] = ()  # the cycles' lengths in epochs (replace the two above)
    steps_per_epoch: int = 0  # 0: the run's length is in steps (cycle epochs are shares)

    def __post_init__(self) -> None:
        if self.name not in LR_SCHEDULES:
            raise LearnerConfigError(
                f"--lr-schedule {self.name}: expected one of {', '.join(LR_SCHEDULES)}"
            )


def check_schedule_options(schedule: str, given: Iterable[str]) -> None:
    """Refuse (one line naming the flags and their schedule) options of a schedule other than
    `schedule` among the option names `given`: `--decay-every` under cosine cycles."""
    parts = [
        f"--{name.replace('_', '-')} (an option of --lr-schedule {owner})"
        for name in given
        for owner, names in SCHEDULE_OPTIONS.items()
        if name in names and owner != schedule
    ]
    if parts:
        raise LearnerConfigError(
            f"{' and '.join(parts)}: not {'an option' if len(parts) == 1 else 'options'} of "
            f"--lr-schedule {schedule}"
        )


def check_cycle_lengths(config: ScheduleConfig, total_steps: int) -> None:
    """Refuse cosine cycles of 0 steps over a run of `total_steps` (more cycles than steps, or
    a multiplier that leaves a cycle no step): they would train at the last cycle's rate,
    factor ** (cycles - 1) times the peak, from the start."""
    if config.name != "cosine-cycles":
        return
    lengths = cycle_lengths(total_steps, config.cycles, config.cycle_multiplier)
    empty = sum(1 for length in lengths if length == 0)
    if empty:
        raise LearnerConfigError(
            f"--cosine-cycles {config.cycles} --cycle-multiplier {config.cycle_multiplier:g} "
            f"over {total_steps} steps: {empty} of the cycles would last 0 steps; give fewer "
            "cycles, a smaller multiplier or more steps"
        )


def exponential_lr(base: float, updates_done: int, decay_every: int, decay_rate: float) -> float:
    """Staircase decay: base * decay_rate ** floor(updates_done / decay_every)."""
    return base * decay_rate ** (updates_done // decay_every)


def cycle_lengths(horizon: int, cycles: int, multiplier: float) -> list[int]:
    """Steps of each cosine cycle: proportional to multiplier ** c, summing to `horizon`."""
    weights = [multiplier**c for c in range(cycles)]
    bounds = [round(horizon * sum(weights[: c + 1]) / sum(weights)) for c in range(cycles)]
    return [b - a for a, b in zip([0, *bounds[:-1]], bounds)]


def epoch_cycle_lengths(horizon: int, epochs: tuple[int, ...], steps_per_epoch: int) -> list[int]:
    """Steps of each cosine cycle given in epochs: epochs x steps_per_epoch, or (no
    steps_per_epoch: a run whose length is in steps) shares of `horizon` in the epochs'
    proportions, summing to `horizon`."""
    if steps_per_epoch > 0:
        return [e * steps_per_epoch for e in epochs]
    bounds = [round(horizon * sum(epochs[: c + 1]) / sum(epochs)) for c in range(len(epochs))]
    return [b - a for a, b in zip([0, *bounds[:-1]], bounds)]


def schedule_cycle_lengths(config: ScheduleConfig, horizon: int) -> list[int]:
    """Steps of each cosine cycle of `config` for a run of `horizon` steps."""
    if config.cycle_epochs:
        return epoch_cycle_lengths(horizon, config.cycle_epochs, config.steps_per_epoch)
    return cycle_lengths(horizon, config.cycles, config.cycle_multiplier)


def cosine_cycles_lr(
    base: float,
    updates_done: int,
    horizon: int,
    cycles: int,
    multiplier: float,
    factor: float,
    lengths: list[int] | None = None,
) -> float:
    """The rate of update number `updates_done` (0-based) in the cosine cycles: within cycle c
    of length L_c, at position i, base * factor**c / 2 * (1 + cos(pi * i / L_c)); 0 after the
    last cycle. `lengths` gives the cycles' steps (else `cycles` cycles in proportions
    1 : multiplier : ... over `horizon`)."""
    start = 0
    if lengths is None:
        lengths = cycle_lengths(horizon, cycles, multiplier)
    for cycle, length in enumerate(lengths):
        if updates_done < start + length:
            pct = (updates_done - start) / length
            return base * factor**cycle / 2 * (1 + math.cos(math.pi * pct))
        start += length
    return 0.0


def scheduled_lr(config: ScheduleConfig, base: float, updates_done: int, horizon: int) -> float:
    """The learning rate of the update after `updates_done` updates."""
    if config.name == "exponential":
        return exponential_lr(base, updates_done, config.decay_every, config.decay_rate)
    if config.name == "cosine-cycles":
        return cosine_cycles_lr(
            base,
            updates_done,
            horizon,
            config.cycles,
            config.cycle_multiplier,
            config.cycle_lr_factor,
            schedule_cycle_lengths(config, horizon),
        )
    return base


def apply_schedule(
    optimizer: torch.optim.Optimizer, config: ScheduleConfig, step: int, total_steps: int
) -> float:
    """Set every parameter group's rate for training step `step` (1-based) and return it. The
    base rate and the horizon are fixed at the first call and stored in the groups (saved with
    the optimiser's state_dict, restored on resume)."""
    rate = 0.0
    for group in optimizer.param_groups:
        group.setdefault(BASE_LR_KEY, group["lr"])
        group.setdefault(HORIZON_KEY, total_steps)
        rate = scheduled_lr(config, group[BASE_LR_KEY], step - 1, group[HORIZON_KEY])
        group["lr"] = rate
    return rate
