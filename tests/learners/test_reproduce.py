"""`python -m learners.reproduce` (issue 33): each plan's tiny scale end to end on the embedded
glyph dataset (real conversions, real training and evaluation commands), a real kill -9 of the
reproduction during a stage and the rerun that skips the finished stages, the dry run, the row
of a source --data lacks, --train-source recorded as a deviation, and the published numbers
checked against the papers' text."""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from learners import reproduce
from learners.reproduction import plan_dhillon
from learners.reproduction.best_checkpoint import best_validation_step
from learners.reproduction.published_numbers import PUBLISHED, published_number
from learners.reproduction.report_table import Ours, difference
from learners.reproduction.stages import comparable, first_difference
from tests.fixtures.cli_processes import REPO, child_env, python_m, start_python_m
from tests.fixtures.paths import PAPERS, shared_path

KILL_WAIT_S = 300.0  # generous: the machine running the tests may be busy


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """DATA/omniglot: the embedded glyph dataset, small (72 classes of 6 drawers, 28 px)."""
    root = tmp_path_factory.mktemp("reproduce")
    raw = root / "raw"
    made = python_m(
        "episodes.glyph_dataset",
        *("--output", str(raw), "--alphabets", "12", "--max-characters", "6"),
        *("--examples", "6", "--size", "28", "--workers", "1", "--quiet"),
    )
    assert made.returncode == 0, made.stderr
    converted = python_m(
        "beam_pipelines.convert",
        *("--source", "omniglot", "--input", str(raw), "--output", str(root / "data" / "omniglot")),
        *("--direct_num_workers", "1"),
    )
    assert converted.returncode == 0, converted.stderr
    return root / "data"


def tiny(plan: str, data: Path, out: Path, *more: str) -> list[str]:
    return [plan, "--data", str(data), "--train-source", "omniglot", "--scale", "tiny"] + [
        "--output",
        str(out),
        *more,
    ]


def record(out: Path, stage: str) -> dict:
    return json.loads((out / stage / "stage.json").read_text())


def report(out: Path) -> tuple[str, dict]:
    return (out / "report" / "report.md").read_text(), json.loads(
        (out / "report" / "report.json").read_text()
    )


