"""The papers' conventions as options, each against a re-typed reference formula on small inputs:
BatchNorm moments (learners.nn.batch_norm), Matching Networks' support-only normalisation, MAML's
adapted parameter set, the learning-rate schedules (learners.optim.lr_schedule)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from learners.feed.synthetic_episodes import SyntheticEpisodeConfig, SyntheticEpisodeSource
from learners.methods.learner_config import LearnerConfig
from learners.methods.maml import MamlConfig, batch_norm_parameter_names
from learners.methods.matching import MatchingConfig, matching_log_probs
from learners.methods.registry import build_learner, learner_config, learner_config_from_dict
from learners.nn.batch_norm import EpisodeBatchNorm2d, embed_support_query
from learners.optim.lr_schedule import (
    ScheduleConfig,
    apply_schedule,
    cosine_cycles_lr,
    cycle_lengths,
    exponential_lr,
)
from learners.training.training_loop import LoopConfig, run_training

torch.set_num_threads(1)
EPISODES = SyntheticEpisodeConfig(ways=5, shots=3, queries=4)
TINY = {"backbone": "cnn4", "image_size": 28, "width": 0.25}


def reference_batch_norm(x, mean, var, scale, offset):
    """tf.nn.batch_normalization(x, mean, var, offset, scale, 0.00001), NCHW, in numpy."""
    shape = (1, -1, 1, 1)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * scale.reshape(
        shape
    ) + offset.reshape(shape)


def numpy_moments(x):
    """tf.nn.moments over (N, H, W): mean and biased variance per channel."""
    return x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))


def _norm_layer(seed: int = 0) -> EpisodeBatchNorm2d:
    torch.manual_seed(seed)
    layer = EpisodeBatchNorm2d(3, track_running_stats=False).double()
    with torch.no_grad():
        layer.weight.copy_(torch.rand(3) + 0.5)
        layer.bias.copy_(torch.randn(3))
    return layer


def test_support_convention_normalises_both_sets_with_the_support_moments() -> None:
    layer = _norm_layer()
    rng = np.random.default_rng(0)
    support = rng.normal(2.0, 3.0, (6, 3, 4, 4))
    query = rng.normal(-1.0, 0.5, (5, 3, 4, 4))
    scale, offset = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    for training in (True, False):  # Meta-Dataset: the same at training and at test time
        layer.train(training)
        s, q = embed_support_query(
            layer, layer, torch.tensor(support), torch.tensor(query), "support"
        )
        mean, var = numpy_moments(support)
        np.testing.assert_allclose(
            s.detach().numpy(), reference_batch_norm(support, mean, var, scale, offset), rtol=1e-10
        )
        np.testing.assert_allclose(
            q.detach().numpy(), reference_batch_norm(query, mean, var, scale, offset), rtol=1e-10
        )


def test_episode_convention_normalises_each_set_with_its_own_moments() -> None:
    layer = _norm_layer(1).eval()
    rng = np.random.default_rng(1)
    support, query = rng.normal(2, 3, (6, 3, 4, 4)), rng.normal(-1, 0.5, (5, 3, 4, 4))
    scale, offset = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    s, q = embed_support_query(layer, layer, torch.tensor(support), torch.tensor(query), "episode")
    for out, x in ((s, support), (q, query)):
        np.testing.assert_allclose(
            out.detach().numpy(),
            reference_batch_norm(x, *numpy_moments(x), scale, offset),
            rtol=1e-10,
        )


def test_running_convention_uses_the_joint_batch_then_the_running_averages() -> None:
    torch.manual_seed(2)
    layer = EpisodeBatchNorm2d(3, momentum=1.0).double()  # running averages = the last batch
    rng = np.random.default_rng(2)
    support, query = rng.normal(2, 3, (6, 3, 4, 4)), rng.normal(-1, 0.5, (5, 3, 4, 4))
    joint = np.concatenate([support, query])
    ones, zeros = np.ones(3), np.zeros(3)
    s, q = embed_support_query(layer, layer, torch.tensor(support), torch.tensor(query), "running")
    mean, var = numpy_moments(joint)
    np.testing.assert_allclose(
        torch.cat([s, q]).detach().numpy(),
        reference_batch_norm(joint, mean, var, ones, zeros),
        rtol=1e-10,
    )
    layer.eval()
    other = rng.normal(5, 1, (4, 3, 4, 4))
    s, _ = embed_support_query(layer, layer, torch.tensor(other), torch.tensor(other), "running")
    unbiased = joint.var(axis=(0, 2, 3), ddof=1)  # torch's running variance is unbiased
    np.testing.assert_allclose(
        s.detach().numpy(), reference_batch_norm(other, mean, unbiased, ones, zeros), rtol=1e-8
    )


def test_support_moments_carry_gradients_and_queries_do_not_see_each_other() -> None:
    layer = _norm_layer(3).eval()
    support = torch.randn(6, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    query = torch.randn(5, 3, 4, 4, dtype=torch.float64)
    _, q = embed_support_query(layer, layer, support, query, "support")
    (q**2).sum().backward()  # backprop_through_moments = True
    assert support.grad is not None and float(support.grad.abs().sum()) > 0
    _, alone = embed_support_query(layer, layer, support.detach(), query[:1], "support")
    torch.testing.assert_close(alone, q[:1].detach())  # not transductive
    _, joint = embed_support_query(layer, layer, support.detach(), query, "episode")
    _, single = embed_support_query(layer, layer, support.detach(), query[:2], "episode")
    assert not torch.allclose(joint[:2], single)  # transductive: the query set's moments


def test_a_query_pass_without_recorded_support_moments_is_refused() -> None:
    from learners.nn.batch_norm import replaying

    layer = _norm_layer()
    with pytest.raises(RuntimeError, match="support-set moments"), replaying(layer):
        layer(torch.randn(2, 3, 4, 4, dtype=torch.float64))


def _shifted(episode: dict, factor: float) -> dict:
    """The episode with every pixel multiplied by `factor` (darker, lower contrast)."""
    shifted = dict(episode)
    for key in ("support_images", "query_images"):
        shifted[key] = (episode[key].astype(np.float32) * factor).astype(np.uint8)
    return shifted


def _accuracy(learner, episodes: list[dict]) -> float:
    hits = [
        float((learner.predict(ep).argmax(1).numpy() == ep["query_labels"]).mean())
        for ep in episodes
    ]
    return float(np.mean(hits))


def test_support_moments_score_higher_than_running_averages_on_shifted_episodes() -> None:
    """The issue's measurement at test size: one ProtoNet trained with running averages,
    evaluated with the same weights under both conventions on episodes whose image statistics
    differ from training (pixels x 0.3): Meta-Dataset's convention adapts to them."""
    torch.manual_seed(0)
    running = build_learner(learner_config("protonet", lr=2e-3, **TINY))
    train = SyntheticEpisodeSource("train", seed=1, config=EPISODES)
    for index in range(40):
        running.fit_episode(train.episode(index))
    support = build_learner(learner_config("protonet", batch_norm="support", **TINY))
    incompatible = support.load_state_dict(running.state_dict(), strict=False)
    assert not incompatible.missing_keys  # the same weights; only running averages are unused
    assert all("running_" in k or "num_batches" in k for k in incompatible.unexpected_keys)
    test = SyntheticEpisodeSource("test", seed=5, config=EPISODES)
    shifted = [_shifted(test.episode(i), 0.3) for i in range(20)]
    gain = _accuracy(support, shifted) - _accuracy(running, shifted)
    assert gain > 0.1, gain


