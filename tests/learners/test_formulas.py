"""Pieces of the learners package that have exact answers: prototype classifiers, support-based
initialisation, hardness, ranks with CI ties, Kendall tau, CI formula, backbones, inner loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from learners.evaluation.metrics import (
    average_ranks,
    class_precision,
    difference_inconclusive,
    divergence_slope,
    episode_hardness,
    kendall_tau,
    rank_with_ties,
    summarize_accuracies,
)
from learners.feed.episode_batch import episode_to_tensors
from learners.inference.knn import knn_logits
from learners.methods.matching import matching_log_probs
from learners.nn.backbones import BACKBONES, BackboneConfig, DropBlock, build_backbone
from learners.nn.inner_loop import sgd_adapt
from learners.nn.prototypes import (
    class_prototypes,
    cosine_classifier_logits,
    prototype_linear_layer,
    prototype_logits,
    support_based_init,
)

torch.set_num_threads(1)


def test_prototype_logits_equal_the_linear_layer_form() -> None:
    """Meta-Dataset: -||x - c_k||^2 = 2 c_k.x - ||c_k||^2 - ||x||^2 (W = 2c, b = -||c||^2)."""
    generator = torch.Generator().manual_seed(0)
    support = torch.randn(12, 7, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 3] * 3)
    queries = torch.randn(9, 7, generator=generator, dtype=torch.float64)
    prototypes = class_prototypes(support, labels, 4)
    assert torch.allclose(prototypes[1], support[labels == 1].mean(dim=0))
    weights, bias = prototype_linear_layer(prototypes)
    linear = queries @ weights.t() + bias
    euclidean = prototype_logits(queries, prototypes)
    constant = -(queries**2).sum(dim=1, keepdim=True)  # class-independent
    assert torch.allclose(euclidean, linear + constant)
    assert torch.allclose(euclidean.softmax(dim=1), linear.softmax(dim=1))


def test_support_based_init_classifies_one_shot_support_perfectly() -> None:
    generator = torch.Generator().manual_seed(1)
    for ways in (5, 20, 50):
        support_logits = torch.randn(ways, 64, generator=generator)
        labels = torch.randperm(ways, generator=generator)
        weights, bias = support_based_init(support_logits, labels, ways)
        assert torch.allclose(weights.norm(dim=1), torch.ones(ways))  # eq. 6: unit rows
        assert torch.equal(bias, torch.zeros(ways))
        logits = cosine_classifier_logits(support_logits, weights, bias)
        assert torch.equal(logits.argmax(dim=1), labels)
        assert torch.allclose(logits[torch.arange(ways), labels], torch.ones(ways))  # cos = 1


def test_support_based_init_averages_before_normalising() -> None:
    logits = torch.tensor([[3.0, 0.0], [0.0, 1.0], [-1.0, 5.0]])
    weights, _ = support_based_init(logits, torch.tensor([0, 0, 1]), 2)
    assert torch.allclose(weights[0], torch.tensor([1.5, 0.5]) / math.hypot(1.5, 0.5))
    assert torch.allclose(weights[1], torch.tensor([0.0, 1.0]))  # ReLU before averaging


def separated_episode(ways: int, shots: int, queries: int) -> tuple[torch.Tensor, ...]:
    """Every example of class k is a positive multiple of basis vector e_k."""
    eye = torch.eye(ways)
    support = eye.repeat_interleave(shots, dim=0) * 3.0
    query = eye.repeat_interleave(queries, dim=0) * 0.5
    support_labels = torch.arange(ways).repeat_interleave(shots)
    query_labels = torch.arange(ways).repeat_interleave(queries)
    return support, support_labels, query, query_labels


def test_hardness_of_a_perfectly_separated_episode_is_its_minimum() -> None:
    """Eq. 9 with unit temperature: orthogonal classes give log(N - 1) - 1 for every query
    (non-negative features: no cosine below 0)."""
    for ways in (2, 5, 10):
        support, s_labels, query, q_labels = separated_episode(ways, 3, 4)
        hardness = episode_hardness(support, s_labels, query, q_labels, ways)
        assert hardness == pytest.approx(math.log(ways - 1) - 1.0, abs=1e-5)


def test_hardness_has_no_relu_and_reaches_log_n_minus_1_minus_2() -> None:
    """The paper's phi has no ReLU: cosines reach -1, so a 2-way episode of opposite classes
    gives log(1) - 2; with ReLU (the option) the opposite class collapses to 0 and gives -1."""
    direction = torch.tensor([[1.0, 0.5, -2.0]])
    support = torch.cat([direction, -direction]).repeat_interleave(2, dim=0)
    labels = torch.tensor([0, 0, 1, 1])
    assert episode_hardness(support, labels, support, labels, 2) == pytest.approx(-2.0, abs=1e-6)
    with_relu = episode_hardness(support, labels, support, labels, 2, relu=True)
    assert with_relu == pytest.approx(-1.0, abs=1e-6)


@pytest.mark.parametrize("ways", [3, 5, 10])
def test_hardness_is_the_mean_log_odds_of_the_authors_formula(ways: int) -> None:
    """Omega against a direct numpy transcription of eq. 9 (class means of raw logits,
    normalised; normalised query logits; softmax of cosines), and its lower bound."""
    generator = torch.Generator().manual_seed(ways)
    support = torch.randn(ways * 3, 20, generator=generator)
    query = torch.randn(ways * 4, 20, generator=generator)
    s_labels = torch.arange(ways).repeat_interleave(3)
    q_labels = torch.arange(ways).repeat_interleave(4)
    means = np.stack([support[s_labels == k].numpy().mean(axis=0) for k in range(ways)])
    weights = means / np.linalg.norm(means, axis=1, keepdims=True)
    cosines = (query.numpy() / np.linalg.norm(query.numpy(), axis=1, keepdims=True)) @ weights.T
    p = np.exp(cosines) / np.exp(cosines).sum(axis=1, keepdims=True)
    p_true = p[np.arange(len(q_labels)), q_labels.numpy()]
    expected = float(np.mean(np.log((1 - p_true) / p_true)))
    hardness = episode_hardness(support, s_labels, query, q_labels, ways)
    assert hardness == pytest.approx(expected, abs=1e-5)
    assert hardness >= math.log(ways - 1) - 2


def test_hardness_scale_makes_separated_episodes_very_negative() -> None:
    support, s_labels, query, q_labels = separated_episode(5, 3, 4)
    hardness = episode_hardness(support, s_labels, query, q_labels, 5, scale=30.0)
    assert hardness == pytest.approx(math.log(4) - 30.0, abs=1e-4)
    assert hardness < -25


def test_hardness_of_a_confused_episode_is_higher() -> None:
    ways = 5
    support, s_labels, query, q_labels = separated_episode(ways, 3, 4)
    easy = episode_hardness(support, s_labels, query, q_labels, ways)
    generator = torch.Generator().manual_seed(2)
    mixed = query + 0.6 * torch.rand(query.shape, generator=generator)  # drift to other classes
    wrong = query[torch.roll(torch.arange(len(q_labels)), 4)]  # queries of the next class
    confused = episode_hardness(support, s_labels, mixed, q_labels, ways)
    mislabelled = episode_hardness(support, s_labels, wrong, q_labels, ways)
    assert easy < confused < mislabelled
    # log-odds of a query that sits on another class's direction: log(e^1 + 3 e^0) - 0
    assert mislabelled == pytest.approx(math.log(math.e + 3), abs=1e-5)


# Meta-Dataset Table 2 (appendix): (accuracy, 95% CI, printed rank) per method, every row of
# (a) models trained on ILSVRC-2012 only and (b) on all datasets, and the printed Avg. rank.
METHODS = ["k-NN", "Finetune", "MatchingNet", "ProtoNet", "fo-MAML", "RelationNet", "Proto-MAML"]
TABLE_2 = {
    "ILSVRC only": {
        "ILSVRC": (
            [41.03, 45.78, 45.00, 50.50, 45.51, 34.69, 49.53],
            [1.01, 1.10, 1.10, 1.08, 1.11, 1.01, 1.05],
            [6, 4, 4, 1.5, 4, 7, 1.5],
        ),
        "Omniglot": (
            [37.07, 60.85, 52.27, 59.98, 55.55, 45.35, 63.37],
            [1.15, 1.58, 1.28, 1.35, 1.54, 1.36, 1.33],
            [7, 2.5, 5, 2.5, 4, 6, 1],
        ),
        "Aircraft": (
            [46.81, 68.69, 48.97, 53.10, 56.24, 40.73, 55.95],
            [0.89, 1.26, 0.93, 1.00, 1.11, 0.83, 0.99],
            [6, 1, 5, 4, 2.5, 7, 2.5],
        ),
        "Birds": (
            [50.13, 57.31, 62.21, 68.79, 63.61, 49.51, 68.66],
            [1.00, 1.26, 0.95, 1.01, 1.06, 1.05, 0.96],
            [6.5, 5, 3.5, 1.5, 3.5, 6.5, 1.5],
        ),
        "Textures": (
            [66.36, 69.05, 64.15, 66.56, 68.04, 52.97, 66.49],
            [0.75, 0.90, 0.85, 0.83, 0.81, 0.69, 0.83],
            [4, 1.5, 6, 4, 1.5, 7, 4],
        ),
        "Quick Draw": (
            [32.06, 42.60, 42.87, 48.96, 43.96, 43.30, 51.52],
            [1.08, 1.17, 1.09, 1.08, 1.29, 1.08, 1.00],
            [7, 4.5, 4.5, 2, 4.5, 4.5, 1],
        ),
        "Fungi": (
            [36.16, 38.20, 33.97, 39.71, 32.10, 30.55, 39.96],
            [1.02, 1.02, 1.00, 1.11, 1.10, 1.04, 1.14],
            [4, 3, 5, 1.5, 6, 7, 1.5],
        ),
        "VGG Flower": (
            [83.10, 85.51, 80.13, 85.27, 81.74, 68.76, 87.15],
            [0.68, 0.68, 0.71, 0.77, 0.83, 0.83, 0.69],
            [4, 2.5, 6, 2.5, 5, 7, 1],
        ),
        "Traffic Signs": (
            [44.59, 66.79, 47.80, 47.12, 50.93, 33.67, 48.83],
            [1.19, 1.31, 1.14, 1.10, 1.51, 1.05, 1.09],
            [6, 1, 3.5, 5, 2, 7, 3.5],
        ),
        "MSCOCO": (
            [30.38, 34.86, 34.99, 41.00, 35.30, 29.15, 43.74],
            [0.99, 0.97, 1.00, 1.10, 1.23, 1.01, 1.12],
            [6.5, 4, 4, 2, 4, 6.5, 1],
        ),
    },
    "all datasets": {
        "ILSVRC": (
            [38.55, 43.08, 36.08, 44.50, 37.83, 30.89, 46.52],
            [0.94, 1.08, 1.00, 1.05, 1.01, 0.93, 1.05],
            [4.5, 2.5, 6, 2.5, 4.5, 7, 1],
        ),
        "Omniglot": (
            [74.60, 71.11, 78.25, 79.56, 83.92, 86.57, 82.69],
            [1.08, 1.37, 1.01, 1.12, 0.95, 0.79, 0.97],
            [6, 7, 4.5, 4.5, 2.5, 1, 2.5],
        ),
        "Aircraft": (
            [64.98, 72.03, 69.17, 71.14, 76.41, 69.71, 75.23],
            [0.82, 1.07, 0.96, 0.86, 0.69, 0.83, 0.76],
            [7, 3.5, 5.5, 3.5, 1, 5.5, 2],
        ),
        "Birds": (
            [66.35, 59.82, 56.40, 67.01, 62.43, 54.14, 69.88],
            [0.92, 1.15, 1.00, 1.02, 1.08, 0.99, 1.02],
            [2.5, 5, 6, 2.5, 4, 7, 1],
        ),
        "Textures": (
            [63.58, 69.14, 61.80, 65.18, 64.14, 56.56, 68.25],
            [0.79, 0.85, 0.74, 0.84, 0.83, 0.73, 0.81],
            [5, 1.5, 6, 3.5, 3.5, 7, 1.5],
        ),
        "Quick Draw": (
            [44.88, 47.05, 60.81, 64.88, 59.73, 61.75, 66.84],
            [1.05, 1.16, 1.03, 0.89, 1.10, 0.97, 0.94],
            [7, 6, 3.5, 2, 5, 3.5, 1],
        ),
        "Fungi": (
            [37.12, 38.16, 33.70, 40.26, 33.54, 32.56, 41.99],
            [1.06, 1.04, 1.04, 1.13, 1.11, 1.08, 1.17],
            [3.5, 3.5, 6, 2, 6, 6, 1],
        ),
        "VGG Flower": (
            [83.47, 85.28, 81.90, 86.85, 79.94, 76.08, 88.72],
            [0.61, 0.69, 0.72, 0.71, 0.84, 0.76, 0.67],
            [4, 3, 5, 2, 6, 7, 1],
        ),
        "Traffic Signs": (
            [40.11, 66.74, 55.57, 46.48, 42.91, 37.48, 52.42],
            [1.10, 1.23, 1.08, 1.00, 1.31, 0.93, 1.08],
            [6, 1, 2, 4, 5, 7, 3],
        ),
        "MSCOCO": (
            [29.55, 35.17, 28.79, 39.87, 29.37, 27.41, 41.74],
            [0.96, 1.08, 0.96, 1.06, 1.08, 0.89, 1.13],
            [5, 3, 5, 2, 5, 7, 1],
        ),
    },
}
TABLE_2_AVERAGE = {
    "ILSVRC only": [5.7, 2.9, 4.65, 2.65, 3.7, 6.55, 1.85],
    "all datasets": [5.05, 3.6, 4.95, 2.85, 4.25, 5.8, 1.5],
}


def table_2(training: str) -> dict[str, dict[str, tuple[float, float]]]:
    return {
        source: {m: (a, c) for m, a, c in zip(METHODS, means, cis)}
        for source, (means, cis, _) in TABLE_2[training].items()
    }


@pytest.mark.parametrize("training", sorted(TABLE_2))
def test_ranks_reproduce_every_row_of_meta_dataset_table_2(training: str) -> None:
    table = table_2(training)
    for source, (_, _, printed) in TABLE_2[training].items():
        ranks = rank_with_ties(table[source])
        assert [ranks[m] for m in METHODS] == printed, source
    _, average = average_ranks(table)
    assert [round(average[m], 2) for m in METHODS] == TABLE_2_AVERAGE[training]


def test_the_leader_ties_with_every_inconclusive_method_not_only_its_neighbours() -> None:
    """The reference rule: C (77 +- 5) ties with the leader A although B sits between them."""
    ranks = rank_with_ties({"A": (80.0, 0.5), "B": (78.0, 0.3), "C": (77.0, 5.0)})
    assert ranks == {"A": 1.5, "B": 3.0, "C": 1.5}
    # after the leader's group is ranked, the best remaining method leads the next group
    ranks = rank_with_ties(
        {"A": (90.0, 0.1), "B": (80.0, 0.5), "C": (78.0, 0.3), "D": (77.0, 5.0), "E": (60.0, 0.1)}
    )
    assert ranks == {"A": 1.0, "B": 2.5, "C": 4.0, "D": 2.5, "E": 5.0}


def test_rank_ties_follow_the_confidence_interval_rule() -> None:
    # the rule itself: a tie exactly when |a - b| <= sqrt(ci_a^2 + ci_b^2)
    assert difference_inconclusive(50.0, 3.0, 55.0, 4.0)  # 5 <= 5
    assert not difference_inconclusive(50.0, 3.0, 55.01, 4.0)
    assert rank_with_ties({"a": (0.9, 0.01), "b": (0.5, 0.01), "c": (0.1, 0.01)}) == {
        "a": 1.0,
        "b": 2.0,
        "c": 3.0,
    }
    assert set(rank_with_ties({"a": (0.5, 0.1), "b": (0.5, 0.1)}).values()) == {1.5}


def test_average_rank_is_the_mean_over_sources_and_needs_the_same_methods() -> None:
    table = table_2("all datasets")
    per_source, average = average_ranks(table)
    assert average["ProtoNet"] == pytest.approx(np.mean([per_source[s]["ProtoNet"] for s in table]))
    assert sum(average.values()) == pytest.approx(sum(range(1, 8)))  # ranks sum to 1+..+7
    table["Textures"].pop("k-NN")
    with pytest.raises(ValueError, match="Textures"):
        average_ranks(table)


def test_kendall_tau_of_identical_and_reversed_rankings() -> None:
    scores = [0.61, 0.64, 0.63, 0.70, 0.52]
    assert kendall_tau(scores, scores) == pytest.approx(1.0)
    assert kendall_tau(scores, [-s for s in scores]) == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 30), rng.integers(0, 5, 30)  # with ties: tau-b
    assert kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic)
    with pytest.raises(ValueError):
        kendall_tau([1.0], [1.0])


def test_accuracy_summary_uses_the_ci_formula() -> None:
    values = np.array([0.2, 0.4, 0.4, 0.6, 1.0, 0.8])
    summary = summarize_accuracies(values)
    assert summary.mean == pytest.approx(values.mean())
    assert summary.std == pytest.approx(values.std(ddof=1))
    assert summary.ci95 == pytest.approx(1.96 * values.std(ddof=1) / math.sqrt(len(values)))
    assert summarize_accuracies([0.5]).ci95 == 0.0
    with pytest.raises(ValueError):
        summarize_accuracies([])


def test_divergence_slope_recovers_a_linear_trend() -> None:
    divergences = [0.04, 0.2, 0.5, 0.96]
    accuracies = [70.0 - 11.5 * r for r in divergences]
    assert divergence_slope(divergences, accuracies) == pytest.approx(-11.5)


def test_class_precision_counts_predictions_per_way() -> None:
    predictions = np.array([0, 0, 1, 1, 1, 0])
    labels = np.array([0, 1, 1, 1, 2, 0])
    precision = class_precision(predictions, labels, 3)
    assert precision[0] == pytest.approx(2 / 3)
    assert precision[1] == pytest.approx(2 / 3)
    assert math.isnan(precision[2])  # never predicted


def test_knn_votes_and_ties() -> None:
    support = torch.tensor([[0.0], [1.0], [2.0], [10.0]])
    labels = torch.tensor([0, 0, 1, 1])
    query = torch.tensor([[0.1], [9.0], [1.6]])
    assert knn_logits(query, support, labels, 2, k=1).argmax(1).tolist() == [0, 1, 1]
    # k=2 for x=1.6: neighbours 2.0 (class 1) then 1.0 (class 0): tie goes to the nearer
    assert knn_logits(query, support, labels, 2, k=2).argmax(1).tolist() == [0, 1, 1]
    assert knn_logits(query, support, labels, 2, k=3).argmax(1).tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="metric"):
        knn_logits(query, support, labels, 2, metric="manhattan")


def test_matching_probabilities_are_attention_sums() -> None:
    generator = torch.Generator().manual_seed(3)
    support, query = torch.randn(6, 4, generator=generator), torch.randn(3, 4, generator=generator)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    log_p = matching_log_probs(query, support, labels, 3, scale=1.0)
    attention = torch.nn.functional.cosine_similarity(
        query.unsqueeze(1), support.unsqueeze(0), dim=-1
    ).softmax(dim=1)
    expected = torch.stack([attention[:, labels == k].sum(1) for k in range(3)], dim=1)
    assert torch.allclose(log_p.exp(), expected, atol=1e-6)
    assert torch.allclose(log_p.exp().sum(1), torch.ones(3))


def test_inner_loop_first_and_second_order_gradients() -> None:
    """f(w) = (a w)^2, one SGD step w' = w - lr 2 a^2 w; query loss q(w') = w'."""
    a, lr = 1.5, 0.1
    for first_order, expected in ((False, 1 - lr * 2 * a * a), (True, 1.0)):
        w = torch.tensor(2.0, requires_grad=True)
        adapted = sgd_adapt(lambda p: (a * p["w"]) ** 2, {"w": w}, 1, lr, first_order)
        (grad,) = torch.autograd.grad(adapted["w"], w)
        assert adapted["w"].item() == pytest.approx(2.0 - lr * 2 * a * a * 2.0)
        assert grad.item() == pytest.approx(expected)


