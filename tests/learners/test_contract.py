"""The contract every registered learner keeps (as scikit-learn's `parametrize_with_checks`):
one suite parametrised over the registry, so a new `@register_learner` is checked by adding it.

Config round-trips through JSON, fitting on a tiny synthetic stream is deterministic under a
seed, predictions are (queries, ways) logits whose argmax is a class id of the episode, a saved
and reloaded learner predicts the same, bad option values fail with a line naming the flag, and
every option is reachable from `learners.train`'s command line.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from learners import train as train_cli
from learners.feed.synthetic_episodes import (
    SyntheticBatchSource,
    SyntheticEpisodeConfig,
    SyntheticEpisodeSource,
)
from learners.methods.config_fields import cli_fields, flag_name
from learners.methods.learner_config import LearnerConfig
from learners.methods.registry import (
    build_learner,
    learner_config,
    learner_config_from_dict,
    method_entry,
    method_names,
    register_learner,
    resolved_config,
)
from learners.optim.lr_schedule import LR_SCHEDULES, SCHEDULE_OPTIONS
from learners.training.checkpoint_file import load_checkpoint_learner
from learners.training.training_loop import save_checkpoint

torch.set_num_threads(1)

METHODS = method_names()
EPISODES = SyntheticEpisodeConfig(ways=3, shots=2, queries=2)
# Fast values of the options that make a step slow (given to the methods that have them).
FAST = {"inner_steps": 1, "finetune_epochs": 1, "train_class_ids": list(range(32))}


def tiny(method: str) -> LearnerConfig:
    own = method_entry(method).options.__dataclass_fields__
    values = {k: v for k, v in FAST.items() if k in own}
    return learner_config(method, backbone="cnn4", image_size=28, width=0.25, **values)


def fit(learner, steps: int = 2) -> list[float]:
    """A few training steps on the stream the learner trains from (episodes or batches)."""
    if method_entry(learner.config.method).episodic:
        source = SyntheticEpisodeSource("train", seed=1, config=EPISODES)
        return [learner.fit_episode(source.episode(i)) for i in range(steps)]
    batches = SyntheticBatchSource(batch_size=8, seed=1)
    return [learner.fit_batch(*batches.batch(i)) for i in range(steps)]


def test_episode() -> dict:
    return SyntheticEpisodeSource("test", seed=5, config=EPISODES).episode(0)


test_episode.__test__ = False  # a helper, not a test


def predict(learner, episode: dict) -> torch.Tensor:
    torch.manual_seed(7)  # fine-tuning inferences draw augmentations from torch's RNG
    return learner.predict(episode)


def test_the_registry_holds_every_method_module() -> None:
    """Discovered from learners/methods/ by importing its modules, none listed by hand."""
    assert {"protonet", "matching", "relation", "maml", "anil", "multiclass", "knn"} <= set(METHODS)
    assert len(METHODS) == 14  # md_finetune: Meta-Dataset's Finetune baseline


@pytest.mark.parametrize("method", METHODS)
def test_config_round_trips_through_json(method: str) -> None:
    config = resolved_config(tiny(method))
    text = json.dumps(config.to_dict())
    again = learner_config_from_dict(json.loads(text))
    assert again == config
    assert type(again.options) is method_entry(method).options
    assert resolved_config(again) == config  # resolving is idempotent


@pytest.mark.parametrize("method", METHODS)
def test_fit_is_deterministic_under_a_seed(method: str) -> None:
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        learner = build_learner(tiny(method))
        losses = fit(learner)
        runs.append((losses, learner.state_dict()))
    (losses_a, state_a), (losses_b, state_b) = runs
    assert losses_a == losses_b and all(torch.isfinite(torch.tensor(losses_a)))
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)


@pytest.mark.parametrize("method", METHODS)
def test_predictions_are_logits_over_the_episode_ways(method: str) -> None:
    torch.manual_seed(0)
    learner = build_learner(tiny(method))
    fit(learner, steps=1)
    episode = test_episode()
    logits = predict(learner, episode)
    queries = len(episode["query_labels"])
    assert logits.shape == (queries, EPISODES.ways)
    assert torch.isfinite(logits).all()
    predicted = logits.argmax(dim=1)
    assert int(predicted.min()) >= 0 and int(predicted.max()) < EPISODES.ways


@pytest.mark.parametrize("method", METHODS)
def test_saved_and_loaded_learner_predicts_the_same(method: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    learner = build_learner(tiny(method))
    fit(learner, steps=1)
    episode = test_episode()
    before = predict(learner, episode)
    save_checkpoint(learner, 1, tmp_path / "learner.pt")
    loaded, _, step = load_checkpoint_learner(tmp_path / "learner.pt")
    assert step == 1 and loaded.config == learner.config
    assert torch.equal(predict(loaded, episode), before)


@pytest.mark.parametrize("method", METHODS)
def test_the_optimiser_holds_every_trainable_parameter_once(method: str) -> None:
    """The base learner creates it after the method's `add_modules`, so what a method adds
    (relation module, classifier) is trained too."""
    learner = build_learner(tiny(method))
    assert learner.optimizer is not None
    held = [id(p) for group in learner.optimizer.param_groups for p in group["params"]]
    trainable = [id(p) for p in learner.parameters() if p.requires_grad]
    assert len(held) == len(set(held)) and sorted(held) == sorted(trainable)
    assert any(name.startswith("backbone.") for name, _ in learner.named_parameters())


def bad_values(field: dataclasses.Field) -> list[object]:
    """Values outside a field's declared bounds or choices."""
    meta = field.metadata
    values: list[object] = []
    if meta.get("choices"):
        values.append("no-such-choice")
    if meta.get("minimum") is not None:
        values.append(meta["minimum"] - 1)
    if meta.get("above") is not None:
        values.append(meta["above"])
    if meta.get("below") is not None:
        values.append(meta["below"])
    return values


