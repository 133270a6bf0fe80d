"""Meta-batches and torchrun (issue 23): W ranks with `--meta-batch M` train the weights of one
process with `--meta-batch M*W`; rank 0 alone writes; a resumed torchrun run continues the
same trajectory; `learners.evaluate` under torchrun writes the files of one process; a rank's
death ends every rank. Real `torchrun` (torch.distributed.run), 2 CPU processes, Gloo on the
loopback interface only, the synthetic blob data and a quarter-width CNN4."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from learners import evaluate
from learners import train as train_cli
from learners.evaluation.sharded_evaluation import batch_share
from learners.feed.episode_source import EpisodeOptions, ShardedSource, open_episode_source
from learners.feed.synthetic_episodes import BlobDataset, BlobDatasetConfig, SyntheticEpisodeSource
from learners.methods.registry import build_learner, learner_config
from learners.training.distributed import (
    SINGLE_PROCESS,
    RankInfo,
    ShardPlan,
    cores_per_rank,
    loading_note,
    rank_info_from_env,
)
from learners.training.meta_batch import meta_batch_step
from tests.fixtures.rank_runs import (
    TINY,
    TOLERANCE,
    losses,
    max_differences,
    model_state,
    rank_env,
    threads_of_a_rank,
    torchrun,
    torchrun_command,
    train_one_process,
)

torch.set_num_threads(1)


# ------------------------------------------------------------------ shard plans, rank info


@pytest.mark.parametrize(("meta_batch", "world"), [(1, 2), (2, 2), (3, 4), (4, 1)])
def test_the_ranks_of_a_step_read_the_items_of_one_process_once(meta_batch, world) -> None:
    for step in (1, 2, 7):
        shares = [ShardPlan(meta_batch, r, world).step_indices(step) for r in range(world)]
        flat = [i for share in shares for i in share]
        first = (step - 1) * meta_batch * world
        assert flat == list(range(first, first + meta_batch * world))  # rank order, no overlap
        one = ShardPlan(meta_batch * world, 0, 1).step_indices(step)
        assert flat == one


def test_a_sharded_source_reads_its_positions_global_items() -> None:
    dataset = BlobDataset(BlobDatasetConfig(image_size=12))
    source = SyntheticEpisodeSource("train", 5, dataset=dataset)
    sharded = ShardedSource(source, ShardPlan(2, 1, 3))  # rank 1 of 3, 2 per step
    got = [e["support_images"] for e in sharded.items(range(4))]  # steps 0 and 1
    for image, index in zip(got, [2, 3, 8, 9]):
        assert (image == source.episode(index)["support_images"]).all()


def test_bad_meta_batches_and_ranks_are_refused(tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match="--meta-batch 0"):
        ShardPlan(0, 0, 1)
    with pytest.raises(ValueError, match="rank 2 of 2"):
        ShardPlan(1, 2, 2)
    out = tmp_path / "run"
    argv = ["--method", "protonet", *TINY, "--steps", "2", "--output", str(out)]
    assert train_cli.main([*argv, "--meta-batch", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --meta-batch 0 is too small"
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("count", "per_batch", "world"), [(7, 2, 2), (20, 8, 3), (5, 8, 2), (9, 1, 4)]
)
def test_ranks_evaluate_the_batches_of_one_process(count, per_batch, world) -> None:
    """Each rank's list, cut in batches of B as evaluate_episodes does, gives batches of the
    one process's batches of B consecutive episodes; together every episode once."""
    one = [list(range(s, min(s + per_batch, count))) for s in range(0, count, per_batch)]
    seen: list[int] = []
    for rank in range(world):
        share = batch_share(count, per_batch, RankInfo(rank, world, rank, world))
        batches = [share[s : s + per_batch] for s in range(0, len(share), per_batch)]
        assert batches == one[rank::world]
        seen += share
    assert sorted(seen) == list(range(count))
    # Round-robin episodes (r, r+W, ...) would batch episodes one process never batches.
    if per_batch > 1:
        round_robin = list(range(0, count, world))  # rank 0's episodes 0, W, 2W, ...
        assert round_robin[:per_batch] not in one
    with pytest.raises(ValueError, match="--episodes-per-batch 0"):
        batch_share(count, 0, SINGLE_PROCESS)


