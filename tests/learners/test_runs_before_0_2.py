"""Runs written before learners/ moved into sub-packages (issue 31) resume, evaluate and load.

`tests/fixtures/runs_before_0_2/` holds two tiny run folders exactly as `learners.train` of 0.1.0
(commit 07d0f0b) wrote them (its README says how): ProtoNet on episodes, and multiclass
pre-training (SGD) with Meta-Dataset's weight-normalised cosine head (whose layer class moved). A
checkpoint that pickled a class would name its module, and a move would break it; these pickle
only torch's tensor functions and `collections.OrderedDict`, which the first test checks. The
others load every saved state, resume the runs with today's code (compared with a run trained
today from scratch), evaluate them and start a new run from one.
"""

from __future__ import annotations

import json
import os
import pickletools
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from learners import evaluate
from learners import train as train_cli
from learners.methods.registry import build_learner
from learners.training.checkpoint_file import load_checkpoint_learner
from learners.training.run_dir import read_run_config
from learners.training.training_loop import CHECKPOINTS, LAST, list_snapshots, load_checkpoint
from tests.fixtures.demo_env import MACHINE_KNOBS, demo_env
from tests.fixtures.paths import REPO

torch.set_num_threads(1)

RUNS = REPO / "tests" / "fixtures" / "runs_before_0_2"
PINNED = platform.machine() == "x86_64"  # make demo's pinned code path (DEMO_ENV) exists
# The flags the runs were made with (tests/fixtures/runs_before_0_2/README.md), without --steps.
COMMON = [
    "--synthetic",
    "--checkpoint-every",
    "2",
    "--validation-episodes",
    "2",
    "--seed",
    "0",
    "--device",
    "cpu",
    "--backbone",
    "cnn4",
    "--width",
    "0.125",
    "--image-size",
    "28",
    "--ways",
    "5",
    "--shots",
    "2",
    "--query",
    "3",
    "--no-progress",
]
FLAGS = {
    "protonet": ["--method", "protonet", *COMMON],
    "multiclass": [
        "--method",
        "multiclass",
        *COMMON,
        "--batch-size",
        "8",
        "--optimizer",
        "sgd",
        "--pretrain-head",
        "cosine",
        "--pretrain-weight-norm",
    ],
}
OUR_PACKAGES = ("learners", "episodes", "splits", "beam_pipelines")


def pickled_globals(checkpoint: Path) -> set[str]:
    """The `module.name` of every class or function the checkpoint's pickle refers to."""
    with zipfile.ZipFile(checkpoint) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        data = archive.read(name)
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            found.add(str(arg).replace(" ", "."))
        elif op.name == "STACK_GLOBAL":
            found.add(".".join(strings[-2:]))
        if isinstance(arg, str):
            strings.append(arg)
    return found


def _copy(run: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(RUNS / run, tmp_path / run))


