"""Damaged records end `learners.train` and `learners.evaluate` in one `error:` line and exit
status 2, as `episodes.read` does (issue 30 item 3), wherever the record is read: in the
training process, in DataLoader workers, in the reader's decode processes, in a batched
evaluation. The datasets are real converted folders with a flipped byte or two class files
swapped, and the commands run as a user runs them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from learners import train as train_cli
from tests.fixtures.cli_processes import TINY, python_m
from tests.fixtures.reader_datasets import write_dataset

EPISODES = ["--ways", "5", "--shots", "1", "--query", "2", "--validation-episodes", "0"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """An intact dataset, the same with one byte flipped in every class file, and the same
    with pairs of class files (and their indexes) swapped; a run trained on the intact one."""
    root = tmp_path_factory.mktemp("damaged")
    intact = write_dataset(root / "intact", per_class=(12,) * 15).root
    flipped = Path(shutil.copytree(intact, root / "flipped"))
    for path in sorted(flipped.glob("*.tfrecords")):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    swapped = Path(shutil.copytree(intact, root / "swapped"))
    for a, b in ((0, 1), (2, 3), (5, 6), (7, 8), (10, 11), (12, 13)):
        for suffix in (".tfrecords", ".index"):
            first, second = swapped / f"{a}{suffix}", swapped / f"{b}{suffix}"
            first.rename(root / "x")
            second.rename(first)
            (root / "x").rename(second)
    run = root / "run"
    argv = ["--method", "protonet", "--dataset", str(intact), "--steps", "2", *EPISODES]
    assert train_cli.main([*argv, *TINY, "--output", str(run)]) == 0
    return {"flipped": flipped, "swapped": swapped, "run": run, "root": root}


def _one_error_line(result, folder: Path) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(errors) == 1, result.stderr
    assert f"file {folder}{'/'}" in errors[0]  # names the damaged class file
    return errors[0]


def _expected(damage: str) -> str:
    return "corrupt record" if damage == "flipped" else "(class files renamed or swapped?)"


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage, method, reading",
    [
        ("flipped", "protonet", ["--loader-workers", "2"]),
        ("swapped", "protonet", ["--loader-workers", "0", "--decode-processes", "2"]),
        ("flipped", "multiclass", ["--loader-workers", "0"]),
    ],
)
def test_train_on_damaged_records_ends_in_one_line(folders, tmp_path, damage, method, reading):
    folder = folders[damage]
    shape = EPISODES if method == "protonet" else ["--batch-size", "16", *EPISODES[-2:]]
    out = tmp_path / "run"
    result = python_m(
        "learners.train", "--method", method, "--dataset", str(folder), "--steps", "20",
        *shape, *reading, *TINY, "--output", str(out),
    )  # fmt: skip
    assert _expected(damage) in _one_error_line(result, folder)
    assert not list(out.glob("checkpoints/*.pt"))  # nothing trained on the damaged data


@pytest.mark.slow
@pytest.mark.parametrize("damage, per_batch", [("flipped", "1"), ("swapped", "4")])
def test_evaluate_on_damaged_records_ends_in_one_line(folders, damage, per_batch):
    folder, out = folders[damage], folders["root"] / f"eval-{damage}"
    result = python_m(
        "learners.evaluate", "--run", str(folders["run"]), "--dataset", str(folder),
        "--episodes", "10", "--episodes-per-batch", per_batch, "--no-progress",
        "--output", str(out),
    )  # fmt: skip
    assert _expected(damage) in _one_error_line(result, folder)
    assert not out.exists()  # no half-written evaluation folder