@pytest.mark.parametrize("method", ["protonet", "matching", "relation", "maml", "multiclass"])
def test_every_method_takes_each_convention(method: str) -> None:
    extra = {"inner_steps": 1} if method == "maml" else {}
    if method == "multiclass":
        extra = {"train_class_ids": list(range(8)), "pretrain_augment": False}
    episode = SyntheticEpisodeSource("test", seed=3, config=EPISODES).episode(0)
    for mode in ("running", "support", "episode"):
        torch.manual_seed(0)
        learner = build_learner(learner_config(method, batch_norm=mode, **TINY, **extra))
        assert learner.config.batch_norm == mode == learner.batch_norm
        tracks = any(
            m.track_running_stats for m in learner.modules() if isinstance(m, EpisodeBatchNorm2d)
        )
        assert tracks == (mode == "running")
        if method != "multiclass":
            assert np.isfinite(learner.fit_episode(episode))
        assert learner.predict(episode).shape == (len(episode["query_labels"]), 5)


def test_default_conventions_are_the_methods_previous_behaviour() -> None:
    assert build_learner(learner_config("protonet", **TINY)).batch_norm == "running"
    assert build_learner(learner_config("maml", **TINY)).batch_norm == "episode"
    assert build_learner(learner_config("maml", **TINY)).config.batch_norm is None  # saved
    with pytest.raises(ValueError, match="--batch-norm"):
        LearnerConfig(batch_norm="transductive").check()


