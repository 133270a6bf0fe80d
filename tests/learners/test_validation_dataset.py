"""`learners.train --validation-dataset NAME_OR_FOLDER`: validate on one dataset's valid split
(Meta-Dataset validated on ILSVRC's only, gin/setups/all_datasets.gin: benchmark.eval_datasets =
'ilsvrc_2012'); the default keeps every --dataset's valid split."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from episodes.records.dataset_spec import Split
from learners.evaluation.episode_eval import validation_hook
from learners.feed.episode_source import (
    SYNTHETIC,
    EpisodeOptions,
    close_source,
    open_episode_source,
)
from learners.feed.validation_dataset import resolve_validation_dataset
from learners.train import main
from learners.training.checkpoint_file import load_checkpoint_learner
from learners.training.recipe_files import load_recipe, recipe_names
from tests.fixtures.reader_datasets import write_dataset

torch.set_num_threads(1)

SHAPE = ["--ways", "3", "--shots", "1", "--query", "2", "--image-size", "28"]
TINY = ["--method", "protonet", "--backbone", "cnn4", "--width", "0.25", *SHAPE]
TINY += ["--steps", "2", "--checkpoint-every", "2", "--no-progress", "--device", "cpu"]


@pytest.fixture
def two_datasets(tmp_path):
    """toy_a, whose valid split has 2 classes (too few for 3-way episodes), and toy_b."""
    a, b = tmp_path / "a", tmp_path / "b"
    splits = {Split.TRAIN: [0, 1, 2, 3, 4], Split.VALID: [5, 6], Split.TEST: [7]}
    write_dataset(a, "toy_a", per_class=(12,) * 8, splits=splits)
    write_dataset(b, "toy_b")
    return a, b


def test_choices_resolve_to_one_folder_or_every_dataset(two_datasets, tmp_path) -> None:
    a, b = two_datasets
    both = f"{a},{b}"
    assert resolve_validation_dataset(None, both, SYNTHETIC) is None
    assert resolve_validation_dataset("all", both, SYNTHETIC) is None
    assert resolve_validation_dataset("toy_b", both, SYNTHETIC) == str(b)  # the spec's name
    assert resolve_validation_dataset("a", both, SYNTHETIC) == str(a)  # the folder's name
    other = tmp_path / "c"
    write_dataset(other, "toy_c")
    assert resolve_validation_dataset(str(other), both, SYNTHETIC) == str(other)
    with pytest.raises(ValueError) as refused:
        resolve_validation_dataset("ilsvrc_2012", both, SYNTHETIC)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("--validation-dataset ilsvrc_2012:")
    assert f"toy_a ({a})" in message and f"toy_b ({b})" in message and "all" in message
    with pytest.raises(ValueError, match="synthetic data has one valid split"):
        resolve_validation_dataset("toy_b", SYNTHETIC, SYNTHETIC)


def test_training_validates_on_the_named_dataset_only(two_datasets, tmp_path, capsys) -> None:
    a, b = two_datasets
    run = tmp_path / "run"
    argv = [*TINY, "--dataset", str(a), "--dataset", str(b), "--output", str(run)]
    argv += ["--validation-episodes", "3"]
    # Every valid split (the default) includes toy_a's, which cannot give 3-way episodes.
    assert main(argv) != 0
    error = capsys.readouterr().err
    assert "split valid of 'toy_a'" in error and not run.joinpath("config.json").exists()
    assert main([*argv, "--validation-dataset", "toy_b"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["extra"]["validation_dataset"] == str(b)
    with open(run / "validation.csv") as f:
        (row,) = list(csv.DictReader(f))
    # The recorded validation is toy_b's valid split: the same number from the saved weights.
    learner, _, step = load_checkpoint_learner(run / "checkpoints" / "last.pt")
    assert step == int(row["step"]) == 2
    options = EpisodeOptions(ways=3, shots=1, query=2, image_size=28)
    valid = open_episode_source(str(b), "valid", None, options, seed=0)
    try:
        summary = validation_hook(lambda: valid.episodes(0), 3)(learner)
    finally:
        close_source(valid)
    assert summary.n == int(row["n"]) == 3
    assert summary.mean == pytest.approx(float(row["accuracy"]), abs=1e-9)


def test_meta_dataset_recipes_validate_on_ilsvrc_only(tmp_path, capsys) -> None:
    names = [n for n in recipe_names() if n.startswith("meta_dataset/")]
    assert names and all(
        load_recipe(n).values["validation_dataset"] == "ilsvrc_2012" for n in names
    )
    assert all(
        "validation_dataset" not in load_recipe(n).values
        for n in recipe_names()
        if not n.startswith("meta_dataset/")
    )
    # Refused before any work when no --dataset is ILSVRC, naming what to pass instead.
    argv = ["--recipe", "meta_dataset/protonet", "--synthetic", "--output", str(tmp_path / "r")]
    assert main([*argv, *TINY, "--validation-episodes", "2"]) != 0
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--validation-dataset ilsvrc_2012" in error
    assert "--validation-dataset all" in error and not (tmp_path / "r").exists()
