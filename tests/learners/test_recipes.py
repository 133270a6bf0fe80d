"""Recipes as data (learners/recipes/*/*.toml): each loads, names a source for every value, is
accepted by learners.train's flags and trains a few steps (tiny backbone, synthetic data); flags
given on the command line override a recipe and are recorded in the run's config.json."""

from __future__ import annotations

import json

import pytest

from learners.methods.registry import is_episodic
from learners.train import main
from learners.training.recipe_files import load_recipe, recipe_listing, recipe_names

TINY = ["--backbone", "cnn4", "--image-size", "28", "--width", "0.25", "--steps", "2"]
TINY += ["--validation-episodes", "0", "--no-progress", "--device", "cpu"]
TINY += ["--ways", "3", "--shots", "1", "--query", "2"]
SMALL_BATCH = ["--batch-size", "8"]  # multiclass recipes only: episodic methods refuse it


def test_the_shipped_recipes_are_listed_with_a_source_for_every_value(capsys) -> None:
    names = recipe_names()
    for expected in (
        "meta_dataset/protonet",
        "meta_dataset/matching",
        "meta_dataset/maml",
        "meta_dataset/proto_maml",
        "meta_dataset/finetune",
        "meta_dataset/knn",
        "meta_dataset/relation",
        "meta_dataset/pretrain_resnet18",
        "meta_dataset/pretrain_convnet",
        "meta_dataset/pretrain_wide_resnet",
        "meta_dataset/maml@4b909ad5",
        "dhillon/multiclass",
        "atg/multiclass",
    ):
        assert expected in names
    for name in names:
        recipe = load_recipe(name)
        assert set(recipe.sources) == set(recipe.values) and all(recipe.sources.values())
        assert recipe.description and recipe.reference
    assert main(["--list-recipes"]) == 0
    printed = capsys.readouterr().out
    assert all(f"{name}: " in printed for name in names)
    assert printed.strip() == recipe_listing().strip()


@pytest.mark.parametrize("name", recipe_names())
def test_each_recipe_trains_a_few_steps_and_is_recorded(name: str, tmp_path) -> None:
    run = tmp_path / "run"
    recipe = load_recipe(name)
    fewer = (
        ["--inner-steps", "1", "--eval-inner-steps", "1"] if "inner_steps" in recipe.values else []
    )
    batch = [] if is_episodic(recipe.values["method"]) else SMALL_BATCH
    # no image of the generated blobs can be held out
    few_shot = ["--validation", "few-shot"] if recipe.values.get("validation") == "held-out" else []
    argv = ["--recipe", name, "--synthetic", "--output", str(run), *TINY, *fewer, *few_shot, *batch]
    assert main(argv) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["extra"]["recipe"] == name
    learner = config["learner"]
    assert learner["method"] == recipe.values["method"]
    overrides = config["extra"]["recipe_overrides"]
    for key, value in recipe.values.items():
        if key in overrides:
            continue
        if key in learner:
            assert learner[key] == value, key
        elif key in (learner["options"] or {}):
            assert learner["options"][key] == value, key
    if fewer:
        assert overrides["inner_steps"] == {"recipe": recipe.values["inner_steps"], "given": 1}
    if "epochs" in recipe.values:  # TINY's --steps replaces the recipe's length
        assert overrides["epochs"] == {"recipe": recipe.values["epochs"], "given": None}
        assert config["epochs"] is None and config["total_steps"] == 2
    if "backbone" in recipe.values:
        assert overrides["backbone"] == {"recipe": recipe.values["backbone"], "given": "cnn4"}
    assert (run / "checkpoints" / "last.pt").is_file()


@pytest.mark.parametrize(
    "pretrain, learner",
    [
        ("meta_dataset/pretrain_convnet", "meta_dataset/relation"),
        ("meta_dataset/pretrain_resnet18", "meta_dataset/protonet"),
        ("meta_dataset/pretrain_wide_resnet", "meta_dataset/finetune"),
    ],
)
def test_a_learner_recipe_starts_from_its_pretraining_recipes_best_checkpoint(
    pretrain: str, learner: str, tmp_path
) -> None:
    """Meta-Dataset's learners start from the best-validation checkpoint of a pre-training run
    (the reference's model_27500 / 42500 / 46000): the pre-training recipe validates and keeps
    best.pt, which the learner's recipe takes with --init-from RUN, both on their own backbone."""
    small = ["--image-size", "28", "--width", "0.25", "--no-progress", "--device", "cpu"]
    small += ["--ways", "3", "--shots", "1", "--query", "2", "--validation-dataset", "all"]
    run = tmp_path / "pretrain"
    argv = ["--recipe", pretrain, "--synthetic", "--output", str(run), *small]
    argv += ["--steps", "4", "--checkpoint-every", "1", "--validation-episodes", "2"]
    assert main([*argv, "--batch-size", "8"]) == 0
    rows = (run / "validation.csv").read_text().splitlines()[1:]
    accuracy = {int(r.split(",")[0]): float(r.split(",")[1]) for r in rows}
    best_step = max(accuracy, key=lambda step: (accuracy[step], -step))
    best = run / "checkpoints" / "best.pt"
    started = tmp_path / "learner"
    argv = ["--recipe", learner, "--synthetic", "--output", str(started), *small]
    argv += ["--steps", "1", "--validation-episodes", "0", "--init-from", str(run)]
    assert main(argv) == 0  # the run folder: its best checkpoint, since it validated
    record = json.loads((started / "init_from.json").read_text())
    assert record["checkpoint"] == str(best.resolve()) and record["step"] == best_step
    assert json.loads((started / "config.json").read_text())["extra"]["init_from"] == str(run)