# --- Matching Networks ---------------------------------------------------------------------


def reference_matching_log_probs(query, support, one_hot):
    """MatchingNetworkLearner.compute_logits (Meta-Dataset), re-typed in numpy: only the
    support embeddings are l2-normalised (epsilon 1e-3 on the squared norm)."""
    support = support / np.sqrt(np.maximum((support**2).sum(1, keepdims=True), 1e-3))
    similarities = query @ support.T
    attention = np.exp(similarities - similarities.max(1, keepdims=True))
    attention /= attention.sum(1, keepdims=True)
    return np.log(attention @ one_hot)


def test_matching_logits_follow_the_reference_support_only_normalisation() -> None:
    rng = np.random.default_rng(0)
    support, query = rng.normal(size=(7, 5)), 3 * rng.normal(size=(4, 5))
    labels = np.array([0, 0, 1, 1, 2, 2, 2])
    one_hot = np.eye(3)[labels]
    ours = matching_log_probs(
        torch.tensor(query), torch.tensor(support), torch.tensor(labels), 3, 1.0, "support"
    )
    np.testing.assert_allclose(
        ours.numpy(), reference_matching_log_probs(query, support, one_hot), rtol=1e-10
    )
    # The query's norm is a temperature: scaling it sharpens the attention (not so for cosine).
    sharper = matching_log_probs(
        torch.tensor(4 * query), torch.tensor(support), torch.tensor(labels), 3, 1.0, "support"
    )
    assert float(sharper.max(1).values.mean()) > float(ours.max(1).values.mean())
    both = [
        matching_log_probs(
            torch.tensor(f * query), torch.tensor(support), torch.tensor(labels), 3, 1.0, "both"
        )
        for f in (1, 4)
    ]
    torch.testing.assert_close(both[0], both[1])


def test_matching_default_is_the_reference_and_old_runs_keep_cosine() -> None:
    assert MatchingConfig().matching_normalize == "support"
    old = learner_config_from_dict({"method": "matching", "options": {"matching_scale": 1.0}})
    assert old.options.matching_normalize == "both"


# --- MAML ----------------------------------------------------------------------------------


def _changed(learner, params) -> set[str]:
    """The names the inner loop replaced by adapted tensors (the others are the parameters)."""
    originals = dict(learner.backbone.named_parameters())
    changed = {n for n, v in params.items() if n.startswith("head.")}
    changed |= {n for n, v in params.items() if n in originals and v is not originals[n]}
    return changed


@pytest.mark.parametrize("adapt_bn", [False, True])
@pytest.mark.parametrize("method", ["maml", "protomaml", "anil"])
def test_maml_inner_loop_adapts_the_reference_parameter_set(method: str, adapt_bn: bool) -> None:
    torch.manual_seed(0)
    learner = build_learner(
        learner_config(method, inner_steps=1, inner_lr=0.5, adapt_batch_norm=adapt_bn, **TINY)
    )
    episode = SyntheticEpisodeSource("test", seed=3, config=EPISODES).episode(0)
    params = learner.adapt(learner.to_tensors(episode), steps=1, first_order=True)
    names = {n for n, _ in learner.backbone.named_parameters()}
    norms = batch_norm_parameter_names(learner.backbone)
    assert norms and norms < names and all(".weight" in n or ".bias" in n for n in norms)
    if method == "anil":
        expected = set()
    else:
        expected = names if adapt_bn else names - norms
    assert _changed(learner, params) == expected | {"head.weight", "head.bias"}


def test_maml_reference_default_and_old_runs_adapt_batch_norm() -> None:
    assert MamlConfig().adapt_batch_norm is False  # MAMLLearner.adapt_batch_norm = False
    old = learner_config_from_dict({"method": "maml", "options": {"inner_steps": 5}})
    assert old.options.adapt_batch_norm is True


# --- learning-rate schedules ---------------------------------------------------------------


def test_exponential_schedule_is_tensorflows_staircase_decay() -> None:
    # tf.train.exponential_decay(lr, global_step, decay_steps, decay_rate, staircase=True)
    for step in (0, 1, 499, 500, 501, 1999, 2000):
        expected = 1.2e-3 * 0.915 ** math.floor(step / 500)
        assert exponential_lr(1.2e-3, step, 500, 0.915) == pytest.approx(expected, rel=1e-12)


