"""Multiclass training length in epochs and validation on held-out images of the training
classes (issue 32 phase B; Dhillon et al.'s 120 epochs in two cosine cycles and `train_val`
selection, few-shot-baseline pretrain.py@c3f5b69d:49-59, 74-79).

Real runs on a small converted dataset whose every image encodes (class, record) in its colour:
an epoch's steps are counted from the trained images, the hold-out is disjoint from every
training batch and the same on every run with the same seed, best.pt is the epoch with the best
held-out accuracy (recomputed from the checkpoint), and bad combinations are refused in one
line before anything is written."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from episodes.records.dataset_spec import Split
from learners import train as train_cli
from learners.evaluation.held_out_validation import held_out_accuracy
from learners.feed.class_holdout import HoldOut, HoldOutError, held_out_records
from learners.feed.episode_source import EpisodeOptions, open_batch_source
from learners.optim.lr_schedule import ScheduleConfig, schedule_cycle_lengths, scheduled_lr
from learners.training.run_dir import load_run_learner
from tests.fixtures.reader_datasets import write_dataset

torch.set_num_threads(1)
CLASSES, PER_CLASS, HELD, BATCH = 6, 12, 2, 8
OPTIONS = EpisodeOptions(image_size=16)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data") / "toy"
    splits = {Split.TRAIN: list(range(CLASSES)), Split.VALID: [6, 7, 8], Split.TEST: []}
    write_dataset(folder, "toy", per_class=(PER_CLASS,) * 9, splits=splits)
    return folder


def _records(images: np.ndarray, class_ids: np.ndarray) -> set[tuple[int, int]]:
    """(class, record) of each image from its colour (tests.fixtures.reader_datasets.colour_of)."""
    found = set()
    for image, class_id in zip(images, class_ids):
        red, green = (int(v) for v in np.asarray(image)[0, 0, :2])
        assert (red - 5) // 8 == int(class_id)
        found.add((int(class_id), (green - 5) // 10))
    return found


def _args(dataset: Path, run: Path, *extra: str) -> list[str]:
    return [
        "--method", "multiclass", "--dataset", str(dataset), "--backbone", "cnn4",
        "--width", "0.25", "--image-size", "16", "--batch-size", str(BATCH), "--no-progress",
        "--device", "cpu", "--output", str(run), *extra,
    ]  # fmt: skip


def test_the_hold_out_is_seeded_stable_and_sized_per_class() -> None:
    count, share = HoldOut.parse("3"), HoldOut.parse("25%")
    first = held_out_records(count, 12, "toy", 4, seed=0)
    assert len(first) == 3 and list(first) == sorted(set(first.tolist()))
    assert np.array_equal(first, held_out_records(count, 12, "toy", 4, seed=0))
    others = [held_out_records(count, 12, "toy", c, seed=s) for c in range(5) for s in (0, 1)]
    assert len({tuple(o) for o in others}) > 1  # drawn per (seed, class), not one pattern
    assert len(held_out_records(share, 12, "toy", 4, seed=0)) == 3
    assert len(held_out_records(share, 2, "toy", 4, seed=0)) == 1  # at least one
    assert (count.text(), share.text()) == ("3", "25%")
    for bad in ("0", "-2", "100%", "0%", "x", "2.5"):
        with pytest.raises(HoldOutError, match="--held-out-per-class"):
            HoldOut.parse(bad)
    with pytest.raises(HoldOutError, match="class 4 of toy has 3 images"):
        held_out_records(count, 3, "toy", 4, seed=0)


def test_training_batches_never_draw_a_held_out_image(dataset: Path) -> None:
    hold_out = HoldOut(count=HELD)
    source = open_batch_source(str(dataset), None, BATCH, OPTIONS, 0, hold_out=hold_out)
    try:
        held = set()
        for images, ids in source.held_out_batches(5):
            assert len(images) <= 5
            held |= _records(images, ids)
        expected = {
            (c, int(r)) for c in range(CLASSES) for r in held_out_records(hold_out, 12, "toy", c, 0)
        }
        assert held == expected and len(held) == CLASSES * HELD
        trained = set()
        batches = source.items(range(60))
        for images, ids in batches:
            trained |= _records(images, ids)
        assert not trained & held
        assert len(trained) > 0.9 * CLASSES * (PER_CLASS - HELD)  # drawn over all the rest
    finally:
        source.close()
    plain = open_batch_source(str(dataset), None, BATCH, OPTIONS, 0)
    try:
        assert list(plain.held_out_batches(5)) == []
    finally:
        plain.close()


def test_an_epoch_is_the_trained_images_over_the_batch_and_best_pt_the_best_held_out_epoch(
    dataset: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    epochs = 3

    def argv(epochs: int) -> list[str]:
        return _args(
            dataset, run, "--epochs", str(epochs), "--validation", "held-out",
            "--held-out-per-class", str(HELD), "--lr", "0.01",
        )  # fmt: skip

    assert train_cli.main(argv(epochs)) == 0
    per_epoch = CLASSES * (PER_CLASS - HELD) // BATCH  # 60 images, batches of 8: 7 steps
    config = json.loads((run / "config.json").read_text())
    assert (config["epochs"], config["total_steps"]) == (epochs, epochs * per_epoch)
    assert config["checkpoint_every"] == per_epoch  # a snapshot and a validation per epoch
    assert config["extra"]["run_length"] == {
        "trained_images": CLASSES * (PER_CLASS - HELD),
        "steps_per_epoch": per_epoch,
        "cosine_cycle_steps": [],
    }
    assert config["extra"]["validation"] == "held-out"
    assert config["extra"]["held_out_per_class"] == str(HELD)
    with (run / "train_log.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == epochs * per_epoch
    with (run / "validation.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["step", "accuracy", "std", "ci95", "n"]
    steps = [int(r["step"]) for r in rows]
    assert steps == [per_epoch * (e + 1) for e in range(epochs)]
    assert all(int(r["n"]) == CLASSES * HELD for r in rows)
    accuracy = {int(r["step"]): float(r["accuracy"]) for r in rows}
    best_step = max(accuracy, key=lambda step: (accuracy[step], -step))  # first of the best
    checkpoints = run / "checkpoints"
    best = checkpoints / "best.pt"
    assert best.read_bytes() == (checkpoints / f"step_{best_step:08d}.pt").read_bytes()
    # the accuracy recorded is the held-out accuracy of that checkpoint's classifier
    learner, _, step = load_run_learner(run, "best", torch.device("cpu"))
    source = open_batch_source(str(dataset), None, BATCH, OPTIONS, 0, hold_out=HoldOut(HELD))
    try:
        summary = held_out_accuracy(learner, source.held_out_batches(BATCH))
    finally:
        source.close()
    assert step == best_step and math.isclose(summary.mean, accuracy[best_step])
    # a larger --epochs continues the same run, one more epoch
    assert train_cli.main(argv(epochs + 1)) == 0
    config = json.loads((run / "config.json").read_text())
    assert (config["epochs"], config["total_steps"]) == (epochs + 1, (epochs + 1) * per_epoch)
    assert len((run / "validation.csv").read_text().splitlines()) == 1 + epochs + 1
    capsys.readouterr()


def test_the_same_seed_holds_out_the_same_images_on_another_run(dataset: Path, tmp_path) -> None:
    """Two runs with one seed validate on the same images: their first validation (same
    weights, same batches) agrees to the bit; another seed holds out others."""
    argv = ["--steps", "2", "--validation", "held-out", "--held-out-per-class", "25%"]
    rows = []
    for name in ("a", "b"):
        assert train_cli.main(_args(dataset, tmp_path / name, *argv)) == 0
        rows.append((tmp_path / name / "validation.csv").read_text())
    assert rows[0] == rows[1]
    chosen = [
        {tuple(held_out_records(HoldOut(percent=25), 12, "toy", c, s)) for c in range(CLASSES)}
        for s in (0, 1)
    ]
    assert chosen[0] != chosen[1]


def test_cosine_cycles_in_epochs_are_epochs_times_the_epochs_steps(dataset, tmp_path) -> None:
    """Dhillon et al.'s cycles of 40 and 80 epochs: cycle c lasts its epochs x the steps of an
    epoch (120 epochs of 7 steps: 280 and 560 steps), the peak 0.1 ** c; given with --steps
    the cycles share the run's steps in the same proportions."""
    config = ScheduleConfig("cosine-cycles", cycle_epochs=(40, 80), steps_per_epoch=7)
    assert schedule_cycle_lengths(config, 840) == [280, 560]
    assert scheduled_lr(config, 0.1, 0, 840) == pytest.approx(0.1)
    assert scheduled_lr(config, 0.1, 280, 840) == pytest.approx(0.01)
    assert scheduled_lr(config, 0.1, 140, 840) == pytest.approx(0.05)
    shares = ScheduleConfig("cosine-cycles", cycle_epochs=(40, 80))
    assert schedule_cycle_lengths(shares, 30) == [10, 20]
    run = tmp_path / "run"
    argv = _args(dataset, run, "--epochs", "3", "--lr-schedule", "cosine-cycles")
    argv += ["--validation-episodes", "0"]
    assert train_cli.main([*argv, "--cosine-cycle-epochs", "1", "2"]) == 0
    config = json.loads((run / "config.json").read_text())
    per_epoch = CLASSES * PER_CLASS // BATCH  # no hold-out: 72 images, 9 steps
    assert config["extra"]["run_length"]["cosine_cycle_steps"] == [per_epoch, 2 * per_epoch]
    assert config["learner"]["cosine_cycle_epochs"] == [1, 2]
    assert config["learner"]["steps_per_epoch"] == per_epoch
    assert config["total_steps"] == 3 * per_epoch


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--epochs", "2", "--steps", "5"], "--epochs 2 and --steps 5: a run has one length"),
        ([], "the run's length is missing"),
        (["--epochs", "0"], "--epochs 0: expected >= 1"),
        (
            ["--epochs", "2", "--cosine-cycle-epochs", "1", "1"],
            "--cosine-cycle-epochs 1 1 applies to --lr-schedule cosine-cycles, not constant",
        ),
        (
            ["--steps", "2", "--held-out-per-class", "2"],
            "--held-out-per-class 2 without --validation held-out",
        ),
        (
            ["--steps", "2", "--validation", "held-out"],
            "--validation held-out needs --held-out-per-class",
        ),
        (
            ["--steps", "2", "--validation", "held-out", "--held-out-per-class", "12"],
            "class 0 of toy has 12 images",
        ),
    ],
)
def test_bad_lengths_and_hold_outs_are_refused_in_one_line(
    dataset: Path, tmp_path: Path, capsys, extra: list[str], expected: str
) -> None:
    run = tmp_path / "run"
    assert train_cli.main(_args(dataset, run, *extra)) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error and expected in error, error
    assert not run.exists()


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--method", "protonet", "--epochs", "2"], "--epochs applies to multiclass methods"),
        (["--synthetic", "--epochs", "2"], "--epochs on --synthetic data"),
        (
            ["--method", "protonet", "--steps", "2", "--validation", "held-out"],
            "--validation held-out applies to multiclass methods",
        ),
        (
            ["--steps", "2", "--validation", "held-out", "--batch-norm", "support"],
            "--validation held-out with --batch-norm support",
        ),
    ],
)
def test_epochs_and_held_out_are_multiclass_on_converted_data(
    dataset: Path, tmp_path: Path, capsys, extra: list[str], expected: str
) -> None:
    argv = _args(dataset, tmp_path / "run", *extra)
    if "--synthetic" in extra:  # in place of --dataset
        at = argv.index("--dataset")
        argv = argv[:at] + argv[at + 2 :]
    if "protonet" in extra:  # --batch-size is an option of the multiclass methods only
        at = argv.index("--batch-size")
        argv = argv[:at] + argv[at + 2 :]
    assert train_cli.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and expected in error, error
    assert not (tmp_path / "run").exists()