def test_a_flag_given_overrides_the_recipe(tmp_path) -> None:
    run = tmp_path / "run"
    argv = ["--recipe", "meta_dataset/protonet", "--synthetic", "--output", str(run), *TINY]
    assert main([*argv, "--batch-norm", "running", "--lr", "0.01"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["learner"]["batch_norm"] == "running" and config["learner"]["lr"] == 0.01
    assert config["learner"]["lr_schedule"] == "exponential"  # from the recipe
    assert config["extra"]["recipe_overrides"]["batch_norm"]["given"] == "running"


def test_another_backbone_drops_the_recipes_resnet18_alignment_and_says_so(
    tmp_path, capsys
) -> None:
    argv = ["--recipe", "meta_dataset/protonet", "--synthetic", *TINY]
    run = tmp_path / "run"
    assert main([*argv, "--output", str(run)]) == 0  # TINY gives --backbone cnn4
    err = capsys.readouterr().err
    assert (
        "note: --backbone cnn4 replaces the recipe's resnet18, and with it its "
        "--input-alignment deeplab (ResNet-18 only)" in err
    )
    config = json.loads((run / "config.json").read_text())
    assert config["learner"]["input_alignment"] == "none"
    overrides = config["extra"]["recipe_overrides"]
    assert overrides["input_alignment"] == {"recipe": "deeplab", "given": "none"}
    given = [*argv, "--input-alignment", "deeplab", "--output", str(tmp_path / "given")]
    assert main(given) == 2  # given with another backbone: refused, not dropped
    assert "--input-alignment deeplab applies to --backbone resnet18" in capsys.readouterr().err
    assert not (tmp_path / "given").exists()


def test_bad_recipes_are_refused_in_one_line(tmp_path, capsys) -> None:
    assert main(["--recipe", "meta_dataset/nothing", "--synthetic", "--output", str(tmp_path)])
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--recipe meta_dataset/nothing: no such recipe" in error
    broken = tmp_path / "broken.toml"
    broken.write_text('description = "x"\nreference = "y"\n[options.method]\nvalue = "protonet"\n')
    with pytest.raises(ValueError, match=r"\[options.method\] needs a value and its source"):
        load_recipe(str(broken))
    foreign = tmp_path / "foreign.toml"
    foreign.write_text(
        'description = "x"\nreference = "y"\n'
        '[options.method]\nvalue = "protonet"\nsource = "s"\n'
        '[options.no_such_flag]\nvalue = 1\nsource = "s"\n'
    )
    assert main(["--recipe", str(foreign), "--synthetic", "--output", str(tmp_path / "r")])
    assert "no flag --no-such-flag" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # refused before anything is written


def test_meta_datasets_finetune_evaluates_a_multiclass_run(tmp_path, capsys) -> None:
    from learners import evaluate

    run = tmp_path / "run"
    argv = ["--recipe", "atg/multiclass", "--synthetic", "--output", str(run), *TINY]
    assert main([*argv, *SMALL_BATCH]) == 0
    common = ["--run", str(run), "--episodes", "2", "--no-progress", "--no-hardness"]
    out = tmp_path / "md"
    argv = [*common, "--output", str(out), "--inference", "md_finetune"]
    assert evaluate.main([*argv, "--md-finetune-steps", "3"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inference"] == "md_finetune"
    assert summary["settings"]["options"] == {"md_finetune_steps": 3}
    capsys.readouterr()
    refused = [*common, "--output", str(tmp_path / "x"), "--md-finetune-steps", "3"]
    assert evaluate.main(refused) != 0
    error = capsys.readouterr().err.strip()
    assert "--md-finetune-steps apply to Meta-Dataset's Finetune" in error and "\n" not in error
    assert not (tmp_path / "x").exists()