def test_cosine_cycles_follow_fastai_annealing_over_two_cycles() -> None:
    assert cycle_lengths(30, 2, 2.0) == [10, 20]  # cycle_length * 2 ** cycle epochs
    assert sum(cycle_lengths(1001, 2, 2.0)) == 1001

    def annealing_cos(start, end, pct):
        return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)

    for step in range(30):
        cycle, position, length = (0, step, 10) if step < 10 else (1, step - 10, 20)
        expected = annealing_cos(0.1 * 0.1**cycle, 0.0, position / length)
        assert cosine_cycles_lr(0.1, step, 30, 2, 2.0, 0.1) == pytest.approx(expected)
    assert cosine_cycles_lr(0.1, 30, 30, 2, 2.0, 0.1) == 0.0


def test_schedule_horizon_is_saved_with_the_optimiser_and_survives_a_longer_resume() -> None:
    config = ScheduleConfig("cosine-cycles")
    weights = [torch.nn.Parameter(torch.zeros(2))]
    optimizer = torch.optim.SGD(weights, lr=0.1)
    apply_schedule(optimizer, config, 1, total_steps=30)
    saved = optimizer.state_dict()
    resumed = torch.optim.SGD(weights, lr=0.1)
    resumed.load_state_dict(saved)
    # continued with --steps 60: the curve stays the one of 30 steps
    assert apply_schedule(resumed, config, 11, total_steps=60) == pytest.approx(0.01)
    assert apply_schedule(resumed, config, 31, total_steps=60) == 0.0


def test_training_with_a_schedule_resumes_bit_exactly(tmp_path) -> None:
    source = SyntheticEpisodeSource("train", seed=1, config=EPISODES)

    def stream(start: int):
        return source.items(range(start, 10**6))

    def train(folder, stop_after=None):
        torch.manual_seed(0)
        learner = build_learner(
            learner_config(
                "protonet", lr_schedule="exponential", decay_every=2, decay_rate=0.5, **TINY
            )
        )
        loop = LoopConfig(total_steps=6, checkpoint_every=3, progress=False)
        run_training(learner, stream, folder, loop, stop_after=stop_after)
        return learner

    whole = train(tmp_path / "a")
    train(tmp_path / "b", stop_after=3)
    resumed = train(tmp_path / "b")
    for (name, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 0.5**2)


# --- multiclass pre-training and Meta-Dataset's Finetune ----------------------------------


def test_mixup_lambdas_are_per_sample_and_folded_as_fastai() -> None:
    from learners.methods.multiclass import mixup_lambdas

    torch.manual_seed(0)
    per_sample = mixup_lambdas(256, 0.25, per_sample=True)
    assert per_sample.shape == (256,) and float(per_sample.min()) >= 0.5
    assert float(per_sample.max()) <= 1.0 and len(set(per_sample.tolist())) > 200
    per_batch = mixup_lambdas(8, 0.25, per_sample=False)
    assert len(set(per_batch.tolist())) == 1
    old = learner_config_from_dict({"method": "multiclass", "options": {"mixup_alpha": 0.25}})
    assert old.options.mixup_per_sample is False  # runs saved before drew one per batch


