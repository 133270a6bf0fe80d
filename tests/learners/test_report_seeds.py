"""learners.report with seeds as a dimension: runs that differ only in --seed are averaged, the
spread across seeds printed beside the episode CI; `divergence` with one --label per R."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import pytest

from learners import report
from learners.evaluation.metrics import divergence_slope, rank_with_ties, t_95


def _evaluation(
    tmp: Path,
    name: str,
    seed: int,
    r: float,
    accuracy: float,
    label: str,
    per_source: dict[str, tuple[float, float, int]] | None = None,
    lr: float = 1e-3,
) -> str:
    """A learners.evaluate folder (summary.json) of a run folder (config.json) trained with
    `seed` and learning rate `lr`, on a split of divergence `r`; `per_source` maps a test
    source to its (mean, ci95, episodes)."""
    run = tmp / "runs" / name
    run.mkdir(parents=True)
    config = {
        "seed": seed,
        "learner": {"method": "multiclass", "lr": lr},
        "split_file": f"R{r}.json",
    }
    (run / "config.json").write_text(json.dumps(config))
    out = tmp / "evals" / name
    out.mkdir(parents=True)
    summary = {
        "label": label,
        "method": "multiclass",
        "inference": None,
        "split_R": r,
        "accuracy": {"mean": accuracy, "ci95": 0.004, "std": 0.05, "n": 600},
        "per_source": {
            source: {"mean": mean, "ci95": ci, "std": 0.05, "n": n}
            for source, (mean, ci, n) in (per_source or {}).items()
        },
        "settings": {"run": str(run), "run_name": name, "split": "test", "episodes": 600},
    }
    (out / "summary.json").write_text(json.dumps(summary))
    return str(out)


def test_divergence_with_one_label_per_r_groups_by_method(tmp_path, capsys) -> None:
    curve = {0.04: 0.937, 0.32: 0.924, 0.64: 0.905, 0.96: 0.931}
    evals = [
        _evaluation(tmp_path, f"r{r}", 0, r, acc, f"multiclass R={r}") for r, acc in curve.items()
    ]
    assert report.main(["divergence", *evals]) == 0
    out = capsys.readouterr().out
    slope = float(out.split("slope ")[1].split()[0])
    expected = divergence_slope(list(curve), [100 * a for a in curve.values()])
    assert slope == pytest.approx(expected, abs=0.005)
    assert out.startswith("multiclass: slope") and "(4 splits)" in out
    assert report.main(["divergence", *evals, "--group-by", "label"]) != 0  # one point each
    assert "a slope needs two values of R" in capsys.readouterr().err


def test_seeds_are_averaged_per_r_with_their_spread(tmp_path, capsys) -> None:
    accuracies = {(0.04, 0): 0.93, (0.04, 1): 0.95, (0.96, 0): 0.90, (0.96, 1): 0.94}
    evals = [
        _evaluation(tmp_path, f"r{r}-s{seed}", seed, r, acc, f"R={r} seed {seed}")
        for (r, seed), acc in accuracies.items()
    ]
    assert report.main(["divergence", *evals]) == 0
    out = capsys.readouterr().out
    slope = float(out.split("slope ")[1].split()[0])
    assert slope == pytest.approx((92.0 - 94.0) / 0.92, abs=0.005)  # through the seed means
    first = next(line for line in out.splitlines() if "R=0.04" in line)
    assert first.strip().startswith("R=0.04: 94.00")
    assert f"std {math.sqrt(2):.2f}" in first and "[0, 1]" in first and "+-0.40" in first


def test_seeds_report_groups_runs_that_differ_only_in_seed(tmp_path, capsys) -> None:
    evals = [
        _evaluation(tmp_path, "a-s0", 0, 0.5, 0.80, "A"),
        _evaluation(tmp_path, "a-s1", 1, 0.5, 0.84, "A"),
        _evaluation(tmp_path, "a-s2", 2, 0.5, 0.82, "A"),
    ]
    other = _evaluation(tmp_path, "b-s0", 0, 0.5, 0.60, "B")
    config = json.loads((tmp_path / "runs" / "b-s0" / "config.json").read_text())
    config["learner"]["lr"] = 1e-2  # another configuration, not another seed
    (tmp_path / "runs" / "b-s0" / "config.json").write_text(json.dumps(config))
    assert report.main(["seeds", *evals, other]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("A: 82.00") and "3 seed(s) [0, 1, 2]: std 2.00" in lines[0]
    assert lines[1].startswith("B: 60.00 (episode CI +-")
    assert "1 seed [0]: the spread across seeds needs 2+ seeds" in lines[1]
    assert "CI +-0.00" not in lines[1] and "std 0.00" not in lines[1]  # no spread of one value
    assert report.main(["seeds", evals[0], evals[0]]) != 0
    assert "repeat a training seed" in capsys.readouterr().err


# --- ranks: one column per configuration --------------------------------------------------

SOURCES = ("omniglot/test", "aircraft/test", "cu_birds/test")


def _one_seed_each(tmp: Path) -> list[str]:
    """Three configurations (learning rates) evaluated once each, two sharing the label 'maml'
    (so their columns are told apart by folder); paths relative to `tmp`."""
    cells = {
        ("protonet", 1e-3): ((0.90, 0.01, 600), (0.60, 0.02, 600), (0.70, 0.02, 600)),
        ("maml-a", 1e-2): ((0.88, 0.01, 600), (0.65, 0.02, 600), (0.69, 0.03, 600)),
        ("maml-b", 1e-1): ((0.80, 0.02, 600), (0.50, 0.03, 600), (0.72, 0.02, 600)),
    }
    evals = []
    for (name, lr), values in cells.items():
        label = name.split("-")[0]
        folder = _evaluation(tmp, name, 0, 0.5, 0.7, label, dict(zip(SOURCES, values)), lr)
        evals.append(str(Path(folder).relative_to(tmp)))
    return evals


# `ranks` of _one_seed_each as commit 8925f1f printed it (one column per evaluation then).
ONE_SEED_EACH_TABLE = """\
Test Source    maml [evals/maml-a]  maml [evals/maml-b]  protonet
omniglot/test  88.00 +- 1.00 (2)    80.00 +- 2.00 (3)    90.00 +- 1.00 (1)
aircraft/test  65.00 +- 2.00 (1)    50.00 +- 3.00 (3)    60.00 +- 2.00 (2)
cu_birds/test  69.00 +- 3.00 (2)    72.00 +- 2.00 (2)    70.00 +- 2.00 (2)
Avg. rank      1.67                 2.67                 1.67
"""


def test_ranks_of_one_evaluation_per_configuration_are_unchanged(
    tmp_path, monkeypatch, capsys
) -> None:
    evals = _one_seed_each(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert report.main(["ranks", *evals]) == 0
    assert capsys.readouterr().out == ONE_SEED_EACH_TABLE
    assert report.main(["ranks", "--per-run", *evals]) == 0
    assert capsys.readouterr().out == ONE_SEED_EACH_TABLE


# ProtoNet trained with seeds 0, 1, 2 (each seed's evaluation with its own number of episodes
# per source) and MAML with one seed: (mean, ci95, episodes) per source.
T_975_2DF = 4.302653  # Student's t quantile, 0.975, 2 degrees of freedom
PROTONET_SEEDS = {
    "omniglot/test": ((0.90, 0.010, 600), (0.92, 0.012, 300), (0.94, 0.020, 100)),
    "aircraft/test": ((0.60, 0.020, 600), (0.61, 0.020, 600), (0.62, 0.020, 600)),
    "cu_birds/test": ((0.70, 0.020, 600), (0.80, 0.020, 600), (0.75, 0.020, 600)),
}
MAML = {"omniglot/test": (0.85, 0.005, 600), "aircraft/test": (0.66, 0.01, 600)}
MAML["cu_birds/test"] = (0.70, 0.01, 600)


def _three_seeds_and_one(tmp: Path, sources: Sequence[str] = tuple(PROTONET_SEEDS)) -> list[str]:
    """Evaluation folders (relative to `tmp`) of protonet seeds 0-2 and maml (another lr); the
    last seed is evaluated on `sources` only."""
    evals = []
    for seed in range(3):
        kept = PROTONET_SEEDS if seed < 2 else {s: PROTONET_SEEDS[s] for s in sources}
        cells = {source: values[seed] for source, values in kept.items()}
        evals.append(_evaluation(tmp, f"p-s{seed}", seed, 0.5, 0.7, "protonet", cells))
    evals.append(_evaluation(tmp, "maml", 0, 0.5, 0.7, "maml", MAML, lr=1e-2))
    return [str(Path(e).relative_to(tmp)) for e in evals]


def test_ranks_collapse_seeds_into_the_mean_of_their_means(tmp_path, monkeypatch, capsys) -> None:
    evals = _three_seeds_and_one(tmp_path)
    monkeypatch.chdir(tmp_path)
    table = report.rank_table([report.load_evaluation(e) for e in evals])
    assert list(table) == list(PROTONET_SEEDS)
    for source, seeds in PROTONET_SEEDS.items():
        means = [mean for mean, _, _ in seeds]
        mean, ci = table[source]["protonet (3 seeds)"]
        assert mean == pytest.approx(sum(means) / 3, abs=1e-12)  # unweighted by episodes
        # Student's t at 0.975 with 2 degrees of freedom (a t table's 4.3027), not 1.96
        assert ci == pytest.approx(T_975_2DF * statistics.stdev(means) / math.sqrt(3), rel=1e-6)
        assert table[source]["maml"] == MAML[source][:2]
    pooled = sum(m * n for m, _, n in PROTONET_SEEDS["omniglot/test"]) / 1000
    assert abs(table["omniglot/test"]["protonet (3 seeds)"][0] - pooled) > 0.005

    assert report.main(["ranks", *evals]) == 0
    rows = [line.split("  ") for line in capsys.readouterr().out.splitlines()]
    rows = [[cell.strip() for cell in row if cell.strip()] for row in rows]
    assert rows[0] == ["Test Source", "maml", "protonet (3 seeds)"]
    # protonet's 92.00 +- 4.97 beats maml's 85.00 +- 0.50 on omniglot; maml's 66 beats 61.00
    # +- 2.48 on aircraft; 75.00 +- 12.42 and 70.00 +- 1.00 on cu_birds are a tie (1.5 each),
    # where seed 1 alone (80 +- 2) would have won.
    assert rows[1] == ["omniglot/test", "85.00 +- 0.50 (2)", "92.00 +- 4.97 (1)"]
    assert rows[2] == ["aircraft/test", "66.00 +- 1.00 (1)", "61.00 +- 2.48 (2)"]
    assert rows[3] == ["cu_birds/test", "70.00 +- 1.00 (1.5)", "75.00 +- 12.42 (1.5)"]
    assert rows[4] == ["Avg. rank", "1.50", "1.50"]
    assert rows[5] == [report.SEEDS_FOOTNOTE] and len(rows) == 6  # which CI is which
    for row in rows[1:4]:  # the ranks of the collapsed columns, as metrics ranks them
        ranks = rank_with_ties(table[row[0]])
        assert [cell.split()[-1] for cell in row[1:]] == [f"({ranks[m]:g})" for m in rows[0][1:]]


def test_ranks_per_run_keeps_one_column_per_evaluation(tmp_path, monkeypatch, capsys) -> None:
    evals = _three_seeds_and_one(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert report.main(["ranks", "--per-run", *evals]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = [cell.strip() for cell in lines[0].split("  ") if cell.strip()]
    assert header == ["Test Source", "maml"] + [
        f"protonet [{Path('evals', f'p-s{seed}')}]" for seed in range(3)
    ]
    # cu_birds: seed 1 alone first (80 +- 2), seed 2 second (75 +- 2), maml and seed 0 tied
    assert (
        lines[3].split()[1:]
        == "70.00 +- 1.00 (3.5) 70.00 +- 2.00 (3.5) 80.00 +- 2.00 (1) 75.00 +- 2.00 (2)".split()
    )


def test_ranks_refuse_a_run_twice_and_seeds_on_other_sources(tmp_path, monkeypatch, capsys) -> None:
    evals = _three_seeds_and_one(tmp_path, sources=("omniglot/test",))
    monkeypatch.chdir(tmp_path)
    assert report.main(["ranks", *evals]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: protonet (3 seeds): ")
    assert f"{Path('evals', 'p-s2')} lacks aircraft/test, cu_birds/test" in err
    assert report.main(["ranks", "--per-run", *evals]) == 2  # the table needs every source
    err = capsys.readouterr().err
    assert err.startswith("error: a ranks table needs every column evaluated on the same test")
    assert "lacks aircraft/test, cu_birds/test" in err and err.count("\n") == 1

    assert report.main(["ranks", evals[0], evals[0], evals[3]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "repeat a training seed [0, 0]: pass each run once" in err
    assert report.main(["ranks", "--per-run", evals[0], evals[0], evals[3]]) == 0
    assert capsys.readouterr().out.count("protonet [") == 2


def test_ranks_refuse_seeds_of_runs_whose_folders_are_gone(tmp_path, capsys) -> None:
    evals = _three_seeds_and_one(tmp_path)
    for seed in range(3):
        (tmp_path / "runs" / f"p-s{seed}" / "config.json").unlink()
    evals = [str(tmp_path / e) for e in evals]
    assert report.main(["ranks", *evals]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "training seed of" in err and "pass --per-run" in err
    assert report.main(["ranks", "--per-run", *evals]) == 0


def test_the_seed_ci_factor_is_students_t_with_n_minus_1_degrees_of_freedom() -> None:
    # a t table's two-sided 95% values for 1, 2, 4 and 30 degrees of freedom
    for n, table in ((2, 12.706), (3, 4.303), (5, 2.776), (31, 2.042)):
        assert t_95(n) == pytest.approx(table, abs=5e-4)
    assert t_95(1) == 0.0 and t_95(0) == 0.0  # one seed: no spread to scale
    assert t_95(10**6) == pytest.approx(1.96, abs=1e-3)  # the normal's limit (Z_95)
