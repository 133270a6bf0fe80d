"""Each method learns on synthetic blob episodes: the training loss goes down and 5-way test
accuracy ends well above chance after a few dozen steps (tiny CNN4, 28x28 images)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learners.feed.synthetic_episodes import (
    SyntheticBatchSource,
    SyntheticEpisodeConfig,
    SyntheticEpisodeSource,
)
from learners.methods.learner_config import LearnerConfig
from learners.methods.registry import build_learner, episodic_methods, learner_config, method_entry

torch.set_num_threads(1)

EPISODES = SyntheticEpisodeConfig(ways=5, shots=3, queries=4)
CHANCE = 1 / 5
# Relation Networks learn slowly with their MSE loss: a larger step size in this short run.
METHOD_OPTIONS = {"relation": {"lr": 5e-3}}


# Given to the methods whose options have them (MAML's inner loop, multiclass pre-training).
METHOD_DEFAULTS = {"inner_steps": 2, "train_class_ids": list(range(32)), "pretrain_augment": False}


def tiny_config(method: str, **options) -> LearnerConfig:
    own = method_entry(method).options.__dataclass_fields__
    values = {k: v for k, v in METHOD_DEFAULTS.items() if k in own}
    values.update(backbone="cnn4", image_size=28, width=0.25, lr=2e-3)
    values.update(options)
    return learner_config(method, **values)


def test_accuracy(learner, episodes: int = 10) -> float:
    source = SyntheticEpisodeSource("test", seed=5, config=EPISODES)
    accuracies = []
    for index in range(episodes):
        episode = source.episode(index)
        logits = learner.predict(episode)
        assert logits.shape == (len(episode["query_labels"]), 5)
        predictions = logits.argmax(dim=1).numpy()
        accuracies.append(float((predictions == episode["query_labels"]).mean()))
    return float(np.mean(accuracies))


test_accuracy.__test__ = False  # a helper, not a test


@pytest.mark.slow
@pytest.mark.parametrize("method", episodic_methods())
def test_episodic_method_learns(method: str) -> None:
    torch.manual_seed(0)
    learner = build_learner(tiny_config(method, **METHOD_OPTIONS.get(method, {})))
    source = SyntheticEpisodeSource("train", seed=1, config=EPISODES)
    before = test_accuracy(learner)
    losses = [learner.fit_episode(source.episode(i)) for i in range(30)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < np.mean(losses[:10]), losses
    after = test_accuracy(learner)
    # 200 query predictions: chance + 0.1 is > 3 standard deviations above chance
    assert after > CHANCE + 0.1 and after > before + 0.05, (before, after)


@pytest.fixture(scope="module")
def pretrained_state() -> dict:
    torch.manual_seed(0)
    learner = build_learner(tiny_config("multiclass", label_smoothing=0.1, mixup_alpha=0.25))
    batches = SyntheticBatchSource(batch_size=32, seed=1)
    losses = [learner.fit_batch(*batches.batch(i)) for i in range(40)]
    assert np.mean(losses[-10:]) < np.mean(losses[:10]), losses
    return learner.state_dict()


@pytest.mark.parametrize(
    "inference, options",
    [
        ("protonet", {}),
        ("knn", {"knn_k": 3, "knn_metric": "cosine"}),
        ("support_init", {}),
        ("finetune", {"finetune_epochs": 3}),
        ("transductive", {"finetune_epochs": 3, "entropy_log_ways": True}),
    ],
)
def test_multiclass_inference_above_chance(pretrained_state, inference, options) -> None:
    learner = build_learner(tiny_config("multiclass", inference=inference, **options))
    learner.load_state_dict(pretrained_state)
    assert test_accuracy(learner, episodes=6) > CHANCE + 0.15


def test_finetune_leaves_the_pretrained_network_unchanged(pretrained_state) -> None:
    learner = build_learner(tiny_config("transductive", finetune_epochs=2, finetune_lr=1e-2))
    learner.load_state_dict(pretrained_state)
    before = {k: v.clone() for k, v in learner.state_dict().items()}
    learner.predict(SyntheticEpisodeSource("test", seed=5, config=EPISODES).episode(0))
    after = learner.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_fix_ml_support_pool_is_fixed_across_episodes() -> None:
    config = SyntheticEpisodeConfig(ways=5, shots=2, queries=3, fixed_support_shots=2)
    source = SyntheticEpisodeSource("train", seed=3, config=config)
    first, second = source.episode(0), source.episode(1)
    shared = set(first["support_class_ids"]) & set(second["support_class_ids"])
    for class_id in shared:
        a = first["support_images"][first["support_class_ids"] == class_id]
        b = second["support_images"][second["support_class_ids"] == class_id]
        assert np.array_equal(a, b)  # same pool examples every time
    learner = build_learner(tiny_config("protonet"))
    losses = [learner.fit_episode(source.episode(i)) for i in range(5)]
    assert all(np.isfinite(losses))