def test_rank_info_comes_from_torchruns_variables() -> None:
    assert rank_info_from_env({}) == SINGLE_PROCESS
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    info = rank_info_from_env(env)
    assert (info.rank, info.world_size, info.local_rank, info.sharded) == (3, 8, 1, True)
    assert not info.is_writer and RankInfo(0, 8, 0, 4).is_writer
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        rank_info_from_env({"RANK": "0", "WORLD_SIZE": "two", "LOCAL_RANK": "0"})
    with pytest.raises(ValueError, match="RANK 2, WORLD_SIZE 2"):
        rank_info_from_env({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    assert cores_per_rank(RankInfo(0, 8, 0, 4), cores=16) == 4
    assert cores_per_rank(RankInfo(0, 8, 0, 4), cores=2) == 1
    assert "count per rank" in str(loading_note(10**6, 0, RankInfo(0, 2, 0, 2)))
    assert loading_note(0, 0, RankInfo(0, 2, 0, 2)) is None
    assert loading_note(10**6, 0, SINGLE_PROCESS) is None


def test_a_meta_batch_step_follows_the_gradient_of_the_mean_loss() -> None:
    """One process, M=3: the step equals one SGD step on the mean of the 3 episode losses
    computed in one graph (plain SGD: no Adam normalisation of rounding-level gradients)."""
    config = learner_config(
        "protonet", backbone="cnn4", image_size=16, width=0.25, optimizer="sgd", lr=0.05
    )
    source = open_episode_source(
        "synthetic", "train", None, EpisodeOptions(ways=3, shots=2, query=2, image_size=16), 1
    )
    episodes = [source.episode(i) for i in range(3)]
    torch.manual_seed(0)
    stepped = build_learner(config)
    torch.manual_seed(0)
    reference = build_learner(config)
    loss = meta_batch_step(stepped, episodes, 1, ShardPlan(3, 0, 1), SINGLE_PROCESS, seed=1)
    assert reference.optimizer is not None
    reference.train()
    reference.optimizer.zero_grad()
    losses = [reference.episode_loss(reference.to_tensors(e)) for e in episodes]
    mean = sum(losses) / 3
    mean.backward()
    reference.optimizer.step()
    assert loss == pytest.approx(float(mean.detach()), rel=1e-6)
    got, want = stepped.state_dict(), reference.state_dict()
    for name in want:
        if want[name].is_floating_point() and name.endswith(("weight", "bias")):
            assert torch.allclose(got[name], want[name], atol=1e-6), name
    assert not torch.equal(
        got["backbone.blocks.0.weight"],
        build_learner(config).state_dict()["backbone.blocks.0.weight"],
    )  # it did step


# ------------------------------------------------------------------------------ torchrun


@pytest.mark.slow
def test_two_ranks_with_meta_batch_2_train_the_weights_of_one_process_with_4(tmp_path) -> None:
    """ProtoNet (per-episode BatchNorm), 20 steps: every parameter within 1e-5 (measured: 0),
    BatchNorm's running statistics within 1e-5, the same losses and the same config.json;
    the other rank wrote nothing."""
    common = ["--method", "protonet", *TINY, "--steps", "20", "--checkpoint-every", "10"]
    one, two = tmp_path / "one", tmp_path / "two"
    train_one_process([*common, "--meta-batch", "4", "--output", str(one)])
    done = torchrun("learners.train", [*common, "--meta-batch", "2", "--output", str(two)])
    params, buffers = max_differences(one, two)
    assert params <= TOLERANCE and buffers <= TOLERANCE, (params, buffers)
    assert losses(two) == pytest.approx(losses(one), abs=1e-5) and len(losses(two)) == 20
    assert (one / "config.json").read_text() == (two / "config.json").read_text()
    assert json.loads((two / "config.json").read_text())["global_meta_batch"] == 4
    written = sorted(str(p.relative_to(two)) for p in two.rglob("*"))
    assert written == sorted(str(p.relative_to(one)) for p in one.rglob("*"))
    assert done.stdout.count("steps 0->20") == 1  # rank 0's summary line only
    # The meta-batch changes training: one process with M=1 ends elsewhere.
    single = tmp_path / "single"
    train_one_process([*common, "--output", str(single)])
    weight = "backbone.blocks.0.weight"
    assert float((model_state(one)[weight] - model_state(single)[weight]).abs().max()) > 1e-3


@pytest.mark.slow
def test_a_resumed_torchrun_run_continues_the_trajectory_of_one_process(tmp_path) -> None:
    """Multiclass pre-training (mixup and augmentation draw from torch's RNG: item i's draws
    are seeded by (seed, i)), 2 ranks x 1 batch: stopped after 6 of 12 steps and resumed
    under torchrun, it ends with the weights of one process with --meta-batch 2. The
    resumed session starts from rank 0's last.pt on both ranks."""
    common = [
        "--method",
        "multiclass",
        *TINY,
        "--batch-size",
        "8",
        "--mixup-alpha",
        "0.4",
        "--checkpoint-every",
        "3",
        "--keep-snapshots",
        "1",
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    train_one_process([*common, "--steps", "12", "--meta-batch", "2", "--output", str(one)])
    torchrun("learners.train", [*common, "--steps", "6", "--output", str(two)])
    assert len(losses(two)) == 6
    done = torchrun("learners.train", [*common, "--steps", "12", "--output", str(two)])
    assert "steps 6->12" in done.stdout
    params, buffers = max_differences(one, two)
    assert params <= TOLERANCE and buffers <= TOLERANCE, (params, buffers)
    assert losses(two) == pytest.approx(losses(one), abs=1e-5)
    snapshots = sorted(p.name for p in (two / "checkpoints").glob("step_*.pt"))
    assert snapshots == ["step_00000012.pt"]  # --keep-snapshots 1 on rank 0


@pytest.mark.slow
def test_one_rank_trains_the_plain_run_and_evaluation_on_two_writes_its_files(tmp_path) -> None:
    """`torchrun --nproc_per_node 1` takes the one-process path: the checkpoint of the plain
    command, bit for bit. Evaluating that run on 2 ranks writes the files of one process."""
    run, plain = tmp_path / "run", tmp_path / "plain"
    argv = ["--method", "protonet", *TINY, "--steps", "3", "--checkpoint-every", "2"]
    torchrun("learners.train", [*argv, "--output", str(run)], ranks=1)
    assert train_cli.main([*argv, "--output", str(plain)]) == 0  # this process: 1 thread too
    for name in ("step_00000002.pt", "last.pt"):
        x = torch.load(run / "checkpoints" / name, weights_only=True)
        y = torch.load(plain / "checkpoints" / name, weights_only=True)
        assert x["model"].keys() == y["model"].keys() and x["step"] == y["step"]
        assert all(torch.equal(x["model"][k], y["model"][k]) for k in x["model"])
        assert torch.equal(x["torch_rng"], y["torch_rng"])
    assert (run / "train_log.csv").read_bytes() == (plain / "train_log.csv").read_bytes()
    common = ["--run", str(run), "--episodes", "7", "--no-progress", "--device", "cpu"]
    with threads_of_a_rank():
        assert evaluate.main([*common, "--output", str(tmp_path / "one")]) == 0
    done = torchrun("learners.evaluate", [*common, "--output", str(tmp_path / "two")])
    for name in ("episodes.csv", "classes.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert one.pop("out") != two.pop("out") and one == two
    assert done.stdout.count("wrote ") == 1


@pytest.mark.slow
def test_a_sharded_transductive_finetuning_evaluation_writes_the_files_of_one_process(
    tmp_path,
) -> None:
    """Transductive fine-tuning draws episode i's augmentation from (seed, i) and the ranks
    evaluate whole batches of one process (B = 2, 7 episodes: rank 0 {0,1} {4,5}, rank 1
    {2,3} {6}), so 2 ranks write the bytes of one process and the same summary (B recorded
    beside the settings, not in them)."""
    run = tmp_path / "run"
    train_one_process(
        ["--method", "multiclass", *TINY, "--steps", "3", "--batch-size", "8"]
        + ["--output", str(run)]
    )
    base = ["--run", str(run), "--episodes", "7", "--no-progress", "--device", "cpu"]
    base += ["--episodes-per-batch", "2"]
    base += ["--inference", "transductive", "--no-hardness"]
    common = [*base, "--finetune-epochs", "2"]
    with threads_of_a_rank():
        assert evaluate.main([*common, "--output", str(tmp_path / "one")]) == 0
    torchrun("learners.evaluate", [*common, "--output", str(tmp_path / "two")])
    for name in ("episodes.csv", "classes.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert one.pop("out") != two.pop("out") and one == two
    assert one["settings"]["inference"] == "transductive"
    assert one["episodes_per_batch"] == 2 and "episodes_per_batch" not in one["settings"]
    # B is not a setting: the same folder takes a rerun with another B (no --overwrite).
    with threads_of_a_rank():
        again = [*common, "--episodes-per-batch", "3", "--output", str(tmp_path / "one")]
        assert evaluate.main(again) == 0
    assert json.loads((tmp_path / "one" / "summary.json").read_text())["episodes_per_batch"] == 3
    # Fine-tuning did run: the support-based initial head alone predicts otherwise.
    with threads_of_a_rank():
        initial = [*base, "--finetune-epochs", "0", "--output", str(tmp_path / "initial")]
        assert evaluate.main(initial) == 0
    assert (tmp_path / "initial" / "classes.csv").read_bytes() != (
        tmp_path / "one" / "classes.csv"
    ).read_bytes()


@contextlib.contextmanager
def training_past_a_checkpoint(tmp_path: Path, *extra: str) -> Iterator[subprocess.Popen]:
    """A long 2-rank torchrun training in its own session, once rank 0 wrote a checkpoint;
    killed on the way out if the test left it running."""
    args = ["--method", "protonet", *TINY, "--steps", "100000", "--checkpoint-every", "5"]
    args += [*extra, "--output", str(tmp_path / "run")]
    launcher = subprocess.Popen(
        torchrun_command("learners.train", args),
        env=rank_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        last = tmp_path / "run" / "checkpoints" / "last.pt"
        deadline = time.time() + 120
        while not last.exists() and time.time() < deadline and launcher.poll() is None:
            time.sleep(0.2)
        assert last.exists(), "no checkpoint within 120 s"
        yield launcher
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


@pytest.mark.slow
def test_a_killed_rank_ends_every_rank_without_a_hang(tmp_path) -> None:
    """SIGKILL one rank mid-run (a crash, an out-of-memory kill): torchrun ends the others and
    fails; nothing is left running and no rank printed a traceback of its own."""
    with training_past_a_checkpoint(tmp_path) as launcher:
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text()
        workers = [int(p) for p in children.split()]
        assert len(workers) == 2, workers
        os.kill(max(workers), signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=90)
    assert launcher.returncode != 0
    assert "learners/" not in stderr  # torchrun reports the failure; no rank's own traceback
    for pid in workers:
        assert (
            not Path(f"/proc/{pid}").exists()
            or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        )


@pytest.mark.slow
def test_a_refused_dataset_ends_every_rank_with_one_line(tmp_path) -> None:
    missing = tmp_path / "missing"
    args = ["--method", "protonet", "--dataset", str(missing), "--steps", "3"]
    args += ["--no-progress", "--output", str(tmp_path / "run")]
    done = subprocess.run(
        torchrun_command("learners.train", args),
        env=rank_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: every rank of 2: --dataset {missing}: no such folder (expected a "
        "converted dataset)"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_ctrl_c_ends_every_rank_with_rank_zeros_resume_line(tmp_path) -> None:
    """SIGINT to the launcher's process group (what a terminal's Ctrl-C does): every rank
    stops, rank 0 alone prints the line that resumes the run, no rank prints a traceback.
    (With --amp bf16 --channels-last, which train under torchrun up to the checkpoint.)"""
    with training_past_a_checkpoint(tmp_path, "--amp", "bf16", "--channels-last") as launcher:
        os.killpg(launcher.pid, signal.SIGINT)
        _, stderr = launcher.communicate(timeout=90)
    assert launcher.returncode != 0
    resume = [line for line in stderr.splitlines() if line.startswith("interrupted (")]
    assert len(resume) == 1 and "resume with the same torchrun command" in resume[0]
    assert "last checkpoint step" in resume[0]
    assert "learners/" not in stderr  # torchrun's own lines only besides rank 0's