def _wait(condition, what: str, limit: float = KILL_WAIT_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"waited {limit:.0f}s for {what}"
        time.sleep(0.1)


def _running_child(out: Path, stage: str) -> int | None:
    try:
        values = record(out, stage)
    except (OSError, ValueError):
        return None
    return values["pid"] if values["status"] == "running" else None


def _alive(pid: int) -> bool:
    try:
        return "learners.train" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------
# Meta-Dataset Table 1: a real kill during the episodic training, then the rerun


@pytest.fixture(scope="module")
def killed_and_resumed(data, tmp_path_factory) -> dict:
    """meta_dataset/table1 --method protonet at tiny scale, killed (SIGKILL) while its
    episodic training stage runs, then the same command again to its end."""
    out = tmp_path_factory.mktemp("md") / "out"
    args = tiny("meta_dataset/table1", data, out, "--method", "protonet")
    first = start_python_m("learners.reproduce", *args)
    train = "train-protonet-omniglot"
    _wait(lambda: _running_child(out, train) or first.poll() is not None, "the training stage")
    assert first.poll() is None, first.communicate()
    child = _running_child(out, train)
    at_kill = record(out, train)
    finished_before = {
        name: (out / name / "stage.json").read_bytes()
        for name in ("pretrain-resnet18-omniglot", "best-resnet18-omniglot")
    }
    pretrained = out / "pretrain-resnet18-omniglot" / "run" / "checkpoints" / "last.pt"
    pretrained_mtime = pretrained.stat().st_mtime_ns
    first.send_signal(signal.SIGKILL)
    first.communicate()
    # the training child dies with it (SIGTERM from the kernel), no orphan keeps writing
    _wait(lambda: not _alive(child), f"the orphaned learners.train (pid {child}) to end", 120)
    second = python_m("learners.reproduce", *args)
    return {
        "out": out,
        "killed": first.returncode,
        "at_kill": at_kill,
        "finished_before": finished_before,
        "pretrained": (pretrained, pretrained_mtime),
        "second": second,
    }


@pytest.mark.slow
def test_a_killed_reproduction_resumes_and_skips_finished_stages(killed_and_resumed):
    run = killed_and_resumed
    out, second = run["out"], run["second"]
    assert run["killed"] == -signal.SIGKILL
    assert second.returncode == 0, second.stdout + second.stderr
    said = second.stdout
    for index, name in ((1, "pretrain-resnet18-omniglot"), (2, "best-resnet18-omniglot")):
        assert f"[{index}/5] {name}: finished earlier" in said and "verified, skipped" in said
        assert (out / name / "stage.json").read_bytes() == run["finished_before"][name]
    path, mtime = run["pretrained"]
    assert path.stat().st_mtime_ns == mtime  # the finished pre-training was not touched
    assert "[3/5] train-protonet-omniglot: interrupted earlier; running it again" in said
    final = record(out, "train-protonet-omniglot")
    assert final["status"] == "finished" and final["attempts"] == 2
    assert final["command"] == run["at_kill"]["command"]  # the same command, rerun
    assert "--init-from" in final["command"]
    start = final["command"][final["command"].index("--init-from") + 1]
    assert start == str(out / "pretrain-resnet18-omniglot" / "run" / "checkpoints" / "best.pt")
    best = record(out, "best-resnet18-omniglot")["result"]
    started_from = json.loads(
        (out / "train-protonet-omniglot" / "run" / "init_from.json").read_text()
    )
    assert started_from["step"] == best["step"]  # the training started from the picked step


@pytest.mark.slow
def test_meta_dataset_report_has_the_paper_column_missing_rows_and_the_deviation(
    killed_and_resumed,
):
    text, values = report(killed_and_resumed["out"])
    rows = values["rows"]
    assert [r["row"]["Test source"] for r in rows] == [
        "ILSVRC", "Omniglot", "Aircraft", "Birds", "Textures", "Quick Draw", "Fungi",
        "VGG Flower", "Traffic Signs", "MSCOCO",
    ]  # fmt: skip
    ours = [r for r in rows if r["ours"]]
    assert [r["row"]["Test source"] for r in ours] == ["Omniglot"]
    omniglot = ours[0]
    assert omniglot["paper"]["accuracy"] == 59.98 and omniglot["paper"]["ci95"] == 1.35
    summary = json.loads(
        (
            killed_and_resumed["out"]
            / "eval-protonet-omniglot-on-omniglot"
            / "eval"
            / "summary.json"
        ).read_text()
    )["accuracy"]
    assert omniglot["ours"]["n"] == summary["n"] == 4
    assert omniglot["ours"]["accuracy"] == pytest.approx(100 * summary["mean"])
    assert omniglot["difference"]["value"] == pytest.approx(100 * summary["mean"] - 59.98)
    assert omniglot["difference"]["ci95"] == pytest.approx(math.hypot(100 * summary["ci95"], 1.35))
    assert "trained on omniglot" in omniglot["deviation"]
    for row in rows:  # every source --data lacks is a row saying so, never dropped
        if row["row"]["Test source"] != "Omniglot":
            assert row["ours"] is None and row["paper"] is not None
            assert row["not_run"].startswith("not run: no converted ")
    assert "| ProtoNet | Omniglot | 59.98 +- 1.35 [2] |" in text
    assert "[2] Triantafillou et al., Meta-Dataset (ICLR 2020), Table 1" in text
    assert 'row "Omniglot", column "ProtoNet"' in text
    assert any(line.startswith("--train-source omniglot") for line in values["deviations"])
    assert "--scale tiny" in text and "python -m learners.report ranks" in text


@pytest.mark.slow
def test_a_stage_recorded_with_another_command_is_refused_before_any_work(
    killed_and_resumed, capsys
):
    out = killed_and_resumed["out"]
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    recorded = record(out, "pretrain-resnet18-omniglot")["command"]
    data = Path(recorded[recorded.index("--dataset") + 1]).parent
    args = ["meta_dataset/table1", "--method", "protonet", "--data", str(data)]
    code = reproduce.main([*args, "--train-source", "omniglot", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert "pretrain-resnet18-omniglot was run with another command" in err
    assert "recorded `--steps 6`" in err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


# ----------------------------------------------------------------------------------------------
# Dhillon et al. and ATG at tiny scale


def run_tiny(plan: str, data: Path, out: Path) -> tuple[str, dict]:
    """Run `plan` at tiny scale on DATA/omniglot to its end; its report."""
    done = python_m("learners.reproduce", *tiny(plan, data, out))
    assert done.returncode == 0, done.stdout + done.stderr
    return report(out)


@pytest.mark.slow
def test_dhillon_table_runs_end_to_end(data, tmp_path):
    out = tmp_path / "out"
    text, values = run_tiny("dhillon/table1", data, out)
    rows = values["rows"]
    assert len(rows) == 8 and all(r["ours"] and r["paper"] for r in rows)
    first = rows[0]
    assert first["row"] == {
        "Method": "Transductive fine-tuning",
        "Benchmark": "Mini-ImageNet",
        "Pre-trained on": "train",
        "Shots": "1",
    }
    assert first["paper"]["accuracy"] == 65.73 and first["paper"]["ci95"] == 0.68
    assert "not Mini-ImageNet (--train-source)" in first["deviation"]
    # (train + val): the training and validation classes together, the test classes kept
    spec = json.loads((data / "omniglot" / "dataset_spec.json").read_text())
    merged = json.loads((out / "split-omniglot-train-val" / "split.json").read_text())
    names = {c["id"]: c["name"] for c in spec["classes"]}
    splits = spec["splits"]
    assert merged["train"] == [names[i] for i in splits["train"] + splits["valid"]]
    assert merged["valid"] == [] and merged["test"] == [names[i] for i in splits["test"]]
    assert record(out, "best-dhillon-omniglot-train")["result"]["chosen"] == "best"
    assert record(out, "best-dhillon-omniglot-train-val")["result"]["chosen"] == "last"
    evaluation = record(out, "eval-transductive-omniglot-train-val-5shot")["command"]
    for flag, value in (("--shots", "5"), ("--ways", "5"), ("--inference", "transductive")):
        assert evaluation[evaluation.index(flag) + 1] == value
    assert (
        "--checkpoint" in evaluation and evaluation[evaluation.index("--checkpoint") + 1] == "last"
    )
    assert "| Transductive fine-tuning | CIFAR-FS | train+val | 5 | 87.54 +- 0.49" in text


@pytest.mark.slow
def test_atg_figure_runs_end_to_end_without_a_paper_number(data, tmp_path):
    out = tmp_path / "out"
    text, values = run_tiny("atg/figure2", data, out)
    rows = values["rows"]
    assert [(r["row"]["D"], r["row"]["Split"]) for r in rows] == [
        ("0.04", "test"),
        ("0.96", "test"),
    ]
    assert all(r["ours"] and r["paper"] is None for r in rows)
    assert "none printed (figure)" in text and "Figure 2" in text
    assert values["figure"]["figure"] == "Figure 2"
    for divergence in ("0.04", "0.96"):
        split = out / "split-atg-omniglot" / f"atg_symmetric_kl_R{divergence}_seed0.json"
        assert json.loads(split.read_text())["parameters"]["R"] == float(divergence)
        train = record(out, f"train-atg-omniglot_D{divergence}")["command"]
        assert train[train.index("--split-file") + 1] == str(split)
    assert re.search(r"Multiclass: slope -?[\d.]+ accuracy points per unit of R", text)


# ----------------------------------------------------------------------------------------------
# Dry run, refusals


def test_dry_run_prints_every_stage_and_writes_nothing(data, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["meta_dataset/table1", "--method", "protonet", "--method", "relation"]
    code = reproduce.main([*args, "--data", str(data), "--train-source", "omniglot"] + [
        "--output", str(out), "--dry-run",
    ])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0 and not out.exists()
    stages = re.findall(r"^  \[(\d+)/(\d+)\] (\S+) \(to run\)$", printed, re.M)
    assert [s[2] for s in stages] == [
        "pretrain-resnet18-omniglot",
        "best-resnet18-omniglot",
        "train-protonet-omniglot",
        "best-protonet-omniglot",
        "eval-protonet-omniglot-on-omniglot",
        "pretrain-convnet-omniglot",
        "best-convnet-omniglot",
        "train-relation-omniglot",
        "best-relation-omniglot",
        "eval-relation-omniglot-on-omniglot",
    ]
    commands = re.findall(r"^      (python -m \S+ .*)$", printed, re.M)
    # the 4 trainings and 2 evaluations (the picks run in-process), then the report's
    assert len(commands) == 7 and commands[-1].startswith("python -m learners.report ranks")
    assert "--recipe meta_dataset/pretrain_convnet" in commands[3]
    relation = commands[4]
    assert "--recipe meta_dataset/relation" in relation
    assert f"--init-from {out}/pretrain-convnet-omniglot/run/checkpoints/best.pt" in relation
    assert "--steps" not in relation and "--width" not in relation  # full scale: the recipe's
    assert printed.count("not run: no converted ") == 18  # 9 sources x 2 methods
    assert "deviation: --train-source omniglot" in printed


def test_atg_full_scale_evaluates_train_valid_and_test_of_every_divergence(data, tmp_path, capsys):
    args = ["atg/figure2", "--data", str(data), "--train-source", "omniglot", "--dry-run"]
    assert reproduce.main([*args, "--output", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    evaluations = re.findall(r"^      python -m learners.evaluate (.*)$", printed, re.M)
    assert len(evaluations) == 4 * 3
    for divergence in ("0.04", "0.32", "0.64", "0.96"):
        for split in ("train", "valid", "test"):
            (line,) = [e for e in evaluations if f"eval-atg-omniglot_D{divergence}-{split}/" in e]
            assert f"--split {split} --episodes 600 " in line
            assert "--ways 5 --shots 5 --query 15" in line
    trainings = re.findall(r"^      python -m learners.train (.*)$", printed, re.M)
    # 200 epochs of batches of 64 over the train classes (72 - 2 x floor(0.2 x 72) = 44 of 6)
    per_epoch = math.ceil(44 * 6 / 64)
    assert all(f"--steps {200 * per_epoch} --checkpoint-every {per_epoch} " in t for t in trainings)


def test_dhillon_full_scale_pretrains_the_papers_epochs_whatever_the_copy(data, tmp_path, capsys):
    """Mini-ImageNet's epochs are the paper's 64 (or 80) x 600 images, not the converted
    ILSVRC's: here a stand-in DATA/ilsvrc_2012 (the glyph dataset under that name)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ilsvrc_2012").symlink_to(data / "omniglot", target_is_directory=True)
    args = ["dhillon/table1", "--benchmark", "mini_imagenet", "--data", str(tmp_path / "data")]
    assert reproduce.main([*args, "--output", str(tmp_path / "out"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    trainings = re.findall(r"^      python -m learners.train (.*)$", printed, re.M)
    assert len(trainings) == 2
    split = "episodes/records/published/mini_imagenet/ilsvrc_2012.json"
    assert f"{split} --image-size 84 --steps 18000 --checkpoint-every 150 " in trainings[0]
    assert "--validation-episodes 100 --ways 5 --shots 1 --query 15 " in trainings[0]
    merged = f"{tmp_path}/out/split-mini_imagenet-train-val/split.json"
    assert f"{merged} --image-size 84 --steps 22440 --checkpoint-every 187 " in trainings[1]
    assert "--validation-episodes 0 " in trainings[1]
    evaluations = re.findall(r"^      python -m learners.evaluate (.*)$", printed, re.M)
    assert len(evaluations) == 4 and all("--episodes 1000 " in e for e in evaluations)
    assert all(
        "--ways 5 --shots" in e and "--query 15 --inference transductive" in e for e in evaluations
    )


def test_dhillon_pretraining_length_is_the_papers_two_cycles():
    # 64 classes x 600 images, batches of 256 (fastai drops the partial one): 150 a epoch
    assert plan_dhillon.steps(64 * 600) == (120 * 150, 150)
    assert plan_dhillon.steps(80 * 600) == (120 * 187, 187)  # (train + val): 48,000 images


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--train-source", "mscoco"], "--train-source mscoco: "),
        (["--method", "protonets"], "--method protonets: not one of meta_dataset/table1's"),
        (["--benchmark", "cifar_fs", "--method", "knn"], "--benchmark: meta_dataset/table1"),
        ([], "meta_dataset/table1 needs --method"),
    ],
)
def test_bad_requests_are_one_line_before_any_work(data, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    args = ["meta_dataset/table1", "--data", str(data), "--output", str(out), *extra]
    if "--method" not in extra and extra:
        args += ["--method", "protonet"]
    assert reproduce.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert not out.exists()


def test_output_inside_data_is_refused(data, capsys):
    args = ["meta_dataset/table1", "--method", "protonet", "--data", str(data)]
    assert reproduce.main([*args, "--output", str(data / "out")]) == 2
    err = capsys.readouterr().err
    assert "--output" in err and "lies inside --data" in err


def test_no_training_source_is_one_line(data, tmp_path, capsys):
    args = ["meta_dataset/table1", "--method", "protonet", "--data", str(data)]
    assert reproduce.main([*args, "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: nothing of meta_dataset/table1 can run: no converted ilsvrc_2012")


# ----------------------------------------------------------------------------------------------
# Pieces


def _table_lines(paper: str, first_cell: str) -> list[list[str]]:
    return [
        line.split("\t")
        for line in shared_path(PAPERS / paper).read_text().splitlines()
        if line.split("\t")[0] == first_cell
    ]


def test_every_meta_dataset_number_is_the_papers():
    columns = ["k-NN", "Finetune", "MatchingNet", "ProtoNet", "fo-MAML", "RelationNet"]
    columns.append("fo-Proto-MAML")
    entries = [n for n in PUBLISHED if n.plan == "meta_dataset/table1"]
    assert len(entries) == 70
    for number in entries:
        # Table 1 top and bottom, Table 2(a) and (b) (then Table 3's fo-MAML rows)
        lines = _table_lines("meta-dataset-triantafillou.txt", number.row)
        table1, table2a = lines[0], lines[2]
        cell = 1 + columns.index(number.column)
        assert float(table1[cell]) == number.accuracy, number
        assert table2a[cell].startswith(f"{number.accuracy:.2f} \\pm {number.ci95:.2f} ("), number


def test_every_dhillon_number_is_the_papers():
    entries = [n for n in PUBLISHED if n.plan == "dhillon/table1"]
    assert len(entries) == 24
    offsets = {"Mini-ImageNet 1-shot (%)": 2, "Mini-ImageNet 5-shot (%)": 3}
    offsets |= {"CIFAR-FS 1-shot (%)": 6, "CIFAR-FS 5-shot (%)": 7}
    for number in entries:
        line = _table_lines("transductive-finetuning-dhillon.txt", number.row)[0]  # Table 1's
        assert line[1] == "WRN-28-10"
        assert line[offsets[number.column]].startswith(
            f"{number.accuracy:.2f} \\pm {number.ci95:.2f}"
        ), number
    transductive = published_number("dhillon/table1", "transductive", "cifar_fs/train/1shot")
    assert (transductive.accuracy, transductive.ci95) == (76.58, 0.68)


def test_the_difference_and_its_interval():
    number = published_number("meta_dataset/table1", "protonet", "omniglot")
    gap = difference(number, Ours(accuracy=61.0, ci95=2.0, n=600))
    assert gap == pytest.approx((61.0 - 59.98, math.sqrt(2.0**2 + 1.35**2)))
    assert difference(None, Ours(50.0, 1.0, 600)) is None


def test_the_best_step_is_the_first_of_the_highest():
    rows = [{"step": "3", "accuracy": "0.5"}, {"step": "6", "accuracy": "0.7", "ci95": "0.1"}]
    rows.append({"step": "9", "accuracy": "0.7"})
    assert best_validation_step(rows) == (6, 0.7, 0.1)


def test_commands_compare_without_the_device():
    planned = ("learners.train", "--steps", "6", "--device", "cuda", "--output", "o")
    assert comparable(planned) == comparable(
        ("learners.train", "--steps", "6", "--device", "cpu", "--output", "o")
    )
    # a plan recorded before learners.train's --episodes became --steps goes on, not over
    before = ("learners.train", "--episodes", "6", "--device", "cuda", "--output", "o")
    assert comparable(before) == comparable(planned)
    evaluation = ("learners.evaluate", "--episodes", "6")  # evaluation's --episodes stays
    assert comparable(evaluation) == evaluation
    recorded = ("learners.train", "--steps", "6", "--output", "o")
    assert first_difference(recorded, ("learners.train", "--steps", "9", "--output", "o")) == (
        "recorded `6 --output`, planned `9 --output`"
    )


def test_the_child_is_ended_when_the_parent_is_killed():
    """The mechanism the kill test relies on, alone: a child started by the stage runner's
    preexec gets SIGTERM when its parent dies by SIGKILL."""
    script = (
        "import subprocess, sys, time, os\n"
        "from learners.reproduction.stage_runner import _ended_with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " preexec_fn=_ended_with_parent(os.getpid()))\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO, env=child_env()
    )
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    _wait(lambda: not Path(f"/proc/{child}").exists() or _zombie(child), "the child to end", 30)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