def test_weight_norm_head_starts_with_normalised_outputs_and_cosine_logits() -> None:
    from learners.inference.md_finetune import MDFinetuneOptions
    from learners.nn.linear_classifier import MDHead

    torch.manual_seed(0)
    features = torch.randn(20, 6, dtype=torch.float64) * 3 + 1
    head = MDHead(6, 4, MDFinetuneOptions(cosine=False, weight_norm=True)).double()
    head.data_dependent_init(features)
    out = head(features).detach()
    torch.testing.assert_close(out.mean(0), torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(out.var(0, unbiased=False), torch.ones(4, dtype=torch.float64))
    cosine = MDHead(6, 4, MDFinetuneOptions(cosine=True, weight_norm=False)).double()
    w = cosine.v.detach().numpy()
    w = w / np.sqrt(np.maximum((w**2).sum(0, keepdims=True), 1e-3))
    x = features.numpy() / np.sqrt(np.maximum((features.numpy() ** 2).sum(1, keepdims=True), 1e-3))
    np.testing.assert_allclose(cosine(features).detach().numpy(), 10 * x @ w, rtol=1e-10)


@pytest.mark.parametrize("all_layers", [False, True])
def test_md_finetune_inference_fits_the_support_and_leaves_the_weights(all_layers: bool) -> None:
    torch.manual_seed(0)
    learner = build_learner(
        learner_config(
            "md_finetune",
            train_class_ids=list(range(8)),
            md_finetune_steps=30,
            md_finetune_all_layers=all_layers,
            batch_norm="support",
            **TINY,
        )
    )
    before = {k: v.clone() for k, v in learner.state_dict().items()}
    episode = SyntheticEpisodeSource("test", seed=3, config=EPISODES).episode(0)
    support_as_query = dict(episode)
    support_as_query["query_images"] = episode["support_images"]
    support_as_query["query_labels"] = episode["support_labels"]
    support_as_query["query_class_ids"] = episode["support_class_ids"]
    logits = learner.predict(support_as_query)
    assert float((logits.argmax(1).numpy() == episode["support_labels"]).mean()) == 1.0
    for key, value in learner.state_dict().items():
        assert torch.equal(value, before[key]), key


# --- Relation Networks ----------------------------------------------------------------------


def test_reference_relation_module_and_backbone_have_meta_datasets_shapes() -> None:
    from learners.methods.relation import ReferenceRelationModule, RelationConfig
    from learners.nn.backbones import BackboneConfig, build_backbone

    backbone = build_backbone(BackboneConfig("relationnet_cnn4", image_size=84))
    maps = backbone.feature_map(torch.zeros(2, 3, 84, 84))
    # unpadded conv + pool three times (84 -> 82 -> 41 -> 39 -> 19 -> 17 -> 8), padded 4th
    assert tuple(maps.shape) == (2, 64, 8, 8)
    module = ReferenceRelationModule(64, 8, (8, 8))
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(64 * 2 * 2, 8), (8, 1)]
    scores = module(torch.randn(6, 128, 8, 8))
    assert scores.shape == (6,) and bool(((scores > 0) & (scores < 1)).all())
    tiny = ReferenceRelationModule(4, 8, (1, 1))  # no pooling below 1x1, as the reference
    assert tiny(torch.randn(3, 8, 1, 1)).shape == (3,)
    assert RelationConfig().relation_module == "reference"
    old = learner_config_from_dict({"method": "relation", "options": {"relation_hidden": 8}})
    assert old.options.relation_module == "pooled"  # runs saved before keep their module


def test_meta_datasets_wide_resnet_is_wrn_16_2_with_128_features() -> None:
    from learners.nn.backbones import BackboneConfig, build_backbone

    wrn = build_backbone(BackboneConfig("wrn16_2", image_size=32))
    assert wrn.out_dim == 128  # _wide_resnet: "x.shape: [X, 1, 1, 128]"
    convs = [m for m in wrn.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) == 1 + 3 * 2 * 2  # stem + 3 groups x 2 blocks x 2 convs (depth 16 - 3)


def _bilinear_align_corners(image: np.ndarray, side: int) -> np.ndarray:
    """TensorFlow's resize_bilinear(align_corners=True) re-typed: output pixel i samples the
    input at i * (n - 1) / (side - 1), interpolating the four neighbours (one channel)."""
    n = image.shape[0]
    coords = np.arange(side) * (n - 1) / (side - 1)
    low = np.floor(coords).astype(int)
    high = np.minimum(low + 1, n - 1)
    frac = coords - low
    rows = image[low] * (1 - frac)[:, None] + image[high] * frac[:, None]
    return rows[:, low] * (1 - frac)[None, :] + rows[:, high] * frac[None, :]