@pytest.mark.parametrize("name", BACKBONES)
def test_backbones_give_one_feature_vector_per_image(name: str) -> None:
    width = 0.125 if name == "wrn28_10" else 0.25
    backbone = build_backbone(BackboneConfig(name=name, image_size=32, width=width, dropblock=True))
    features = backbone(torch.randn(3, 3, 32, 32))
    assert features.shape == (3, backbone.out_dim)
    assert backbone.feature_map(torch.randn(2, 3, 32, 32)).shape[1] == backbone.feature_channels


def test_backbone_state_dict_keys_are_the_ones_saved_checkpoints_hold() -> None:
    """Runs saved earlier load by these names: CNN4's layers and ResNet-12's blocks sit at
    `blocks.i` (CNN4: conv, BatchNorm, ReLU, max-pool per block)."""
    cnn4 = list(build_backbone(BackboneConfig(name="cnn4", image_size=32, width=0.25)).state_dict())
    conv, norm = ["weight", "bias"], ["weight", "bias", "running_mean", "running_var"]
    expected = []
    for block in range(4):
        expected += [f"blocks.{4 * block}.{name}" for name in conv]
        expected += [f"blocks.{4 * block + 1}.{name}" for name in norm + ["num_batches_tracked"]]
    assert cnn4 == expected
    resnet12 = build_backbone(BackboneConfig(name="resnet12", image_size=32, width=0.25))
    keys = list(resnet12.state_dict())
    assert len(keys) == 96 and {key.split(".")[0] for key in keys} == {"blocks"}
    assert keys[:3] == [f"blocks.0.convs.{i}.weight" for i in range(3)]
    assert "blocks.3.shortcut.1.running_var" in keys


