"""ATG (ATG paper §4, App. A.6): objective, divergence control, assignment rule, CLI."""

import math

import numpy as np
import pytest
import torch

from episodes.records.dataset_spec import DatasetSpec
from episodes.records.split_file import SplitFile
from episodes.records.split_sizes import split_counts
from splits import make
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.methods.atg.algorithm import (
    ATGFailure,
    assign_splits,
    atg_objective,
    atg_split_file,
    fit_centroids,
    initial_centroids,
    normalise_rows,
    reachable_check,
    run_atg,
)
from splits.methods.atg.config import ATGConfig
from splits.methods.atg.divergences import (
    class_log_probs,
    gaussian_kl,
    gaussian_wasserstein2,
    kl_divergence,
    symmetric_kl,
)

TARGETS = (0.04, 0.32, 0.64, 0.96)
ITERATIONS = 800


def clustered_embeddings(n=100, d=32, clusters=5, noise=0.5, seed=0):
    """Unit-normalised class embeddings drawn around a few random cluster centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d))
    x = centres[np.arange(n) % clusters] + noise * rng.normal(size=(n, d))
    return normalise_rows(x)


@pytest.fixture(scope="module")
def unit():
    return clustered_embeddings()


@pytest.fixture(scope="module")
def runs(unit):
    torch.set_num_threads(1)
    return {r: run_atg(unit, ATGConfig(r, iterations=ITERATIONS)) for r in TARGETS}


@pytest.mark.slow
def test_achieved_divergence_within_five_percent(runs):
    for r, res in runs.items():
        assert abs(res.achieved_divergence - r) <= 0.05 * r, (r, res.achieved_divergence)


def test_larger_r_puts_centroids_farther_apart(runs):
    gaps = [np.linalg.norm(runs[r].centroids[0] - runs[r].centroids[1]) for r in TARGETS]
    assert all(a < b for a, b in zip(gaps, gaps[1:])), gaps


def test_split_sizes_follow_floor_rule(runs, unit):
    for res in runs.values():
        assert (len(res.train), len(res.valid), len(res.test)) == (60, 20, 20)
        together = np.concatenate([res.train, res.valid, res.test])
        assert sorted(together.tolist()) == list(range(len(unit)))


def test_assignment_follows_scores_and_alternates(runs):
    for res in runs.values():
        score = res.scores
        assert score[res.train].min() >= max(score[res.valid].max(), score[res.test].max())
        rest = np.concatenate([res.test, res.valid])
        ordered = rest[np.argsort(score[rest], kind="stable")]  # most test-like first
        expected_test = set(ordered[0::2].tolist())
        assert set(res.test.tolist()) == expected_test


def test_published_counts_follow_the_rule():
    assert split_counts(158, (0.6, 0.2, 0.2)) == (96, 31, 31)
    assert split_counts(62, (0.6, 0.2, 0.2)) == (38, 12, 12)
    assert split_counts(100, (0.6, 0.2, 0.2)) == (60, 20, 20)
    assert split_counts(608, (0.6, 0.2, 0.2)) == (366, 121, 121)
    assert split_counts(100, (0.7, 0.15, 0.15)) == (70, 15, 15)


def test_alternation_with_known_scores_and_unequal_sizes():
    scores = np.arange(10, dtype=float)  # class 9 most train-like, class 0 most test-like
    tie = np.arange(10)
    train, valid, test = assign_splits(scores, (4, 3, 3), tie)
    assert train.tolist() == [9, 8, 7, 6]
    assert test.tolist() == [0, 2, 4] and valid.tolist() == [1, 3, 5]
    train, valid, test = assign_splits(scores, (5, 1, 4), tie)
    assert test.tolist() == [0, 2, 3, 4] and valid.tolist() == [1]


def test_ties_are_broken_by_the_permutation():
    scores = np.zeros(6)
    a = assign_splits(scores, (2, 2, 2), np.array([5, 4, 3, 2, 1, 0]))
    b = assign_splits(scores, (2, 2, 2), np.array([0, 1, 2, 3, 4, 5]))
    assert a[0].tolist() == [5, 4] and b[0].tolist() == [0, 1]


def test_r_zero_is_random_stable_per_seed_and_different_across_seeds(unit):
    def run(seed):
        return run_atg(unit, ATGConfig(0.0, iterations=50, seed=seed))

    first, again, other = run(1), run(1), run(2)
    assert np.array_equal(first.centroids[0], first.centroids[1])
    assert np.all(first.scores == 0) and first.achieved_divergence == 0
    assert first.train.tolist() == again.train.tolist()
    assert first.test.tolist() == again.test.tolist()
    assert set(first.train.tolist()) != set(other.train.tolist())


def test_objective_matches_the_formula(unit):
    rng = np.random.default_rng(4)
    mu = rng.normal(size=(2, unit.shape[1])) * 0.3
    r = 0.3
    logits = -((unit[None, :, :] - mu[:, None, :]) ** 2).sum(-1)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    skl = np.sum(p[0] * np.log(p[0] / p[1])) + np.sum(p[1] * np.log(p[1] / p[0]))
    for reduction, reduce in (("mean", np.mean), ("sum", np.sum)):
        expected = -reduce(np.log(0.5 * (p[0] + p[1]))) + 2.0 * (skl - r) ** 2
        config = ATGConfig(r, lam=2.0, nll_reduction=reduction)
        j, d, _ = atg_objective(torch.from_numpy(unit), torch.from_numpy(mu), config)
        assert math.isclose(float(d), skl, rel_tol=1e-9)
        assert math.isclose(float(j), expected, rel_tol=1e-9)


def test_divergence_formulas():
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(7, 4)))
    lp = class_log_probs(x, torch.from_numpy(rng.normal(size=(2, 4))))
    assert torch.allclose(lp.exp().sum(1), torch.ones(2, dtype=torch.float64))
    assert torch.isclose(
        symmetric_kl(lp[0], lp[1]), kl_divergence(lp[0], lp[1]) + kl_divergence(lp[1], lp[0])
    )
    m0, m1 = torch.zeros(3, dtype=torch.float64), torch.tensor([3.0, 4.0, 0.0], dtype=torch.float64)
    c = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    assert math.isclose(float(gaussian_wasserstein2(m0, c, m1, c)), 5.0, rel_tol=1e-9)
    # 1-D check: W2^2 = dm^2 + (s0 - s1)^2; KL = log(s1/s0) + (s0^2 + dm^2)/(2 s1^2) - 1/2.
    a, b = torch.tensor([[4.0]], dtype=torch.float64), torch.tensor([[9.0]], dtype=torch.float64)
    z, one = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    assert math.isclose(float(gaussian_wasserstein2(z, a, one, b)), math.sqrt(1 + 1), rel_tol=1e-9)
    expected_kl = math.log(3 / 2) + (4 + 1) / (2 * 9) - 0.5
    assert math.isclose(float(gaussian_kl(z, a, one, b)), expected_kl, rel_tol=1e-9)


def test_fast_class_dot_matches_autograd():
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.normal(size=(30, 5)))
    mu = torch.from_numpy(rng.normal(size=(2, 5))).requires_grad_(True)
    fast = lambda m: class_log_probs(x, m, None, x.T.contiguous())  # noqa: E731
    assert torch.allclose(fast(mu), class_log_probs(x, mu))
    assert torch.autograd.gradcheck(fast, (mu,))


@pytest.mark.slow
@pytest.mark.parametrize("divergence", ["kl", "euclidean", "wasserstein2"])
def test_other_divergences_reach_their_target(divergence):
    unit = clustered_embeddings(n=40, d=8, clusters=4)
    res = run_atg(unit, ATGConfig(0.32, divergence=divergence, iterations=600))
    assert abs(res.achieved_divergence - 0.32) <= 0.05 * 0.32


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(target_divergences=-0.1), "R must be a finite number >= 0"),
        (dict(target_divergences=float("nan")), "R must be a finite number >= 0"),
        (dict(fractions=(0.5, 0.2, 0.2)), "must sum to 1"),
        (dict(divergence="hellinger"), "not one of"),
        (dict(lam=-1.0), "lambda must be >= 0"),
    ],
)
def test_bad_config_is_rejected(kw, message):
    args = dict(target_divergences=0.3)
    args.update(kw)
    with pytest.raises(ValueError, match=message):
        ATGConfig(**args).validate()


def test_too_few_classes_is_rejected_before_fitting():
    with pytest.raises(ValueError, match="2 classes are too few"):
        run_atg(clustered_embeddings(n=2, d=3), ATGConfig(0.3))


def _write_embeddings(path, n=30, d=8, nan=False):
    x = clustered_embeddings(n=n, d=d, clusters=3).astype(np.float32)
    if nan:
        x[3, 2] = np.nan
    np.savez(
        path,
        class_names=np.array([f"k{i:02d}" for i in range(n)]),
        embeddings=x,
        model=np.array("toy"),
        weights_hash=np.array("w0"),
    )
    return path


@pytest.mark.slow
def test_cli_sweep_writes_one_file_per_r(tmp_path, capsys):
    emb = _write_embeddings(tmp_path / "toy.npz")
    out = tmp_path / "out"
    code = make.main(
        [
            "--method",
            "atg",
            "--embeddings",
            str(emb),
            "--divergence",
            "0.04",
            "0.32",
            "0.64",
            "0.96",
            "--iterations",
            "300",
            "--output",
            str(out),
            "--quiet",
            "--dataset-name",
            "toy",
        ]
    )
    assert code == 0
    files = sorted(out.glob("*.json"))
    assert len(files) == 4
    embeddings = EmbeddingsFile.load(emb)
    for path in files:
        split = SplitFile.load(path)
        assert split.method == "atg" and split.dataset == "toy"
        assert split.embedding_hash == embeddings.content_hash()
        assert split.sizes() == {"train": 18, "valid": 6, "test": 6}
        for key in ("R", "lambda", "divergence", "iterations", "seed"):
            assert key in split.parameters
        assert split.final_objective is not None and split.achieved_divergence is not None
        assert len(split.centroids["train"]) == 8
    rs = sorted(SplitFile.load(p).parameters["R"] for p in files)
    assert rs == [0.04, 0.32, 0.64, 0.96]
    # Same inputs, same bytes.
    again = tmp_path / "again"
    make.main(
        [
            "--method",
            "atg",
            "--embeddings",
            str(emb),
            "--divergence",
            "0.32",
            "--iterations",
            "300",
            "--output",
            str(again),
            "--quiet",
            "--dataset-name",
            "toy",
        ]
    )
    name = "atg_symmetric_kl_R0.32_seed0.json"
    assert (again / name).read_bytes() == (out / name).read_bytes()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--divergence", "-1"], "R must be a finite number >= 0"),
        (["--divergence", "0.3", "--fractions", "0.5", "0.3", "0.3"], "must sum to 1"),
    ],
)
def test_cli_rejects_bad_values(tmp_path, capsys, extra, message):
    emb = _write_embeddings(tmp_path / "toy.npz")
    args = ["--method", "atg", "--embeddings", str(emb), *extra, "--output", str(tmp_path)]
    assert make.main(args) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


def test_cli_rejects_nan_few_classes_and_foreign_class_names(tmp_path, capsys):
    nan = _write_embeddings(tmp_path / "nan.npz", nan=True)
    assert make.main(["--method", "atg", "--embeddings", str(nan), "--divergence", "0.3"]) == 2
    assert "NaN" in capsys.readouterr().err
    small = _write_embeddings(tmp_path / "small.npz", n=2)
    assert make.main(["--method", "atg", "--embeddings", str(small), "--divergence", "0.3"]) == 2
    assert "too few" in capsys.readouterr().err
    good = _write_embeddings(tmp_path / "good.npz")
    spec = DatasetSpec(
        name="toy", class_names=[f"other{i}" for i in range(30)], images_per_class=[5] * 30
    )
    spec.save(tmp_path)
    assert (
        make.main(
            ["--method", "atg", "--embeddings", str(good), "--divergence", "0.3"]
            + ["--dataset", str(tmp_path)]
        )
        == 2
    )
    assert "class names differ from the spec's" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# Restarts, lambda_eff, and what is never saved (issue 14 item 6, issue 13 item 7)


def test_restarts_keep_the_lowest_objective_that_reaches_r(unit):
    config = ATGConfig(0.32, iterations=ITERATIONS, restarts=5)
    fit = fit_centroids(unit, config)
    assert fit.centroids.shape == (5, 2, unit.shape[1]) and fit.objectives.shape == (5,)
    ok = [k for k, state in enumerate(fit.status(config)) if state == "ok"]
    assert fit.chosen == min(ok, key=lambda k: fit.objectives[k])
    starts, _ = initial_centroids(unit, config)
    assert len({tuple(np.round(s[0], 12)) for s in starts}) == 5  # five different starts
    result = run_atg(unit, config)
    spread = result.restarts
    assert spread["count"] == 5 and spread["chosen"] == fit.chosen
    assert result.final_objective == min(spread["objectives"][k] for k in ok)
    assert spread["objective_spread"] == pytest.approx(
        np.ptp([spread["objectives"][k] for k in ok])
    )
    assert spread["same_split_share"][fit.chosen] == 1.0
    assert min(spread["same_split_share"]) < 1.0  # the starts do find different partitions


def test_one_restart_is_the_single_centred_start(unit):
    one = run_atg(unit, ATGConfig(0.32, iterations=200, restarts=1))
    several = run_atg(unit, ATGConfig(0.32, iterations=200, restarts=3))
    assert one.restarts["count"] == 1 and ATGConfig(0.32).restarts > 1
    first = fit_centroids(unit, ATGConfig(0.32, iterations=200, restarts=3))
    assert np.allclose(first.centroids[0], one.centroids, atol=1e-5)
    assert several.final_objective <= one.final_objective + 1e-12


def test_reference_init_draws_standard_normal_starts(unit):
    config = ATGConfig(0.32, iterations=400, init="reference", restarts=3)
    starts, _ = initial_centroids(unit, config)
    assert starts.shape == (3, 2, unit.shape[1])
    assert abs(np.linalg.norm(starts[0, 0]) - math.sqrt(unit.shape[1])) < 3
    assert np.isfinite(fit_centroids(unit, config).objectives).all()


def test_split_file_labels_the_effective_lambda(tmp_path):
    emb = EmbeddingsFile.load(_write_embeddings(tmp_path / "toy.npz", n=30))
    mean = atg_split_file(emb, ATGConfig(0.32, iterations=200, restarts=2), "toy")
    assert mean.parameters["lambda"] == 1.0 and mean.parameters["lambda_effective"] == 30.0
    assert "mean over the M=30 classes" in mean.parameters["likelihood"]
    assert mean.parameters["restarts"]["count"] == 2
    config = ATGConfig(0.0, lam=2.0, nll_reduction="sum", iterations=10, restarts=2)
    literal = atg_split_file(emb, config, "toy")
    assert literal.parameters["lambda_effective"] == 2.0
    assert literal.parameters["likelihood"].startswith("sum")


def test_a_diverged_or_missed_run_is_a_failure_not_a_split(unit):
    with pytest.raises(ATGFailure, match="all 4 starts diverged"):
        run_atg(unit, ATGConfig(30.0, iterations=600))
    # Five steps leave both starts far short of R: reported, not saved.
    with pytest.raises(ATGFailure, match=r"no start reached R within 5% \(closest achieved"):
        run_atg(unit, ATGConfig(0.96, iterations=5, restarts=2))


@pytest.mark.slow
def test_reachable_check_names_the_reachable_range(unit):
    reachable_check(unit, ATGConfig(0.96))
    reachable_check(unit, ATGConfig(0.0))
    with pytest.raises(ATGFailure, match=r"R=100 is outside the reachable range") as info:
        reachable_check(unit, ATGConfig(100.0))
    top = float(str(info.value).split("R about [0, ")[1].split("]")[0])
    assert 0.96 <= top < 100
    with pytest.raises(ValueError, match="restarts must be an integer >= 1"):
        ATGConfig(0.3, restarts=0).validate()
    with pytest.raises(ValueError, match="init 'zeros'"):
        ATGConfig(0.3, init="zeros").validate()