def test_deeplab_alignment_resizes_resnet18_inputs_as_meta_dataset() -> None:
    from learners.nn.backbones import deeplab_align, deeplab_aligned_size

    # the sizes functional_backbones._resnet's comment lists
    assert [deeplab_aligned_size(s) for s in (42, 84, 126, 168, 224)] == [65, 97, 129, 193, 225]
    image = torch.rand(
        1, 1, 126, 126, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    aligned = deeplab_align(image)
    assert aligned.shape == (1, 1, 129, 129)
    expected = _bilinear_align_corners(image[0, 0].numpy(), 129)
    np.testing.assert_allclose(aligned[0, 0].numpy(), expected, rtol=0, atol=1e-12)
    assert torch.equal(aligned[..., 0, 0], image[..., 0, 0])  # corners kept
    assert torch.equal(aligned[..., -1, -1], image[..., -1, -1])


def test_deeplab_alignment_is_what_the_resnet18_sees_and_is_refused_elsewhere() -> None:
    from learners.nn.backbones import deeplab_align

    config = learner_config("protonet", backbone="resnet18", width=0.25, image_size=42)
    plain = build_learner(config)
    aligned = build_learner(
        learner_config_from_dict({**config.to_dict(), "input_alignment": "deeplab"})
    )
    aligned.load_state_dict(plain.state_dict())
    plain.eval(), aligned.eval()
    images = torch.rand(2, 3, 42, 42)
    with torch.no_grad():
        assert torch.equal(aligned.backbone(images), plain.backbone(deeplab_align(images)))
        assert not torch.allclose(aligned.backbone(images), plain.backbone(images))
    assert LearnerConfig().input_alignment == "none"  # default, and what older runs load as
    old = {k: v for k, v in config.to_dict().items() if k != "input_alignment"}
    assert learner_config_from_dict(old).input_alignment == "none"
    with pytest.raises(
        ValueError, match="--input-alignment deeplab applies to --backbone resnet18"
    ):
        build_learner(learner_config("protonet", **TINY, input_alignment="deeplab"))
    with pytest.raises(ValueError, match="input.alignment"):
        learner_config("protonet", **TINY, input_alignment="tf").check()


def test_a_hardness_extractor_sees_its_own_input_scaling() -> None:
    from learners.evaluation.hardness_model import _Extractor, renormalized
    from learners.feed.episode_batch import images_to_tensor
    from learners.methods.learner import input_normalization

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(2, 16, 16, 3), dtype=np.uint8)
    imagenet, md = input_normalization("imagenet"), input_normalization("meta-dataset")
    as_imagenet = images_to_tensor(pixels, "cpu", imagenet)
    as_md = images_to_tensor(pixels, "cpu", md)
    torch.testing.assert_close(as_md, torch.tensor(pixels).permute(0, 3, 1, 2) / 127.5 - 1)
    torch.testing.assert_close(renormalized(as_imagenet, imagenet, md), as_md)
    extractor = _Extractor(torch.nn.Identity(), 16, (imagenet, md))  # what the module is fed
    torch.testing.assert_close(extractor(as_imagenet), as_md)


def test_a_trained_run_evaluates_under_another_convention(tmp_path, capsys) -> None:
    """learners.evaluate --batch-norm: the same weights, Meta-Dataset's support moments; the
    result is recorded in the settings and the folder name; MAML runs have no averages."""
    from learners import evaluate, train

    tiny = ["--backbone", "cnn4", "--image-size", "28", "--width", "0.25", "--no-progress"]
    tiny += ["--ways", "5", "--shots", "2", "--query", "3", "--validation-episodes", "0"]
    runs = {}
    for method in ("protonet", "maml"):
        runs[method] = tmp_path / method
        argv = ["--method", method, "--synthetic", "--steps", "3", "--output"]
        assert train.main([*argv, str(runs[method]), *tiny]) == 0
    common = ["--episodes", "4", "--no-progress", "--no-hardness"]
    assert evaluate.main(["--run", str(runs["protonet"]), *common, "--batch-norm", "support"]) == 0
    (folder,) = (runs["protonet"] / "eval").iterdir()
    assert "batch-normsupport" in folder.name
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["settings"]["options"] == {"batch_norm": "support"}
    capsys.readouterr()
    assert evaluate.main(["--run", str(runs["maml"]), *common, "--batch-norm", "running"]) != 0
    error = capsys.readouterr().err.strip()
    assert "trained with --batch-norm episode, so it has no running averages" in error
    assert not (runs["maml"] / "eval").exists()


def test_switching_a_learner_matches_one_built_with_that_convention() -> None:
    torch.manual_seed(0)
    running = build_learner(learner_config("protonet", **TINY))
    train = SyntheticEpisodeSource("train", seed=1, config=EPISODES)
    for index in range(3):
        running.fit_episode(train.episode(index))
    support = build_learner(learner_config("protonet", batch_norm="support", **TINY))
    support.load_state_dict(running.state_dict(), strict=False)
    running.switch_batch_norm("support")
    episode = _shifted(SyntheticEpisodeSource("test", seed=5, config=EPISODES).episode(0), 0.3)
    torch.testing.assert_close(running.predict(episode), support.predict(episode))
    assert not any(k.endswith("running_mean") for k in running.state_dict())