@pytest.mark.parametrize("method", METHODS)
def test_bad_option_values_fail_naming_the_flag(method: str) -> None:
    options = method_entry(method).options
    checked = 0
    for config_class in (LearnerConfig, options):
        for field in cli_fields(config_class):
            if field.name in method_entry(method).fixed:
                continue
            for value in bad_values(field):
                config = tiny(method)
                if config_class is LearnerConfig:
                    config = dataclasses.replace(config, **{field.name: value})
                else:
                    assert config.options is not None
                    bad = dataclasses.replace(config.options, **{field.name: value})
                    config = dataclasses.replace(config, options=bad)
                with pytest.raises(ValueError, match=f"^{flag_name(field.name)} {value}: "):
                    build_learner(config)
                checked += 1
    assert checked >= 3  # image size, width, learning rate at least


@pytest.mark.parametrize("method", METHODS)
def test_every_option_is_a_flag_of_learners_train(method: str) -> None:
    """Each option of the method and the shared ones, given a non-default value on the command
    line, arrives in the saved config (relation_hidden was once unreachable)."""
    config = tiny(method)
    argv = ["--method", method, "--synthetic", "--steps", "1", "--output", "unused"]
    expected = {}
    # the schedule chosen below is the first non-default one; the others' options are refused
    # with it (test_every_schedule_option_is_a_flag_of_learners_train covers them)
    schedule = [s for s in LR_SCHEDULES if s != config.lr_schedule][0]
    ignored = {n for s, names in SCHEDULE_OPTIONS.items() if s != schedule for n in names}
    for config_class, values in ((LearnerConfig, config), (type(config.options), config.options)):
        for field in cli_fields(config_class):
            if field.name in method_entry(method).fixed or field.name in ignored:
                continue
            default = getattr(values, field.name)
            if isinstance(default, bool) or field.type in ("bool", bool):
                value = not bool(default)
                argv.append(
                    flag_name(field.name) if value else "--no-" + field.name.replace("_", "-")
                )
            elif field.metadata.get("choices"):
                value = [c for c in field.metadata["choices"] if c != default][0]
                argv += [flag_name(field.name), value]
            elif field.name == "backbone":
                value = "resnet12"
                argv += [flag_name(field.name), value]
            else:
                value = (default or 1) * 2
                argv += [flag_name(field.name), str(value)]
            expected[field.name] = value
    saved = train_cli.run_config_from_args(train_cli.build_parser().parse_args(argv)).learner
    got = {
        name: getattr(saved, name) if hasattr(saved, name) else getattr(saved.options, name)
        for name in expected
    }
    assert got == expected


@pytest.mark.parametrize("schedule", LR_SCHEDULES)
def test_every_schedule_option_is_a_flag_of_learners_train(schedule: str) -> None:
    argv = ["--method", "protonet", "--synthetic", "--steps", "100", "--output", "unused"]
    argv += ["--lr-schedule", schedule]
    values = {"decay_every": 7, "decay_rate": 0.25, "cosine_cycles": 3}
    values.update(cycle_multiplier=3.0, cycle_lr_factor=0.2)  # not the defaults
    expected = {name: values[name] for name in SCHEDULE_OPTIONS[schedule]}
    for name, value in expected.items():
        assert value != getattr(LearnerConfig(), name)
        argv += [flag_name(name), str(value)]
    saved = train_cli.run_config_from_args(train_cli.build_parser().parse_args(argv)).learner
    assert saved.lr_schedule == schedule
    assert {name: getattr(saved, name) for name in expected} == expected


def test_an_unknown_method_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown method 'protonett'; expected one of \(.*'knn'"):
        build_learner(LearnerConfig(method="protonett"))


def test_a_name_registered_twice_for_two_learners_is_refused() -> None:
    from learners.methods.protonet import ProtoNet, ProtoNetConfig

    class Other(ProtoNet):
        pass

    with pytest.raises(RuntimeError, match="two learners registered as 'protonet'"):
        register_learner("protonet", options=ProtoNetConfig)(Other)
    assert method_entry("protonet").learner is ProtoNet
