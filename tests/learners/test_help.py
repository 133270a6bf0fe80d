"""`learners.train --help` and `learners.evaluate --help` a person can scan (issue 31): the
general flags in named groups, each with a one-line purpose; the method options by method.
Grouping changes only what --help shows: the parsers take the same flags as before."""

from __future__ import annotations

import argparse

import pytest

from learners import evaluate, train
from learners.methods.config_fields import at_evaluation, cli_fields, flag_name
from learners.methods.learner_config import LearnerConfig
from learners.methods.registry import method_option_classes

SAMPLER = "episode sampler (Meta-Dataset's options)"
TRAIN_GROUPS = (
    "data and episodes",
    SAMPLER,
    "model",
    "optimisation and schedule",
    "output and checkpoints",
    "device and loading",
)
EVALUATE_GROUPS = (
    "data and episodes",
    SAMPLER,
    "model",
    "hardness",
    "output",
    "device and batching",
)
# What stays in the first block: the command's subject, and help.
TOP = {"learners.train": {"-h", "--method", "--recipe", "--list-recipes"}}
TOP["learners.evaluate"] = {"-h", "--run"}


def _groups(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    return {group.title: group for group in parser._action_groups if group._group_actions}


def _flags(group: argparse._ArgumentGroup) -> set[str]:
    return {a.option_strings[0] for a in group._group_actions}


@pytest.mark.parametrize(
    ("command", "general"),
    [(train, TRAIN_GROUPS), (evaluate, EVALUATE_GROUPS)],
    ids=["train", "evaluate"],
)
def test_the_general_flags_come_in_groups_with_a_purpose(command, general):
    parser = command.build_parser()
    groups = _groups(parser)
    name = parser.prog.removeprefix("python -m ")
    assert _flags(groups.pop("options")) == TOP[name]
    assert list(groups)[: len(general)] == list(general)
    for title in general:
        purpose = groups[title].description or ""
        assert purpose and "\n" not in purpose and len(purpose) <= 78, (title, purpose)
    method_groups = list(groups)[len(general) :]
    assert method_groups and all(
        t.startswith(("options of ", "inference of ", "change an option of a trained "))
        for t in method_groups
    )
    shown = [a for g in parser._action_groups for a in g._group_actions]
    assert sorted(map(id, shown)) == sorted(map(id, parser._actions))  # each flag shown once


def test_train_groups_the_shared_learner_options_into_model_and_optimisation():
    groups = _groups(train.build_parser())
    shared = {flag_name(f.name) for f in cli_fields(LearnerConfig)}
    model, optimisation = _flags(groups["model"]), _flags(groups["optimisation and schedule"])
    assert shared <= model | optimisation
    assert {"--backbone", "--width", "--batch-norm"} <= model
    assert {"--lr", "--lr-schedule", "--weight-decay"} <= optimisation


def test_train_shows_each_methods_inference_options_apart():
    groups = _groups(train.build_parser())
    for options in method_option_classes():
        inferred = {flag_name(f.name) for f in cli_fields(options) if at_evaluation(f)}
        trained = {flag_name(f.name) for f in cli_fields(options)} - inferred
        for title, group in groups.items():
            flags = _flags(group)
            if flags & inferred:
                assert title.startswith("inference of ") and not flags & trained
            if flags & trained:
                assert title.startswith("options of ") and not flags & inferred


def test_the_exclusive_data_flags_and_old_spellings_still_parse(capsys):
    parser = train.build_parser()
    args = parser.parse_args(["--method", "protonet", "--synthetic", "--steps", "1", "--out", "R"])
    assert (args.synthetic, args.output) == (True, "R")
    assert "note: --out is now --output" in capsys.readouterr().err
    for data in ([], ["--synthetic", "--dataset", "D"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["--method", "protonet", *data, "--steps", "1", "--output", "R"])
    assert "--dataset" in capsys.readouterr().err
    args = evaluate.build_parser().parse_args(["--run", "R", "--out", "O", "--dataset", "D"])
    assert (args.output, args.dataset) == ("O", ["D"])
