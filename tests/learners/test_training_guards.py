"""Training that goes nowhere is said once, and schedules that cannot run are refused (issue 30
item 5): a loss at chance level after the warm-up or grown 1000x gets one warning line naming
the step and --lr (training goes on); zero-length cosine cycles, options the chosen schedule
ignores and --batch-size for an episodic method are refused in one line before any work."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from learners import LearnerConfigError
from learners import train as train_cli
from learners.methods.registry import build_learner, learner_config
from learners.optim.lr_schedule import (
    ScheduleConfig,
    check_cycle_lengths,
    check_schedule_options,
    cycle_lengths,
)
from learners.training.distributed import SINGLE_PROCESS
from learners.training.loss_watch import (
    AT_CHANCE_STEPS,
    GROWTH,
    WARMUP_STEPS,
    LossWatch,
    chance_loss,
)
from tests.fixtures.cli_processes import TINY

EPISODIC = ["--method", "protonet", "--synthetic", "--ways", "5", "--shots", "1", "--query", "2"]
EPISODIC += [*TINY, "--validation-episodes", "0"]


def _observe(watch: LossWatch, losses, chance):
    lines = [watch.observe(step, loss, chance) for step, loss in enumerate(losses, 1)]
    return [(step, line) for step, line in enumerate(lines, 1) if line is not None]


def test_a_loss_at_chance_after_the_warm_up_warns_once_naming_step_and_lr() -> None:
    chance = math.log(5)
    warned = _observe(LossWatch(lr=1e9), [2.3] + [chance] * 40, chance)
    assert len(warned) == 1
    step, line = warned[0]
    assert step == max(WARMUP_STEPS + 1, 1 + AT_CHANCE_STEPS)  # at chance from step 2
    assert line.startswith(f"warning: step {step}: ") and "--lr 1e+09" in line
    assert "chance level" in line and "training goes on" in line


def test_the_first_steps_at_chance_and_a_learning_run_do_not_warn() -> None:
    chance = math.log(5)
    # an untrained network starts at chance; a few steps there are no fault
    assert _observe(LossWatch(lr=1e-3), [chance] * WARMUP_STEPS + [1.2, 0.9, 0.7], chance) == []
    # a noisy loss near chance is not a network that stopped learning
    noisy = [chance + (0.05 if i % 2 else -0.05) for i in range(40)]
    assert _observe(LossWatch(lr=1e-3), noisy, chance) == []
    # a method without a cross-entropy loss has no chance level
    assert _observe(LossWatch(lr=1e-3), [chance] * 40, None) == []


def test_a_loss_grown_a_thousandfold_warns_once() -> None:
    losses = [1.7, 1.6, 1.5, 1.7 * GROWTH * 0.99, 1.7 * GROWTH * 1.01, 1e9, 1e12]
    warned = _observe(LossWatch(lr=1e4), losses, math.log(5))
    assert [step for step, _ in warned] == [5]
    assert "--lr 10000" in warned[0][1] and "1000 times its early value 1.7" in warned[0][1]
    # a resumed run's small first loss is measured against chance level, not itself
    assert _observe(LossWatch(lr=1e-3, start_step=100), [1e-4, 0.5, 0.9], math.log(5)) == []


def test_chance_is_ln_ways_of_an_episode_and_ln_classes_of_a_batch() -> None:
    import numpy as np

    protonet = build_learner(learner_config("protonet", backbone="cnn4", width=0.25))
    episode = {"support_labels": np.array([0, 1, 2, 2, 1]), "query_labels": np.array([0])}
    assert chance_loss(protonet, episode) == pytest.approx(math.log(3))
    assert chance_loss(protonet, [episode, {"support_labels": np.arange(5)}]) == pytest.approx(
        (math.log(3) + math.log(5)) / 2
    )
    multiclass = learner_config("multiclass", backbone="cnn4", width=0.25)
    multiclass.options.train_class_ids = list(range(7))
    learner = build_learner(multiclass)
    assert chance_loss(learner, (np.zeros((2, 28, 28, 3)), np.array([0, 1]))) == pytest.approx(
        math.log(7)
    )
    relation = build_learner(learner_config("relation", backbone="cnn4", width=0.25))
    assert chance_loss(relation, episode) is None


@pytest.mark.parametrize("lr, kind", [("1e9", "chance level"), ("1e4", "times its early value")])
def test_training_that_goes_nowhere_prints_one_warning_and_goes_on(tmp_path, capsys, lr, kind):
    out = tmp_path / "run"
    argv = [*EPISODIC, "--steps", "20", "--lr", lr, "--output", str(out)]
    assert train_cli.main(argv) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and kind in warnings[0], captured.err
    assert f"--lr {float(lr):g}" in warnings[0]
    step = int(warnings[0].split()[2].rstrip(":"))
    with (out / "train_log.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 20  # training went on to the end
    assert 1 < step <= 20


def test_a_learning_run_prints_no_warning(tmp_path, capsys) -> None:
    argv = [*EPISODIC, "--steps", "12", "--output", str(tmp_path / "run")]
    assert train_cli.main(argv) == 0
    assert "warning:" not in capsys.readouterr().err


def test_cycle_lengths_of_zero_steps_are_refused() -> None:
    assert 0 in cycle_lengths(12, 50, 2.0)
    with pytest.raises(LearnerConfigError, match=r"^--cosine-cycles 50 .* over 12 steps: 46 "):
        check_cycle_lengths(ScheduleConfig("cosine-cycles", cycles=50), 12)
    with pytest.raises(LearnerConfigError, match="--cycle-multiplier 1000"):
        check_cycle_lengths(ScheduleConfig("cosine-cycles", cycle_multiplier=1000.0), 100)
    check_cycle_lengths(ScheduleConfig("cosine-cycles", cycles=2), 12)  # 4 and 8 steps
    check_cycle_lengths(ScheduleConfig("constant", cycles=50), 12)  # cycles unused


def test_options_the_schedule_ignores_are_refused_naming_their_schedule() -> None:
    with pytest.raises(LearnerConfigError) as info:
        check_schedule_options("cosine-cycles", ["decay_every", "lr"])
    assert str(info.value) == (
        "--decay-every (an option of --lr-schedule exponential): not an option of "
        "--lr-schedule cosine-cycles"
    )
    check_schedule_options("exponential", ["decay_every", "decay_rate", "lr"])
    with pytest.raises(LearnerConfigError, match="not options of --lr-schedule constant"):
        learner_config("protonet", decay_rate=0.5, cycle_lr_factor=0.2)


@pytest.mark.parametrize(
    "flags, expected",
    [
        (
            ["--lr-schedule", "cosine-cycles", "--cosine-cycles", "50"],
            "error: --cosine-cycles 50 --cycle-multiplier 2 over 12 steps: 46 of the cycles "
            "would last 0 steps; give fewer cycles, a smaller multiplier or more steps\n",
        ),
        (
            ["--lr-schedule", "cosine-cycles", "--decay-every", "3"],
            "error: --decay-every (an option of --lr-schedule exponential): not an option of "
            "--lr-schedule cosine-cycles\n",
        ),
        (
            ["--batch-size", "8"],
            "error: --batch-size 8 (an option of the multiclass methods): not an option of "
            "--method protonet, which trains on episodes (--ways, --shots)\n",
        ),
    ],
)
def test_train_refuses_them_in_one_line_before_any_work(tmp_path, capsys, flags, expected):
    out = tmp_path / "run"
    assert train_cli.main([*EPISODIC, "--steps", "12", *flags, "--output", str(out)]) == 2
    assert capsys.readouterr().err == expected
    assert not out.exists()


def test_a_recipe_s_schedule_options_give_way_to_another_schedule(tmp_path: Path) -> None:
    """`--lr-schedule constant` over an exponential recipe leaves the recipe's decay options
    out; the same options given on the command line are refused."""
    base = ["--recipe", "meta_dataset/protonet", "--synthetic", "--validation-dataset", "all"]
    base += ["--output", str(tmp_path / "r")]
    _, config = train_cli._parsed_args([*base, "--lr-schedule", "constant"], SINGLE_PROCESS)
    assert config.learner.lr_schedule == "constant"
    _, config = train_cli._parsed_args(base, SINGLE_PROCESS)  # the recipe as written
    assert config.learner.lr_schedule == "exponential"
    with pytest.raises(LearnerConfigError, match="^--decay-every .*--lr-schedule constant$"):
        train_cli._parsed_args(
            [*base, "--lr-schedule", "constant", "--decay-every", "9"], SINGLE_PROCESS
        )


def test_multiclass_methods_keep_their_batch_size(tmp_path: Path) -> None:
    base = ["--method", "multiclass", "--synthetic", *TINY, "--steps", "2"]
    _, config = train_cli._parsed_args([*base, "--output", str(tmp_path / "a")], SINGLE_PROCESS)
    assert config.batch_size == train_cli.BATCH_SIZE == 64
    argv = [*base, "--batch-size", "8", "--output", str(tmp_path / "b")]
    assert train_cli._parsed_args(argv, SINGLE_PROCESS)[1].batch_size == 8