@pytest.mark.slow
def test_full_size_backbones_have_the_published_feature_sizes() -> None:
    sizes = {"cnn4": 64 * 5 * 5, "resnet12": 640, "resnet18": 512, "wrn28_10": 640}
    for name, size in sizes.items():
        assert build_backbone(BackboneConfig(name=name, image_size=84)).out_dim == size
    wrn = build_backbone(BackboneConfig(name="wrn-28-10", image_size=32))
    assert sum(p.numel() for p in wrn.parameters()) == pytest.approx(36.5e6, rel=0.01)
    with pytest.raises(ValueError, match="unknown backbone"):
        build_backbone(BackboneConfig(name="vgg"))


def test_dropblock_drops_square_blocks_only_in_training() -> None:
    torch.manual_seed(0)
    block = DropBlock(drop_rate=0.3, block_size=3)
    maps = torch.ones(4, 8, 10, 10)
    block.eval()
    assert torch.equal(block(maps), maps)
    block.train()
    out = block(maps)
    dropped = (out == 0).float().mean().item()
    assert 0.1 < dropped < 0.6
    assert out.sum().item() == pytest.approx(maps.sum().item(), rel=1e-4)  # rescaled


def test_episode_conversion_and_clear_errors() -> None:
    rng = np.random.default_rng(0)
    episode = {
        "support_images": rng.integers(0, 256, (4, 8, 8, 3), dtype=np.uint8),
        "support_labels": np.array([0, 1, 1, 2]),
        "support_class_ids": np.array([7, 9, 9, 3]),
        "query_images": rng.random((2, 8, 8, 3), dtype=np.float32),
        "query_labels": np.array([2, 0]),
        "query_class_ids": np.array([3, 7]),
        "source": "toy",
    }
    ep = episode_to_tensors(episode, "cpu", image_size=16)
    assert ep.support_images.shape == (4, 3, 16, 16) and ep.query_images.dtype == torch.float32
    assert ep.ways == 3 and ep.shots.tolist() == [1, 2, 1]
    with pytest.raises(ValueError, match="missing ways"):
        episode_to_tensors({**episode, "support_labels": np.array([0, 2, 2, 3])})
    with pytest.raises(ValueError, match="query_labels"):
        episode_to_tensors({**episode, "query_labels": np.array([5, 0])})
    with pytest.raises(KeyError, match="query_images"):
        episode_to_tensors({k: v for k, v in episode.items() if k != "query_images"})