def _train(flags: list[str], output: Path, episodes: int) -> None:
    """`learners.train` in a process of its own, on `make demo`'s pinned CPU code path where
    there is one (x86-64: one thread, AVX2), the path the runs were written on."""
    env = {k: v for k, v in os.environ.items() if k not in MACHINE_KNOBS}
    env.update(demo_env() if PINNED else {})
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, "-m", "learners.train", *flags, "--steps", str(episodes)]
    done = subprocess.run(
        [*command, "--output", str(output)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    (path,) = [p for s, p in list_snapshots(run) if s == step]
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


def _losses(run: Path) -> dict[int, float]:
    rows = (run / "train_log.csv").read_text().splitlines()[1:]
    return {int(step): float(loss) for step, loss in (row.split(",") for row in rows)}


@pytest.mark.parametrize("run", sorted(FLAGS))
def test_their_checkpoints_pickle_no_class_of_ours(run):
    checkpoints = sorted((RUNS / run / CHECKPOINTS).glob("*.pt"))
    assert [p.name for p in checkpoints] == ["best.pt", "last.pt", "step_00000002.pt"]
    for checkpoint in checkpoints:
        found = pickled_globals(checkpoint)
        assert "torch._utils._rebuild_tensor_v2" in found  # the reader sees the references
        assert not [g for g in found if g.split(".")[0] in OUR_PACKAGES], found
        assert {g.split(".")[0] for g in found} <= {"torch", "collections"}, found
        payload = torch.load(checkpoint, map_location="cpu", weights_only=True)
        assert payload["step"] == 2 and payload["config"]["method"] == run


@pytest.mark.parametrize("run", sorted(FLAGS))
def test_a_run_written_before_the_move_loads_every_state_it_saved(run, tmp_path):
    """Weights, optimiser state (Adam's moments, SGD's momentum), loss scaler and RNG state
    come back bit for bit from the 0.1.0 checkpoint into today's learner."""
    old = _copy(run, tmp_path)
    payload = torch.load(old / CHECKPOINTS / LAST, map_location="cpu", weights_only=True)
    learner = build_learner(read_run_config(old).learner)
    assert load_checkpoint(learner, old / CHECKPOINTS / LAST) == 2
    model = learner.state_dict()
    assert list(model) == list(payload["model"])
    assert all(torch.equal(model[k], payload["model"][k]) for k in model)
    saved, loaded = payload["optimizer"], learner.optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]
    assert sorted(saved["state"]) == sorted(loaded["state"]) and saved["state"]
    for index, state in saved["state"].items():
        assert sorted(state) == sorted(loaded["state"][index])
        assert all(
            torch.equal(torch.as_tensor(v), torch.as_tensor(loaded["state"][index][k]))
            for k, v in state.items()
        )
    assert torch.equal(torch.get_rng_state(), payload["torch_rng"])


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(FLAGS))
def test_a_run_written_before_the_move_resumes_as_if_never_stopped(run, tmp_path):
    old = _copy(run, tmp_path / "old")
    _train(FLAGS[run], old, episodes=4)
    fresh = tmp_path / "fresh" / run
    _train(FLAGS[run], fresh, episodes=4)

    logged = (old / "train_log.csv").read_text().splitlines()
    assert logged[:3] == (RUNS / run / "train_log.csv").read_text().splitlines()  # kept
    assert [s for s, _ in list_snapshots(old)] == [2, 4]
    assert read_run_config(old) == read_run_config(fresh)
    old_losses, fresh_losses = _losses(old), _losses(fresh)
    assert list(old_losses) == list(fresh_losses) == [1, 2, 3, 4]
    assert len(set(fresh_losses.values())) == 4  # four different steps, not one repeated
    if not PINNED:  # another machine's rounding: Adam's first steps amplify it in the weights
        assert old_losses == pytest.approx(fresh_losses, abs=1e-4)
        return
    # The 0.1.0 code's two steps are today's, bit for bit, and its run resumed by today's code
    # takes the steps an uninterrupted run of today takes (the same items, weights, optimiser
    # state and random draws).
    assert old_losses == fresh_losses
    for step in (2, 4):
        old_weights, fresh_weights = _weights(old, step), _weights(fresh, step)
        assert list(old_weights) == list(fresh_weights)
        assert [k for k in old_weights if not torch.equal(old_weights[k], fresh_weights[k])] == []


def test_a_run_written_before_the_move_evaluates_and_loads_as_a_model(tmp_path):
    protonet, multiclass = _copy("protonet", tmp_path), _copy("multiclass", tmp_path)
    for run, extra in (
        (protonet, []),
        (multiclass, ["--inference", "md_finetune", "--md-finetune-steps", "2"]),
    ):
        out = tmp_path / f"eval-{run.name}"
        argv = ["--run", str(run), "--episodes", "2", "--no-progress", "--output", str(out)]
        assert evaluate.main([*argv, "--hardness-model", str(multiclass), *extra]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["settings"]["checkpoint_step"] == 2
        assert summary["episodes"] == 2
    learner, config, step = load_checkpoint_learner(multiclass)
    assert (type(learner).__name__, step) == ("MulticlassLearner", 2)
    head = learner.classifier  # Meta-Dataset's head, its layer now in learners.nn
    assert type(head.layer).__module__ == "learners.nn.linear_classifier"
    assert bool(head.initialised) and not head.needs_init  # the saved flag read back


def test_a_new_run_starts_from_a_run_written_before_the_move(tmp_path):
    source = _copy("multiclass", tmp_path)
    run = tmp_path / "started"
    argv = [*FLAGS["protonet"], "--steps", "1", "--output", str(run)]
    assert train_cli.main([*argv, "--init-from", str(source)]) == 0
    record = json.loads((run / "init_from.json").read_text())
    assert record["step"] == 2
