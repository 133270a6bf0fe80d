"""Bounded options and smaller user paths (issue 25, items 8 and 9): size options within the
image size limit of converted datasets, devices the toolkit runs on, class files whose names
are not trusted, exit code 2 for bad input, evaluation episodes counted from the shards, and
the real error before any note on decoding."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from beam_pipelines import episodes as shards_cli
from episodes.images.image_size_limit import MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE
from episodes.reading.decode_processes import ReaderNote
from episodes.reading.reader import EpisodeReader
from episodes.records.record_reader import CorruptRecordError
from episodes.sampling.sampler import SamplerConfig
from learners import evaluate
from learners import train as train_cli
from tests.fixtures.cli_processes import TINY, python_m
from tests.fixtures.reader_datasets import write_dataset


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("bounds") / "toy", per_class=(12,) * 15).root


def test_the_largest_side_is_the_largest_square_under_the_limit() -> None:
    assert MAX_IMAGE_SIDE**2 <= MAX_IMAGE_PIXELS < (MAX_IMAGE_SIDE + 1) ** 2


def test_size_options_are_bounded_by_the_image_size_limit(toy: Path, tmp_path: Path, capsys):
    out = tmp_path / "out" / "omniglot"
    from beam_pipelines import convert

    huge = str(MAX_IMAGE_SIDE + 1)
    assert convert.main(["--source", "omniglot", "--input", str(tmp_path), "--output",
                         str(out), "--image-size", huge]) == 2  # fmt: skip
    assert (
        capsys.readouterr().err == f"error: --image-size {huge}: expected an integer in 1..13377\n"
    )
    assert not (tmp_path / "out").exists()  # refused before anything was made
    run = tmp_path / "run"
    args = ["--method", "protonet", "--synthetic", "--steps", "2", "--output", str(run)]
    assert train_cli.main([*args, "--image-size", huge]) == 2
    assert (
        capsys.readouterr().err == f"error: --image-size {huge}: expected an integer in 1..13377\n"
    )
    read = python_m("episodes.read", "--dataset", str(toy), "--split", "train",
                    "--image-size", huge)  # fmt: skip
    assert read.returncode == 2 and read.stderr.startswith(f"error: image_size={huge}: expected")
    assert len(read.stderr.splitlines()) == 1 and not run.exists()


@pytest.mark.parametrize("device", ["mps", "xpu", "cuda:7", "tpu"])
def test_devices_the_toolkit_does_not_run_on_are_refused_in_one_line(
    tmp_path: Path, capsys, device: str
) -> None:
    run = tmp_path / "run"
    args = ["--method", "protonet", "--synthetic", "--steps", "2", "--output", str(run)]
    assert train_cli.main([*args, *TINY, "--device", device]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --device {device!r}: ") and len(err.splitlines()) == 1
    assert not run.exists()


def test_swapped_class_files_are_refused_naming_the_file(toy: Path, tmp_path: Path) -> None:
    swapped = tmp_path / "swapped"
    write_dataset(swapped, per_class=(12,) * 15)
    for suffix in (".tfrecords", ".tfrecords.index"):
        first, second = swapped / f"0{suffix}", swapped / f"1{suffix}"
        if first.exists():
            first.rename(tmp_path / "x")
            second.rename(first)
            (tmp_path / "x").rename(second)
    with EpisodeReader([swapped], "train", SamplerConfig.fixed(5, 1, 1), 0) as reader:
        with pytest.raises(CorruptRecordError) as info:
            for index in range(20):  # until an episode takes class 0 or 1
                reader.episode(index)
    message = str(info.value)
    assert "its first record is labelled class" in message
    assert any(f"file {swapped / f'{c}.tfrecords'}, class {c}:" in message for c in (0, 1))
    read = python_m("episodes.read", "--dataset", str(swapped), "--split", "train",
                    "--ways", "5", "--shots", "1", "--query", "1", "--episodes", "20")  # fmt: skip
    assert read.returncode == 2 and "Traceback" not in read.stderr
    assert read.stderr.startswith("error: file ") and "labelled class" in read.stderr
    # the intact dataset reads as before
    with EpisodeReader([toy], "train", SamplerConfig.fixed(5, 1, 1), 0) as reader:
        assert all(reader.episode(i).support_images.shape[0] == 5 for i in range(5))


def test_bad_input_to_the_reader_exits_2_as_the_readme_says(toy: Path) -> None:
    read = python_m("episodes.read", "--dataset", str(toy), "--split", "sideways")
    assert read.returncode == 2
    assert read.stderr.startswith("error: unknown split 'sideways'")


def test_the_real_error_comes_before_any_note_on_decoding(toy: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="shots=100000"):
            EpisodeReader([toy], "train", SamplerConfig.fixed(5, 100000, 1), 0)
    assert not [w for w in caught if issubclass(w.category, ReaderNote)]


def test_evaluation_on_shards_takes_the_count_from_the_shards(
    toy: Path, tmp_path: Path, capsys
) -> None:
    shards = tmp_path / "shards"
    assert shards_cli.main([
        "--dataset", str(toy), "--split", "test", "--episodes", "7", "--num-shards", "2",
        "--output", str(shards), "--ways", "5", "--shots", "1", "--query", "2",
    ]) == 0  # fmt: skip
    run = tmp_path / "run"
    assert train_cli.main(["--method", "protonet", "--synthetic", "--steps", "2",
                           "--validation-episodes", "0", "--output", str(run), *TINY]) == 0  # fmt: skip
    common = ["--run", str(run), "--episode-shards", str(shards), "--no-hardness", "--no-progress"]
    capsys.readouterr()
    assert evaluate.main([*common, "--episodes", "8"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: --episodes 8: --episode-shards {shards} holds 7 episodes; pass --episodes 7 or "
        "fewer (or leave it out for all of them)\n"
    )
    assert not (run / "eval").exists()
    assert evaluate.main(common) == 0
    out = capsys.readouterr().out
    summary = json.loads(next((run / "eval").glob("*/summary.json")).read_text())
    assert summary["episodes"] == 7 and summary["accuracy"]["n"] == 7, out
