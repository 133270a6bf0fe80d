"""learners.report with seeds as a dimension: runs that differ only in --seed are averaged, the
spread across seeds printed beside the episode CI; `divergence` with one --label per R."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from learners import report
from learners.metrics import divergence_slope


def _evaluation(tmp: Path, name: str, seed: int, r: float, accuracy: float, label: str) -> str:
    """A learners.evaluate folder (summary.json) of a run folder (config.json) trained with
    `seed`, on a split of divergence `r`."""
    run = tmp / "runs" / name
    run.mkdir(parents=True)
    config = {
        "seed": seed,
        "learner": {"method": "multiclass", "lr": 1e-3},
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
        "per_source": {},
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
    assert lines[1].startswith("B: 60.00") and "1 seed(s)" in lines[1]
    assert report.main(["seeds", evals[0], evals[0]]) != 0
    assert "repeat a training seed" in capsys.readouterr().err
