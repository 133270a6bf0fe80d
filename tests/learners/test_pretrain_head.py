"""Meta-Dataset's pre-training classifier (`learners.nn.pretrain_head`, `--pretrain-head cosine`,
`--pretrain-weight-norm`): the logits against the re-typed formula of
meta_dataset/models/functional_classifiers.py (linear_classifier), training lowers the loss,
the options belong to the multiclass methods only, old runs resume with the linear layer, and a
run with the new head evaluates under every inference that uses its weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from learners import evaluate
from learners import train as train_cli
from learners.evaluation.batched_inference import batched_query_logits
from learners.feed.synthetic_episodes import (
    SyntheticBatchSource,
    SyntheticEpisodeConfig,
    SyntheticEpisodeSource,
)
from learners.methods.multiclass import MulticlassConfig
from learners.methods.registry import build_learner, learner_config, method_names, methods_sharing
from learners.nn.pretrain_head import HeadOptions, MetaDatasetClassifier
from learners.optim.weight_decay import DecoupledSGD
from learners.training.checkpoint_file import load_checkpoint_learner
from splits.embeddings.feature_extractor import load_feature_extractor
from tests.fixtures.learner_runs import TINY, multiclass_config
from tests.fixtures.rank_runs import TINY as RANK_TINY
from tests.fixtures.rank_runs import (
    TOLERANCE,
    losses,
    max_differences,
    torchrun,
    train_one_process,
)

torch.set_num_threads(1)

MD_HEADS = [("cosine", True), ("cosine", False), ("linear", True)]
NEW_OPTIONS = ("pretrain_head", "pretrain_cosine_scale", "pretrain_weight_norm")


def tf_normalize(values: np.ndarray, axis: int) -> np.ndarray:
    """tf.nn.l2_normalize(values, axis, epsilon=1e-3): x / sqrt(max(sum x^2, 1e-3))."""
    return values / np.sqrt(np.maximum((values**2).sum(axis=axis, keepdims=True), 1e-3))


def reference_logits(x, v, g, b, cosine: bool, weight_norm: bool, scale: float) -> np.ndarray:
    """linear_classifier / linear_classifier_forward_pass, re-typed in numpy (float64)."""
    w = v * g / np.sqrt((v**2).sum(axis=0)) if weight_norm else v
    if cosine:
        x = tf_normalize(x, axis=1)
        if not weight_norm:
            w = tf_normalize(w, axis=0)
        return scale * (x @ w)
    return x @ w + b


def numpy_of(tensor: torch.Tensor | None) -> np.ndarray | None:
    return None if tensor is None else tensor.detach().double().numpy()


@pytest.mark.parametrize("head, weight_norm", MD_HEADS)
def test_logits_and_the_data_dependent_init_match_the_retyped_formula(head, weight_norm) -> None:
    torch.manual_seed(0)
    options = HeadOptions(head, cosine_scale=3.5, weight_norm=weight_norm)
    classifier = MetaDatasetClassifier(6, 4, options).double()
    layer = classifier.layer
    assert (layer.g is None) == (not weight_norm) and (layer.b is None) == (head == "cosine")
    x = torch.randn(16, 6, dtype=torch.float64) * 3 + 1
    x[0] = 0.01  # |x|^2 < 1e-3: TensorFlow's epsilon decides the norm
    first = x.numpy()
    classifier.train()
    logits = classifier(x).detach().numpy()
    if weight_norm:  # g and b were set from this batch, before its logits
        projected = first @ (layer.v.detach().numpy() / np.linalg.norm(layer.v.detach(), axis=0))
        gain = 1 / np.sqrt(projected.var(axis=0) + 1e-10)
        np.testing.assert_allclose(numpy_of(layer.g), gain, rtol=1e-10)
        if layer.b is not None:
            np.testing.assert_allclose(numpy_of(layer.b), -projected.mean(axis=0) * gain)
        assert int(classifier.initialised) == 1
    expected = reference_logits(
        first, numpy_of(layer.v), numpy_of(layer.g), numpy_of(layer.b), head == "cosine",
        weight_norm, 3.5,
    )  # fmt: skip
    np.testing.assert_allclose(logits, expected, rtol=1e-10, atol=1e-12)
    # the init happens once: other parameters and another batch leave g as it is
    with torch.no_grad():
        for parameter in classifier.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    before = [p.clone() for p in classifier.parameters()]
    y = torch.randn(9, 6, dtype=torch.float64)
    again = classifier(y).detach().numpy()
    assert all(torch.equal(a, b) for a, b in zip(before, classifier.parameters(), strict=True))
    expected = reference_logits(
        y.numpy(), numpy_of(layer.v), numpy_of(layer.g), numpy_of(layer.b), head == "cosine",
        weight_norm, 3.5,
    )  # fmt: skip
    np.testing.assert_allclose(again, expected, rtol=1e-10, atol=1e-12)


def test_weight_norm_init_waits_for_a_training_batch_and_is_saved() -> None:
    torch.manual_seed(1)
    classifier = MetaDatasetClassifier(5, 3, HeadOptions("cosine", 10.0, True))
    classifier.eval()
    classifier(torch.randn(4, 5))
    assert torch.equal(classifier.layer.g, torch.ones(3)) and classifier.needs_init
    classifier.train()
    classifier(torch.randn(8, 5))
    state = classifier.state_dict()
    fresh = MetaDatasetClassifier(5, 3, HeadOptions("cosine", 10.0, True))
    fresh.load_state_dict(state)
    assert not fresh.needs_init  # a resumed run keeps g from its first batch
    g = fresh.layer.g.clone()
    fresh.train()
    fresh(torch.randn(8, 5) * 7)
    assert torch.equal(fresh.layer.g, g)


def pretraining(head: str, weight_norm: bool, scale: float, method: str = "multiclass", **extra):
    return learner_config(
        method,
        backbone="cnn4",
        image_size=28,
        width=0.25,
        lr=2e-3,
        weight_decay=1e-3,
        train_class_ids=list(range(32)),
        pretrain_augment=False,
        pretrain_head=head,
        pretrain_weight_norm=weight_norm,
        pretrain_cosine_scale=scale,
        **extra,
    )


@pytest.mark.parametrize(
    "head, weight_norm, scale", [("cosine", True, 1.0), ("cosine", True, 10.0), *[
        (h, w, 10.0) for h, w in MD_HEADS[1:]
    ]],
)  # fmt: skip
def test_a_few_training_steps_lower_the_loss(head, weight_norm, scale) -> None:
    torch.manual_seed(0)
    learner = build_learner(pretraining(head, weight_norm, scale))
    assert isinstance(learner.classifier, MetaDatasetClassifier)
    batches = SyntheticBatchSource(batch_size=32, seed=1)
    losses = [learner.fit_batch(*batches.batch(i)) for i in range(24)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-6:]) < np.mean(losses[:6]), losses


@pytest.mark.parametrize(
    "optimizer, form", [("adam", "coupled"), ("adam", "decoupled"), ("sgd", "coupled"),
                        ("sgd", "decoupled")],
)  # fmt: skip
def test_weight_norm_direction_has_no_weight_decay_and_a_cosine_weight_has(optimizer, form) -> None:
    """The reference regularises `weight_variable` (no weight norm) and not w_fc under weight
    norm; gains and biases never. Under every optimiser and decay form (`DecoupledSGD` keeps
    its groups' decay as `decoupled_weight_decay`, their `weight_decay` 0)."""
    for weight_norm in (True, False):
        learner = build_learner(
            pretraining("cosine", weight_norm, 10.0, optimizer=optimizer, weight_decay_form=form)
        )
        v = learner.classifier.layer.v
        key = (
            "decoupled_weight_decay" if type(learner.optimizer) is DecoupledSGD else "weight_decay"
        )
        decay = {
            id(p): group[key] for group in learner.optimizer.param_groups for p in group["params"]
        }
        assert decay[id(v)] == (0.0 if weight_norm else 1e-3)
        assert len(decay) == len(list(learner.parameters()))  # none lost, none twice
        conv = learner.backbone.state_dict(keep_vars=True)
        assert decay[id(next(p for p in conv.values() if p.ndim == 4))] == 1e-3


def test_the_default_is_the_linear_layer_of_runs_saved_before() -> None:
    learner = build_learner(pretraining("linear", False, 10.0))
    assert type(learner.classifier) is nn.Linear
    keys = {k for k in learner.state_dict() if k.startswith("classifier.")}
    assert keys == {"classifier.weight", "classifier.bias"}
    defaults = MulticlassConfig()
    assert (defaults.pretrain_head, defaults.pretrain_weight_norm) == ("linear", False)


def test_bad_values_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    args = ["--method", "knn", "--synthetic", "--steps", "2", "--output", str(tmp_path / "r")]
    bad_scale = ["--pretrain-head", "cosine", "--pretrain-cosine-scale", "0"]
    assert train_cli.main([*args, *TINY, *bad_scale]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "error: --pretrain-cosine-scale 0.0: expected a number > 0"
    )
    with pytest.raises(SystemExit):  # argparse's choices
        train_cli.main([*args, *TINY, "--pretrain-head", "arcface"])
    assert "argument --pretrain-head: invalid choice: 'arcface'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_recipes_head_can_be_overridden_alone(tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = ["--recipe", "meta_dataset/pretrain_wide_resnet", "--synthetic", "--output", str(run)]
    argv += TINY
    argv += ["--steps", "2", "--validation-episodes", "0", "--batch-size", "8"]
    assert train_cli.main([*argv, "--pretrain-head", "linear"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["learner"]["options"]["pretrain_head"] == "linear"
    assert config["extra"]["recipe_overrides"]["pretrain_head"] == {
        "recipe": "cosine",
        "given": "linear",
    }
    model = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert "classifier.layer.v" in model and "classifier.layer.g" in model  # weight norm kept


OTHER_METHODS = [m for m in method_names() if m not in methods_sharing(MulticlassConfig)]


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_other_methods_refuse_the_head_options_in_one_line(method, tmp_path, capsys) -> None:
    owners = ", ".join(methods_sharing(MulticlassConfig))
    run = tmp_path / "run"
    args = ["--method", method, "--synthetic", "--steps", "2", "--output", str(run)]
    assert train_cli.main([*args, "--pretrain-head", "cosine", "--pretrain-weight-norm"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --pretrain-head (options of {owners}) and --pretrain-weight-norm (options of "
        f"{owners}): not options of --method {method}"
    ]
    assert not run.exists()


def test_an_old_run_without_the_options_resumes_with_the_linear_head(tmp_path: Path) -> None:
    straight, old = tmp_path / "straight", tmp_path / "old"
    train_cli.train(multiclass_config(8), str(straight), "cpu", progress=False)
    train_cli.train(multiclass_config(8), str(old), "cpu", progress=False, stop_after=4)
    # make it a run saved before the options existed: config.json and its checkpoints lack them
    config = json.loads((old / "config.json").read_text())
    for name in NEW_OPTIONS:
        del config["learner"]["options"][name]
    (old / "config.json").write_text(json.dumps(config))
    for path in (old / "checkpoints").glob("*.pt"):
        payload = torch.load(path, weights_only=True)
        for name in NEW_OPTIONS:  # snapshots may share one file (links): pop, not del
            payload["config"]["options"].pop(name, None)
        torch.save(payload, path)
        assert not set(NEW_OPTIONS) & set(torch.load(path, weights_only=True)["config"]["options"])
    result = train_cli.train(multiclass_config(8), str(old), "cpu", progress=False)
    assert (result.start_step, result.end_step) == (4, 8)
    a = torch.load(straight / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(old / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and "classifier.weight" in b
    assert all(torch.equal(a[k], b[k]) for k in a)  # the same run as one never interrupted
    saved = json.loads((old / "config.json").read_text())["learner"]["options"]
    assert (saved["pretrain_head"], saved["pretrain_weight_norm"]) == ("linear", False)


@pytest.fixture(scope="module")
def cosine_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "knn"
    argv = ["--method", "knn", "--synthetic", "--steps", "6", "--checkpoint-every", "3"]
    argv += ["--validation-episodes", "1", "--batch-size", "16", "--output", str(run), *TINY]
    argv += ["--pretrain-head", "cosine", "--pretrain-weight-norm", "--pretrain-cosine-scale", "1"]
    argv += ["--no-pretrain-augment", "--mixup-alpha", "0", "--label-smoothing", "0"]
    assert train_cli.main(argv) == 0
    return run


@pytest.mark.parametrize("inference", ["knn", "md_finetune", "support_init", "finetune"])
def test_a_cosine_run_evaluates_under_each_inference(cosine_run, inference, tmp_path) -> None:
    out = tmp_path / "eval"
    argv = ["--run", str(cosine_run), "--episodes", "2", "--no-progress", "--output", str(out)]
    argv += ["--inference", inference]
    argv += {
        "md_finetune": ["--md-finetune-steps", "2"],
        "finetune": ["--finetune-epochs", "1"],
    }.get(inference, [])
    assert evaluate.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inference"] == inference and 0 <= summary["accuracy"]["mean"] <= 1


def test_a_cosine_checkpoint_loads_with_its_head_and_batches_under_vmap(cosine_run) -> None:
    learner, path, step = load_checkpoint_learner(cosine_run)
    assert step == 6 and isinstance(learner.classifier, MetaDatasetClassifier)
    assert not learner.classifier.needs_init and learner.classifier.options.cosine_scale == 1.0
    saved = torch.load(path, weights_only=True)["model"]
    assert all(torch.equal(v, learner.state_dict()[k]) for k, v in saved.items())
    assert not torch.equal(
        saved["classifier.layer.g"], torch.ones_like(saved["classifier.layer.g"])
    )
    backbone, _, info = load_feature_extractor(cosine_run)  # splits.embeddings: the backbone
    assert (info.method, info.step, info.feature_dim) == ("knn", 6, backbone.out_dim)
    finetune = learner_config(
        "finetune", **{**json.loads((cosine_run / "config.json").read_text())["learner"]["options"],
                       "inference": "finetune", "finetune_epochs": 1},
        backbone="cnn4", image_size=28, width=0.25,
    )  # fmt: skip
    copy = build_learner(finetune)
    copy.load_state_dict(saved)
    source = SyntheticEpisodeSource(
        "test", seed=5, config=SyntheticEpisodeConfig(ways=5, shots=2, queries=3)
    )
    episodes = [copy.to_tensors(source.episode(i)) for i in range(2)]
    generators = [torch.Generator().manual_seed(i) for i in range(2)]
    logits = batched_query_logits(copy, episodes, generators, stacking="vmap")
    assert [tuple(x.shape) for x in logits] == [(15, 5), (15, 5)]
    assert all(torch.isfinite(x).all() for x in logits)
    assert torch.equal(copy.classifier.layer.g, saved["classifier.layer.g"])  # not re-initialised


@pytest.mark.slow
def test_two_ranks_initialise_the_head_as_one_process(tmp_path: Path) -> None:
    """torchrun, 2 ranks x 1 batch against one process with --meta-batch 2: g is set from
    rank 0's first batch (the first batch of the one process) and broadcast, so the weights and
    losses are those of one process."""
    common = ["--method", "multiclass", *RANK_TINY, "--batch-size", "8", "--steps", "4"]
    common += ["--checkpoint-every", "4", "--pretrain-head", "cosine", "--pretrain-weight-norm"]
    one, two = tmp_path / "one", tmp_path / "two"
    train_one_process([*common, "--meta-batch", "2", "--output", str(one)])
    torchrun("learners.train", [*common, "--output", str(two)])
    params, buffers = max_differences(one, two)
    assert params <= TOLERANCE and buffers <= TOLERANCE, (params, buffers)
    assert losses(two) == pytest.approx(losses(one), abs=1e-5)