def test_dhillons_recipe_trains_an_epoch_held_out_on_converted_data(dataset, tmp_path, capsys):
    """The recipe's 120 epochs and its cycles of 40 and 80 epochs, cut to one epoch here: the
    cycles keep their length in epochs (one line says the run stops inside the first), the
    held-out images validate and best.pt is kept."""
    run = tmp_path / "run"
    argv = ["--recipe", "dhillon/multiclass", "--dataset", str(dataset), "--output", str(run)]
    argv += ["--backbone", "cnn4", "--width", "0.25", "--image-size", "16", "--batch-size"]
    argv += [str(BATCH), "--epochs", "1", "--held-out-per-class", str(HELD), "--no-progress"]
    assert train_cli.main([*argv, "--device", "cpu"]) == 0
    assert "note: the cosine cycles (40 + 80 epochs) outlast the run's 1" in capsys.readouterr().err
    per_epoch = CLASSES * (PER_CLASS - HELD) // BATCH
    config = json.loads((run / "config.json").read_text())
    assert config["total_steps"] == per_epoch
    assert config["extra"]["run_length"]["cosine_cycle_steps"] == [40 * per_epoch, 80 * per_epoch]
    assert config["extra"]["recipe_overrides"]["epochs"] == {"recipe": 120, "given": 1}
    assert config["extra"]["validation"] == "held-out"
    assert (run / "checkpoints" / "best.pt").is_file()
    assert [r.split(",")[0] for r in (run / "validation.csv").read_text().splitlines()[1:]] == [
        str(per_epoch)
    ]
