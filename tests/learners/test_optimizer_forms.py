"""Dhillon et al.'s pre-training as their code runs it (pretrain.py on fastai v1), as options:
`--label-smoothing-form uniform` (fastai's LabelSmoothingCrossEntropy), `--weight-decay-form
decoupled` (fastai's true_wd: SGDW/AdamW), and which parameters weight decay skips (fastai's
bn_wd=False). Each against a re-typed formula or a hand-computed optimiser step on small
tensors; runs saved before these options keep what they ran."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from learners.methods.learner import make_optimizer
from learners.methods.learner_config import LearnerConfig
from learners.methods.multiclass import MulticlassConfig, smoothed_targets, soft_cross_entropy
from learners.methods.registry import build_learner, learner_config, learner_config_from_dict
from learners.nn.backbones import BACKBONES
from learners.optim.weight_decay import DecoupledSGD, build_optimizer

torch.set_num_threads(1)
TINY = {"backbone": "cnn4", "image_size": 28, "width": 0.25}
RUN = ["--method", "multiclass", "--backbone", "cnn4", "--image-size", "28", "--width", "0.25"]
RUN += ["--validation-episodes", "0", "--batch-size", "8", "--no-progress", "--device", "cpu"]
RUN += ["--synthetic", "--ways", "3", "--shots", "1", "--query", "2"]


# --- label smoothing -----------------------------------------------------------------------


def fastai_label_smoothing_loss(logits: torch.Tensor, labels: torch.Tensor, eps: float):
    """fastai v1 layers.py LabelSmoothingCrossEntropy.forward (reduction 'mean'), re-typed."""
    c = logits.size()[-1]
    log_preds = F.log_softmax(logits, dim=-1)
    loss = (-log_preds.sum(dim=-1)).mean()
    return loss * eps / c + (1 - eps) * F.nll_loss(log_preds, labels, reduction="mean")


def test_uniform_smoothing_is_fastais_label_smoothing_cross_entropy() -> None:
    torch.manual_seed(0)
    classes, eps = 7, 0.1
    labels = torch.tensor([0, 3, 6, 3, 1])
    uniform = smoothed_targets(labels, classes, eps, "uniform")
    paper = smoothed_targets(labels, classes, eps, "paper")
    for targets in (uniform, paper):
        torch.testing.assert_close(targets.sum(1), torch.ones(5))
    on_label = uniform.gather(1, labels[:, None]).squeeze(1)
    torch.testing.assert_close(on_label, torch.full((5,), 1 - eps + eps / classes))
    assert int((uniform == eps / classes).sum()) == 5 * (classes - 1)
    torch.testing.assert_close(paper.gather(1, labels[:, None]).squeeze(1), torch.full((5,), 0.9))
    assert int((paper == eps / (classes - 1)).sum()) == 5 * (classes - 1)
    logits = torch.randn(5, classes, dtype=torch.float64) * 3
    ours = soft_cross_entropy(logits, uniform.double())
    torch.testing.assert_close(ours, fastai_label_smoothing_loss(logits, labels, eps))
    assert abs(float(soft_cross_entropy(logits, paper.double()) - ours)) > 1e-4  # not the same
    for form in ("paper", "uniform"):  # eps 0: plain one-hot either way
        assert torch.equal(
            smoothed_targets(labels, classes, 0.0, form), F.one_hot(labels, 7).float()
        )
    with pytest.raises(ValueError, match="--label-smoothing-form fastai: expected one of paper"):
        smoothed_targets(labels, classes, eps, "fastai")


def test_a_multiclass_batch_loss_uses_the_chosen_smoothing_form() -> None:
    torch.manual_seed(0)
    config = learner_config(
        "multiclass",
        train_class_ids=[2, 5, 9, 11],
        label_smoothing=0.2,
        label_smoothing_form="uniform",
        mixup_alpha=0.0,
        pretrain_augment=False,
        **TINY,
    )
    learner = build_learner(config)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(6, 28, 28, 3), dtype=np.uint8)
    class_ids = np.array([2, 5, 9, 11, 9, 2])
    loss = learner.batch_loss(images, class_ids)
    from learners.feed.episode_batch import images_to_tensor

    inputs = images_to_tensor(images, learner.device, learner.normalization, 28)
    with torch.no_grad():
        logits = learner.classifier(learner.backbone(inputs))  # training mode, batch moments
    expected = fastai_label_smoothing_loss(logits, learner.class_indices(class_ids), 0.2)
    torch.testing.assert_close(loss.detach(), expected, rtol=1e-5, atol=1e-6)


# --- weight decay form ---------------------------------------------------------------------


def small_module() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)).double()


def fixed_gradients(module: nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for parameter in module.parameters():
        parameter.grad = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)


def decayed(parameter: torch.Tensor) -> bool:
    return parameter.ndim > 1


@pytest.mark.parametrize("form", ["decoupled", "coupled"])
def test_two_sgd_nesterov_steps_equal_the_hand_computed_update(form: str) -> None:
    lr, wd, mu = 0.1, 0.05, 0.9
    module = small_module()
    config = LearnerConfig(optimizer="sgd", lr=lr, weight_decay=wd, weight_decay_form=form)
    optimizer = make_optimizer(module, config)
    assert type(optimizer) is (DecoupledSGD if form == "decoupled" else torch.optim.SGD)
    start = [p.detach().clone() for p in module.parameters()]
    expected, buffers = [p.clone() for p in start], [None] * len(start)
    for step, step_lr in enumerate((lr, lr / 4)):  # the second step at a scheduled lower rate
        for group in optimizer.param_groups:
            group["lr"] = step_lr
        fixed_gradients(module, seed=step)
        for i, parameter in enumerate(module.parameters()):
            g, p = parameter.grad.clone(), expected[i]
            w = wd if decayed(parameter) else 0.0
            if form == "coupled":
                g = g + w * p  # torch SGD: the decay joins the gradient, then the momentum
            buffers[i] = g.clone() if buffers[i] is None else mu * buffers[i] + g
            if form == "decoupled":
                p = p * (1 - step_lr * w)  # fastai true_wd: p.mul_(1 - wd*lr), then the step
            expected[i] = p - step_lr * (g + mu * buffers[i])
        optimizer.step()
    for parameter, want, first in zip(module.parameters(), expected, start):
        torch.testing.assert_close(parameter.detach(), want, rtol=1e-12, atol=1e-12)
        assert not torch.equal(parameter.detach(), first)
    # the two forms differ on the decayed weights only
    other = small_module()
    other_form = "coupled" if form == "decoupled" else "decoupled"
    other_optimizer = make_optimizer(other, replace(config, weight_decay_form=other_form))
    for step, step_lr in enumerate((lr, lr / 4)):
        for group in other_optimizer.param_groups:
            group["lr"] = step_lr
        fixed_gradients(other, seed=step)
        other_optimizer.step()
    for a, b in zip(module.parameters(), other.parameters()):
        assert torch.equal(a, b) != decayed(a)


def test_decoupled_adam_is_adamw_and_a_first_step_is_hand_computed() -> None:
    lr, wd = 0.01, 0.1
    module = small_module()
    optimizer = make_optimizer(
        module,
        LearnerConfig(optimizer="adam", lr=lr, weight_decay=wd, weight_decay_form="decoupled"),
    )
    start = [p.detach().clone() for p in module.parameters()]
    fixed_gradients(module, seed=3)
    grads = [p.grad.clone() for p in module.parameters()]
    optimizer.step()
    for parameter, p0, g in zip(module.parameters(), start, grads):
        w = wd if decayed(parameter) else 0.0
        # step 1: m_hat = g, v_hat = g^2, so the Adam step is lr * g / (|g| + 1e-8)
        want = p0 * (1 - lr * w) - lr * g / (g.abs() + 1e-8)
        torch.testing.assert_close(parameter.detach(), want, rtol=1e-10, atol=1e-12)
    coupled = build_optimizer([{"params": [nn.Parameter(torch.ones(2, 2))]}], "adam", lr, "coupled")
    assert coupled.param_groups[0]["decoupled_weight_decay"] is False


def test_decoupled_sgd_leaves_parameters_without_gradient_and_zero_decay_groups() -> None:
    a, b = nn.Parameter(torch.ones(2, 2)), nn.Parameter(torch.ones(2, 2))
    optimizer = DecoupledSGD(
        [{"params": [a], "weight_decay": 0.5}, {"params": [b]}],
        lr=0.1,
        momentum=0.9,
        nesterov=True,
    )
    assert [g["decoupled_weight_decay"] for g in optimizer.param_groups] == [0.5, 0.0]
    assert all(g["weight_decay"] == 0.0 for g in optimizer.param_groups)
    b.grad = torch.zeros(2, 2)
    optimizer.step()  # a has no gradient: untouched; b has a zero one and no decay
    assert torch.equal(a.detach(), torch.ones(2, 2)) and torch.equal(b.detach(), torch.ones(2, 2))
    a.grad = torch.zeros(2, 2)
    optimizer.step()
    torch.testing.assert_close(a.detach(), torch.full((2, 2), 1 - 0.1 * 0.5))


# --- which parameters are decayed ----------------------------------------------------------


def fastai_no_decay_ids(model: nn.Module) -> set[int]:
    """fastai v1 (>= 1.0.43) torch_core.py split_no_wd_params over flatten_model's leaves,
    re-typed: BatchNorm/LayerNorm parameters and the biases of linear and convolution layers."""
    norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm)
    biased = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    biased += (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    skipped = set()
    for leaf in model.modules():
        if list(leaf.children()):
            continue
        if isinstance(leaf, norms):
            skipped |= {id(p) for p in leaf.parameters()}
        elif isinstance(leaf, biased) and leaf.bias is not None:
            skipped.add(id(leaf.bias))
    return skipped


@pytest.mark.parametrize("backbone", BACKBONES)
def test_weight_decay_skips_what_fastais_bn_wd_false_skips(backbone: str) -> None:
    size = 84 if backbone == "relationnet_cnn4" else 32
    config = learner_config(
        "multiclass",
        train_class_ids=[0, 1, 2],
        backbone=backbone,
        image_size=size,
        width=0.125,
        optimizer="sgd",
        weight_decay=1e-4,
        weight_decay_form="decoupled",
    )
    learner = build_learner(config)
    decay, no_decay = learner.optimizer.param_groups
    assert decay["decoupled_weight_decay"] == 1e-4 and no_decay["decoupled_weight_decay"] == 0.0
    skipped = {id(p) for p in no_decay["params"]}
    assert skipped == fastai_no_decay_ids(learner)
    assert len(skipped) > 0 and len(decay["params"]) > 0
    assert len(skipped) + len(decay["params"]) == len(list(learner.parameters()))
    assert id(learner.classifier.bias) in skipped and id(learner.classifier.weight) not in skipped


# --- bad values, old runs ------------------------------------------------------------------


def test_bad_forms_are_refused_in_one_line_naming_the_flag(tmp_path, capsys) -> None:
    from learners.train import main

    with pytest.raises(ValueError, match=r"^--weight-decay-form sideways: expected one of coupled"):
        LearnerConfig(weight_decay_form="sideways").check()
    with pytest.raises(ValueError, match=r"^--label-smoothing-form fastai: expected one of paper"):
        MulticlassConfig(label_smoothing_form="fastai").check()
    with pytest.raises(ValueError, match="--weight-decay-form sideways"):
        build_optimizer([{"params": [nn.Parameter(torch.ones(1))]}], "sgd", 0.1, "sideways")
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as parse_error:  # argparse: usage, then the error line
        main([*RUN, "--steps", "1", "--output", str(out), "--weight-decay-form", "x"])
    assert parse_error.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--weight-decay-form: invalid choice: 'x'" in error and "'decoupled'" in error
    argv = [*RUN, "--steps", "1", "--output", str(out), "--label-smoothing-form", "uniform"]
    argv[1] = "protonet"
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error and "--label-smoothing-form" in error
    assert not out.exists()


def test_an_old_run_without_the_new_fields_loads_and_resumes_with_the_old_forms(
    tmp_path, capsys
) -> None:
    from learners.train import main

    old = learner_config_from_dict(
        {
            "method": "multiclass",
            "optimizer": "sgd",
            "weight_decay": 1e-4,
            "options": {"label_smoothing": 0.1, "train_class_ids": [0, 1, 2]},
            **TINY,
        }
    )
    assert old.weight_decay_form == "coupled" and old.options.label_smoothing_form == "paper"
    assert type(build_learner(old).optimizer) is torch.optim.SGD
    flat = learner_config_from_dict({"method": "multiclass", "label_smoothing": 0.1})
    assert flat.weight_decay_form == "coupled" and flat.options.label_smoothing_form == "paper"

    run = tmp_path / "run"
    argv = [*RUN, "--output", str(run), "--optimizer", "sgd", "--weight-decay", "1e-4"]
    assert main([*argv, "--steps", "2"]) == 0
    path = run / "config.json"
    config = json.loads(path.read_text())
    assert config["learner"].pop("weight_decay_form") == "coupled"
    assert config["learner"]["options"].pop("label_smoothing_form") == "paper"
    path.write_text(json.dumps(config))  # as runs saved before the options wrote it
    assert main([*argv, "--steps", "3"]) == 0  # resumes: nothing counts as changed
    step = torch.load(run / "checkpoints" / "last.pt", weights_only=False)["step"]
    assert step == 3
    resumed = json.loads(path.read_text())["learner"]
    assert resumed["weight_decay_form"] == "coupled"
    assert resumed["options"]["label_smoothing_form"] == "paper"
    capsys.readouterr()
    assert main([*argv, "--steps", "4", "--weight-decay-form", "decoupled"]) == 2
    assert "learner.weight_decay_form 'coupled' -> 'decoupled'" in capsys.readouterr().err


def test_a_decoupled_run_resumes_bit_exactly(tmp_path) -> None:
    from learners.train import main

    argv = [*RUN, "--optimizer", "sgd", "--weight-decay", "0.01", "--weight-decay-form"]
    argv += ["decoupled", "--label-smoothing-form", "uniform", "--checkpoint-every", "1"]
    assert main([*argv, "--output", str(tmp_path / "a"), "--steps", "3"]) == 0
    assert main([*argv, "--output", str(tmp_path / "b"), "--steps", "2"]) == 0
    assert main([*argv, "--output", str(tmp_path / "b"), "--steps", "3"]) == 0
    whole, resumed = (
        torch.load(tmp_path / run / "checkpoints" / "last.pt", weights_only=False)
        for run in ("a", "b")
    )
    assert whole["step"] == resumed["step"] == 3
    for key, value in whole["model"].items():
        assert torch.equal(value, resumed["model"][key]), key
    groups = resumed["optimizer"]["param_groups"]
    assert [g["decoupled_weight_decay"] for g in groups] == [0.01, 0.0]
