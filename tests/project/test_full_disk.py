"""A full disk (issue 25, item 3): every command ends in one line naming the path, leaves
nothing half-written (no 0-byte picture, no cut checkpoint or log row) and no empty or staging
folder behind.

The disk is a real small file system (tmpfs of a fixed size, mounted as root) where the machine
allows it; elsewhere writes under the folder fail with ENOSPC at the write call
(`tests/fixtures/enospc_launcher.py`), and the conversion case (Beam workers write from other
processes) is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from learners import train as train_cli
from tests.fixtures.cli_processes import REPO, TINY
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.reader_datasets import write_dataset

NO_SPACE = "No space left on device (free some space or choose another --output)"


@dataclass
class SmallDisk:
    """A folder with `size` bytes of room: mounted (`real`) or simulated at the write call."""

    folder: Path
    size: int
    real: bool

    def run(self, module: str, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
        command = [sys.executable, "-m", module, *args]
        if not self.real:
            launcher = str(REPO / "tests" / "tests/fixtures/enospc_launcher.py")
            command = [sys.executable, launcher, str(self.folder), str(self.size), "-m", module]
            command += list(args)
        return subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )

    def everything(self) -> list[str]:
        return sorted(str(p.relative_to(self.folder)) for p in self.folder.rglob("*"))


def _mount_tmpfs(folder: Path, size: int) -> bool:
    if os.geteuid() != 0 or os.environ.get("FULL_DISK_SIMULATED"):  # the latter: try the other
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
    )
    return done.returncode == 0


@pytest.fixture
def small_disk(request, tmp_path: Path) -> Iterator[SmallDisk]:
    size = getattr(request, "param", 0)
    folder = tmp_path / "disk"
    folder.mkdir()
    real = _mount_tmpfs(folder, max(size, 4096))
    try:
        if real and size == 0:  # no room at all: fill what tmpfs keeps (a page at least)
            try:
                with open(folder / "filler", "wb") as handle:
                    while True:
                        handle.write(b"\0" * 4096)
                        handle.flush()
            except OSError:
                pass
        yield SmallDisk(folder, size, real)
    finally:
        if real:
            subprocess.run(["umount", str(folder)], check=True)


def one_line(result: subprocess.CompletedProcess, path: Path) -> None:
    said = [line for line in result.stderr.splitlines() if line.strip() and line[0] != "["]
    assert result.returncode == 2, result.stderr
    assert said == [f"error: {path}: {NO_SPACE}"], result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("small_disk", [200_000], indirect=True)
def test_a_full_disk_while_saving_a_checkpoint(small_disk: SmallDisk) -> None:
    run = small_disk.folder / "run"
    args = ["--method", "protonet", "--synthetic", "--steps", "8", "--checkpoint-every", "2"]
    args += ["--validation-episodes", "0", "--output", str(run), *TINY]
    result = small_disk.run("learners.train", *args)
    saved = sorted(p.name for p in (run / "checkpoints").iterdir())
    failed = [f"step_{s:08d}.pt" for s in (2, 4, 6, 8) if f"step_{s:08d}.pt" not in saved][0]
    one_line(result, run / "checkpoints" / failed)
    assert all(not name.startswith(".") for name in saved)  # no cut temporary file left
    assert "last.pt" in saved and len(saved) >= 2  # the snapshots before it, intact
    import torch

    step = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["step"]
    assert f"step_{step:08d}.pt" == saved[-1] and step < int(failed[5:13])


@pytest.mark.slow
@pytest.mark.parametrize("small_disk", [0], indirect=True)
def test_a_full_disk_leaves_no_evaluation_folder_and_no_picture(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert train_cli.main(["--method", "protonet", "--synthetic", "--steps", "2",
                           "--validation-episodes", "0", "--output", str(run), *TINY]) == 0  # fmt: skip
    before = small_disk.everything()
    out = small_disk.folder / "eval"
    evaluation = small_disk.run(
        "learners.evaluate", "--run", str(run), "--episodes", "2", "--no-progress",
        "--no-hardness", "--output", str(out),
    )  # fmt: skip
    one_line(evaluation, out / "episodes.csv")
    assert small_disk.everything() == before  # no folder, empty or not, no staging
    dataset = write_dataset(tmp_path / "toy", per_class=(12,) * 15).root
    picture = small_disk.folder / "grid.png"
    grid = small_disk.run(
        "episodes.read", "--dataset", str(dataset), "--split", "train", "--episodes", "1",
        "--save-grid", str(picture),
    )  # fmt: skip
    one_line(grid, picture)
    assert small_disk.everything() == before  # no 0-byte PNG, no temporary one


@pytest.mark.slow
@pytest.mark.parametrize("small_disk", [200_000], indirect=True)
def test_a_full_disk_during_a_conversion_with_two_workers(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    if not small_disk.real:
        pytest.skip("Beam workers write from their own processes: needs a small file system")
    raw = write_omniglot_fixture(tmp_path / "raw").root
    out = small_disk.folder / "omniglot"
    result = small_disk.run(
        "beam_pipelines.convert", "--source", "omniglot", "--input", str(raw),
        "--output", str(out), "--direct_num_workers", "2",
    )  # fmt: skip
    one_line(result, out)
    assert len(result.stderr.splitlines()) <= 4, result.stderr  # progress lines and the error
    assert small_disk.everything() == []  # no staging folder, no lock, no output


@pytest.mark.slow
@pytest.mark.parametrize("small_disk", [40_000], indirect=True)
def test_a_full_disk_while_caching_or_embedding_leaves_no_folder(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    """Issue 30, item 4: the decoded cache and the embedding job end in one line naming their
    output (the cache's flag is --cache-root) and leave no folder they created."""
    if not small_disk.real:
        pytest.skip("Beam workers write from their own processes: needs a small file system")
    dataset = write_dataset(tmp_path / "toy", per_class=(12,) * 15).root
    cache = small_disk.run(
        "beam_pipelines.cache", "--dataset", str(dataset), "--image-size", "84",
        "--cache-root", str(small_disk.folder),
    )  # fmt: skip
    said = [line for line in cache.stderr.splitlines() if line.strip() and line[0] != "["]
    assert cache.returncode == 2, cache.stderr
    target = small_disk.folder / "toy" / "decoded_84x84"
    hint = "(free some space or choose another --cache-root)"
    assert said == [f"error: {target}: No space left on device {hint}"], cache.stderr
    assert small_disk.everything() == []  # not even the toy/ folder made for it
    model = tmp_path / "model"
    made = [
        "--method", "multiclass", "--dataset", str(dataset), "--steps", "1", "--batch-size",
        "8", "--validation-episodes", "0", "--output", str(model), *TINY,
    ]  # fmt: skip
    assert train_cli.main(made) == 0
    with open(small_disk.folder / "filler", "wb") as filler:  # leave less room than the sums need
        filler.write(b"\0" * (small_disk.size - 2048))
    output = small_disk.folder / "sub" / "embeddings.npz"
    embed = small_disk.run(
        "splits.embed", "--dataset", str(dataset), "--model", str(model), "--output", str(output),
        "--no-progress",
    )  # fmt: skip
    one_line(embed, output)
    assert small_disk.everything() == ["filler"]  # no sub/ folder, no work folder
