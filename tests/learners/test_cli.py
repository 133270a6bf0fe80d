"""Training loop, `learners.train`, `learners.evaluate` and `learners.report` end to end on the
synthetic blob data: resume is bit-exact, evaluation writes the documented CSV columns and CI,
reports produce their tables and PNGs, bad input fails with one clear message."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from learners import evaluate, report
from learners import train as train_cli
from learners.evaluation.episode_eval import CLASS_FIELDS, EPISODE_FIELDS
from learners.training.training_loop import list_snapshots
from tests.fixtures.learner_runs import TINY, multiclass_config

torch.set_num_threads(1)


def checkpoint_tensors(run: Path) -> dict[str, torch.Tensor]:
    payload = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    tensors = dict(payload["model"])
    for index, state in payload["optimizer"]["state"].items():
        for key, value in state.items():
            tensors[f"opt{index}.{key}"] = torch.as_tensor(value)
    tensors["rng"] = payload["torch_rng"]
    return tensors


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    """Mixup draws from torch's RNG, so this also checks that RNG states are restored."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_cli.train(multiclass_config(10), str(straight), "cpu", progress=False)
    first = train_cli.train(
        multiclass_config(10), str(resumed), "cpu", progress=False, stop_after=6
    )  # "killed" after step 6; last checkpoint is step 4
    assert first.end_step == 6
    second = train_cli.train(multiclass_config(10), str(resumed), "cpu", progress=False)
    assert (second.start_step, second.end_step) == (4, 10)
    a, b = checkpoint_tensors(straight), checkpoint_tensors(resumed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    for name in ("train_log.csv", "validation.csv"):
        assert (straight / name).read_text() == (resumed / name).read_text()
    assert [s for s, _ in list_snapshots(resumed)] == [4, 8, 10]  # snapshots are kept
    assert (resumed / "checkpoints" / "best.pt").is_file()


def test_a_run_refuses_changed_options(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    args = [
        "--method",
        "protonet",
        "--synthetic",
        "--steps",
        "2",
        "--validation-episodes",
        "0",
        "--output",
        str(run),
        *TINY,
    ]
    assert train_cli.main(args) == 0
    assert train_cli.main([*args, "--lr", "0.5"]) == 2
    assert "different options (learner.lr 0.001 -> 0.5)" in capsys.readouterr().err
    assert train_cli.main([*args]) == 0  # same options: nothing left to do
    assert "already trained" in capsys.readouterr().out


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "protonet"
    code = train_cli.main(
        [
            "--method",
            "protonet",
            "--synthetic",
            "--steps",
            "12",
            "--checkpoint-every",
            "4",
            "--validation-episodes",
            "4",
            "--output",
            str(run),
            "--seed",
            "1",
            *TINY,
        ]
    )
    assert code == 0
    return run


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a CSV file after its '#' comment lines."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(line for line in handle if not line.startswith("#"))
        return list(reader.fieldnames or []), list(reader)


def test_evaluate_writes_records_and_the_ci_formula(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = ["--run", str(trained_run), "--episodes", "8", "--no-progress", "--device", "auto"]
    assert evaluate.main([*args, "--output", str(out)]) == 0
    fields, rows = read_rows(out / "episodes.csv")
    assert fields == list(EPISODE_FIELDS) and len(rows) == 8
    first_line = (out / "episodes.csv").read_text().splitlines()[0]
    assert first_line.startswith("# hardness: Dhillon et al. eq. 9 without ReLU; extractor: ")
    class_fields, class_rows = read_rows(out / "classes.csv")
    assert class_fields == list(CLASS_FIELDS) and len(class_rows) == 8 * 5
    accuracies = np.array([float(r["accuracy"]) for r in rows])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy"]["mean"] == pytest.approx(accuracies.mean())
    assert summary["accuracy"]["std"] == pytest.approx(accuracies.std(ddof=1))
    assert summary["accuracy"]["ci95"] == pytest.approx(
        1.96 * accuracies.std(ddof=1) / math.sqrt(len(accuracies))
    )
    assert all(int(r["ways"]) == 5 and float(r["mean_shots"]) == 2 for r in rows)
    assert all(math.isfinite(float(r["hardness"])) for r in rows)
    assert summary["checkpoint"] == "best"
    # the same command gives byte-identical records
    again = tmp_path / "again"
    assert evaluate.main([*args, "--output", str(again)]) == 0
    assert (again / "episodes.csv").read_bytes() == (out / "episodes.csv").read_bytes()


def test_snapshot_evaluation_and_kendall_report(trained_run: Path, capsys) -> None:
    assert (
        evaluate.main(
            ["--run", str(trained_run), "--episodes", "3", "--checkpoint", "all", "--no-progress"]
        )
        == 0
    )
    (folder,) = (trained_run / "eval").glob("test-all-*")
    assert folder.name == "test-all-5way2shot3query-3ep"
    fields, rows = read_rows(folder / "snapshots.csv")
    assert fields == ["step", "accuracy", "std", "ci95", "n"]
    assert [int(r["step"]) for r in rows] == [4, 8, 12]
    capsys.readouterr()
    assert report.main(["kendall", "--run", str(trained_run)]) == 0
    line = capsys.readouterr().out
    tau = float(line.rsplit(":", 1)[1])
    assert "3 snapshots" in line and -1.0 <= tau <= 1.0


def test_reports_tables_and_plots(trained_run: Path, tmp_path: Path, capsys) -> None:
    evals = []
    for label, inference_args in (("protonet", []), ("protonet-5q", ["--query", "5"])):
        out = tmp_path / label
        assert (
            evaluate.main(
                [
                    "--run",
                    str(trained_run),
                    "--episodes",
                    "5",
                    "--output",
                    str(out),
                    "--label",
                    label,
                    "--no-progress",
                    *inference_args,
                ]
            )
            == 0
        )
        evals.append(str(out))
    capsys.readouterr()
    assert report.main(["ranks", *evals]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["Test", "Source", "protonet", "protonet-5q"]
    assert "Avg. rank" in table and "synthetic_blobs/test" in table
    assert report.main(["hardness", *evals, "--output", str(tmp_path / "hardness.png")]) == 0
    assert report.main(["ways-shots", *evals, "--output", str(tmp_path / "ws")]) == 0
    capsys.readouterr()
    assert report.main(["divergence", evals[0], evals[0], "--r", "0.1", "0.9"]) == 0
    slope = float(capsys.readouterr().out.split("slope ")[1].split()[0])
    assert slope == pytest.approx(0.0, abs=1e-6)  # the same accuracy at both R
    lambdas = []
    for lam in ("0", "1"):
        out = tmp_path / f"lambda{lam}"
        assert (
            evaluate.main(
                [
                    "--run",
                    str(trained_run),
                    "--episodes",
                    "3",
                    "--output",
                    str(out),
                    "--base-novel-lambda",
                    lam,
                    "--no-progress",
                    "--no-hardness",
                ]
            )
            == 0
        )
        lambdas.append(str(out))
    assert report.main(["base-novel", *lambdas, "--output", str(tmp_path / "bn.png")]) == 0
    for png in ("hardness.png", "ws/accuracy_by_ways.png", "ws/precision_by_shots.png", "bn.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_fails_with_one_clear_message(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nope"
    assert (
        train_cli.main(
            [
                "--method",
                "protonet",
                "--dataset",
                str(missing),
                "--steps",
                "1",
                "--output",
                str(tmp_path / "r"),
                *TINY,
            ]
        )
        == 2
    )
    assert f"--dataset {missing}: no such folder" in capsys.readouterr().err
    assert (
        train_cli.main(
            [
                "--method",
                "snail",
                "--synthetic",
                "--steps",
                "1",
                "--output",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    assert "unknown method 'snail'" in capsys.readouterr().err
    assert evaluate.main(["--run", str(missing)]) == 2
    assert "not a learners.train run folder" in capsys.readouterr().err
    assert report.main(["ranks", str(missing)]) == 2
    assert "no summary.json" in capsys.readouterr().err


# Every learner option as runs saved them before per-method configs: one flat "learner" object.
OLD_FLAT_PROTONET = {
    "method": "protonet",
    "backbone": "cnn4",
    "image_size": 28,
    "width": 0.25,
    "dropblock": False,
    "optimizer": "adam",
    "lr": 0.001,
    "weight_decay": 0.0,
    "inner_steps": 5,
    "inner_lr": None,
    "eval_inner_steps": None,
    "matching_scale": 1.0,
    "relation_hidden": 8,
    "train_class_ids": [],
    "label_smoothing": 0.1,
    "mixup_alpha": 0.25,
    "pretrain_augment": False,
    "inference": "protonet",
    "knn_k": 1,
    "knn_metric": "euclidean",
    "finetune_epochs": 25,
    "finetune_lr": 5e-05,
    "finetune_relu": True,
    "entropy_log_ways": False,
    "finetune_freeze_bn": False,
    "finetune_augment": True,
}


def test_a_run_saved_in_the_old_flat_layout_evaluates_the_same(
    trained_run: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old_run"
    shutil.copytree(trained_run, old, ignore=shutil.ignore_patterns("eval"))
    config = json.loads((old / "config.json").read_text())
    assert config["learner"]["options"] == {}  # ProtoNet has no options of its own
    config["learner"] = OLD_FLAT_PROTONET
    (old / "config.json").write_text(json.dumps(config, indent=2))
    for checkpoint in (old / "checkpoints").glob("*.pt"):
        payload = torch.load(checkpoint, weights_only=False)
        payload["config"] = OLD_FLAT_PROTONET
        checkpoint.unlink()  # best.pt and last.pt may be links to a snapshot
        torch.save(payload, checkpoint)
    summaries = []
    for run in (trained_run, old):
        out = tmp_path / f"eval_{run.name}"
        args = ["--run", str(run), "--episodes", "6", "--no-progress", "--output", str(out)]
        assert evaluate.main([*args, "--no-hardness"]) == 0
        summaries.append(json.loads((out / "summary.json").read_text()))
        assert (out / "episodes.csv").is_file()
    assert summaries[0]["accuracy"] == summaries[1]["accuracy"]


def test_old_flat_multiclass_options_load_into_the_methods_dataclass() -> None:
    from learners.methods.multiclass import MulticlassConfig
    from learners.methods.registry import learner_config_from_dict, resolved_config

    flat = {**OLD_FLAT_PROTONET, "method": "knn", "knn_k": 3, "train_class_ids": [4, 5, 6]}
    del flat["pretrain_augment"]  # runs older still did not save it: it was off
    config = resolved_config(learner_config_from_dict(flat))
    assert (config.method, config.width, config.lr) == ("knn", 0.25, 0.001)
    assert config.options == MulticlassConfig(
        knn_k=3,
        inference="knn",
        train_class_ids=[4, 5, 6],
        pretrain_augment=False,
        mixup_per_sample=False,  # runs saved before the option drew one lambda per batch
        finetune_bn_micro_batch=0,  # and fine-tuned with the whole set as one BatchNorm batch
    )


def test_old_spellings_still_work_with_a_one_line_note(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    old = ["--method", "protonet", "--dataset", "synthetic", "--episodes", "2"]
    old += ["--validation-episodes", "0", "--out", str(run), *TINY]
    assert train_cli.main(old) == 0
    err = capsys.readouterr().err
    assert "note: --episodes is now --steps; the old spelling goes in version 0.3.0" in err
    assert json.loads((run / "config.json").read_text())["total_steps"] == 2
    assert "note: --out is now --output" in err
    assert "note: --dataset synthetic is now --synthetic" in err
    assert json.loads((run / "config.json").read_text())["dataset"] == "synthetic"
    out = tmp_path / "eval"
    args = ["--run", str(run), "--episodes", "2", "--no-progress", "--out", str(out)]
    assert evaluate.main(args) == 0
    assert (out / "summary.json").is_file()
    assert "note: --out is now --output" in capsys.readouterr().err
    png = tmp_path / "hardness.png"
    assert report.main(["hardness", str(out), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "note: --png is now --output" in capsys.readouterr().err


def test_options_of_another_method_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    args = ["--method", "protonet", "--synthetic", "--steps", "2", "--output", str(tmp_path)]
    assert train_cli.main([*args, "--relation-hidden", "16", "--inner-steps", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: --inner-steps (options of anil, fomaml, foprotomaml, maml, protomaml) and "
        "--relation-hidden (options of relation): not options of --method protonet"
    ]
    assert not any(tmp_path.iterdir())  # nothing written
