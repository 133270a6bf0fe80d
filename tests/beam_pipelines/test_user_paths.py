"""Conversion user paths, run as a user runs them (`python -m beam_pipelines.convert` in a real
process): Ctrl-C, kill -9, two conversions to one output, skipped inputs, image size limit,
IDX orientation and class names, quiet workers and a true progress total.

Signal tests wait for observable states (the staging folder, the lock) rather than fixed
sleeps, and allow several times the expected durations: the machine may be loaded."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from beam_pipelines.verify import verify_dataset
from episodes.records.dataset_spec import load_spec
from tests.fixtures.conversion_processes import (
    NOISE,
    PIPELINE_STARTED_S,
    SLOW,
    STOPS_WITHIN_S,
    convert_command,
    run_command,
    staging_folders,
    start_in_own_group,
    wait_for,
    wait_group_gone,
    wait_pipeline_running,
)
from tests.fixtures.raw.omniglot import write_omniglot_fixture


@pytest.mark.slow
@pytest.mark.parametrize("every_source", [False, True], ids=["one-source", "all"])
def test_ctrl_c_stops_at_once_removes_staging_and_prints_one_line(every_source, slow_raw, tmp_path):
    out = tmp_path / "converted" / "omniglot"
    if every_source:  # convert --all over a root holding the same raw folder
        (tmp_path / "root").mkdir()
        (tmp_path / "root" / "omniglot").symlink_to(slow_raw)
        cmd = convert_command(tmp_path / "root", out.parent, "--all", *SLOW)
        said_first = "interrupted: conversions stopped, staging folders removed; no output changed"
    else:
        cmd = convert_command(slow_raw, out, *SLOW)
        said_first = (
            f"interrupted: conversion stopped and its staging folder removed; {out} was not"
        )
    proc = start_in_own_group(cmd)
    wait_pipeline_running(out, proc)
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
    time.sleep(0.3)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # an impatient second Ctrl-C
    except ProcessLookupError:
        pass
    stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S * 3)
    took = time.monotonic() - sent
    assert took < STOPS_WITHIN_S, f"Ctrl-C took {took:.1f} s to stop the conversion"
    assert proc.returncode == 130
    lines = [line for line in (stdout + stderr).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith("[convert")]
    assert len(said) == 1 and said[0].startswith(said_first), lines
    assert not staging_folders(out) and not out.exists()
    assert not (out.parent / f".{out.name}.lock").exists()
    wait_group_gone(proc.pid)


@pytest.mark.slow
def test_kill_9_leftovers_are_removed_by_the_next_run(slow_raw, tmp_path):
    out = tmp_path / "omniglot"
    proc = start_in_own_group(convert_command(slow_raw, out, *SLOW))
    staging = wait_pipeline_running(out, proc)
    os.kill(proc.pid, signal.SIGKILL)  # the launcher only: its workers must end by themselves
    proc.communicate(timeout=60)
    wait_group_gone(proc.pid)
    assert staging.is_dir()  # what kill -9 leaves behind
    small = tmp_path / "small_raw"
    write_omniglot_fixture(small)
    again = run_command(convert_command(small, out))
    assert again.returncode == 0, again.stderr
    assert f"removed {staging}: left by a conversion that did not finish" in again.stderr
    assert not staging_folders(out) and not (out.parent / f".{out.name}.lock").exists()
    assert load_spec(out).total_images == 152 and verify_dataset(out, progress=False).ok


def _progress_totals(text: str) -> list[tuple[int, int]]:
    return [
        (int(a.replace(",", "")), int(b.replace(",", "")))
        for a, b in re.findall(r"^\[convert\] ([\d,]+)/([\d,]+) images", text, re.M)
    ]


@pytest.mark.slow
def test_second_conversion_to_one_output_is_refused_while_the_first_lives(tmp_path):
    raw = tmp_path / "raw"
    write_omniglot_fixture(raw, drawers=8)
    planned = sum(1 for p in raw.rglob("*.png"))
    out = tmp_path / "omniglot"
    first = start_in_own_group(
        convert_command(raw, out, "--image-size", "256", "--direct_num_workers", "2")
    )
    live_staging = wait_for(
        lambda: staging_folders(out), "the first conversion's staging", proc=first
    )[0]
    counting = lambda: list(live_staging.glob("_spill/progress-*"))  # noqa: E731
    wait_for(counting, "the first conversion's encoders to count images", proc=first)
    os.killpg(first.pid, signal.SIGSTOP)  # alive, holding its lock, for as long as we need
    try:
        second = run_command(convert_command(raw, out, "--overwrite"))
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1, second.stderr
        assert "another conversion is writing this output" in second.stderr
        assert f"pid {first.pid}" in second.stderr and str(out) in second.stderr
        assert live_staging.is_dir()  # a live run's staging folder is never removed
        time.sleep(6)  # the first run's progress reporter sees time pass: it prints a line
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    assert verify_dataset(out, progress=False).ok and load_spec(out).total_images == 38 * 8
    # One progress total, the real number of images planned, never exceeded; no worker noise.
    totals = _progress_totals(stderr)
    assert totals and all(total == planned and done <= total for done, total in totals), stderr
    assert totals[-1] == (planned, planned)
    noise = [line for line in stderr.splitlines() if any(n in line for n in NOISE)]
    assert not noise, noise
    assert not (out.parent / f".{out.name}.lock").exists() and not staging_folders(out)


@pytest.mark.slow
def test_fifo_link_loops_and_folder_loops_are_listed_as_skipped(tmp_path):
    raw = tmp_path / "raw"
    write_omniglot_fixture(raw)
    alphabet = raw / "images_background" / "Alpha"
    char = alphabet / "character01"
    os.mkfifo(char / "x.png")  # opened for reading, it would block the conversion forever
    (char / "y.png").symlink_to("y.png")  # a symbolic link loop
    (char / "up").symlink_to("..")  # a folder looping back to its alphabet
    (alphabet / "loop").symlink_to(".")  # an alphabet folder containing itself
    out = tmp_path / "omniglot"
    result = run_command(convert_command(raw, out), timeout=240)
    assert result.returncode == 0, result.stderr
    spec = load_spec(out)
    assert spec.num_classes == 38 and spec.total_images == 152  # no class made of a loop
    rejected = {r["path"]: r["reason"] for r in spec.provenance["rejected"]}
    expected = {
        char / "x.png": "a named pipe (FIFO), not a regular file",
        char / "y.png": "a symbolic link loop",
        char / "up": f"a folder loop: it leads back to {alphabet.resolve()}, which contains it",
        alphabet / "loop": f"a folder loop: it leads back to {alphabet.resolve()}",
    }
    for path, reason in expected.items():
        assert rejected.get(str(path), "").startswith(reason), (path, rejected)
        assert f"rejected {path}: {reason}" in result.stdout  # the summary names each
    assert spec.provenance["rejected_count"] == len(rejected) == 5  # and the corrupt PNG
    assert "5 rejected" in result.stdout


def _bilevel_png(path: Path, side: int) -> None:
    """A valid 1-bit PNG of side x side pixels, written without holding its pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + b"\xff" * ((side + 7) // 8)  # filter byte, white pixels
    packer = zlib.compressobj(9)
    pixels = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@pytest.mark.slow
def test_image_over_the_shared_size_limit_is_rejected_at_conversion(tmp_path):
    from episodes.images.image_size_limit import MAX_IMAGE_PIXELS, size_problem

    raw = tmp_path / "raw"
    write_omniglot_fixture(raw)
    huge = raw / "images_evaluation" / "Omega" / "character01" / "0031_99.png"
    _bilevel_png(huge, 15_000)  # 225 megapixels
    out = tmp_path / "omniglot"
    result = run_command(convert_command(raw, out))
    assert result.returncode == 0, result.stderr
    reason = "image of 225.0 megapixels, over the 179.0-megapixel limit"
    assert f"rejected {huge}: {reason}" in result.stdout
    rejected = {r["path"]: r["reason"] for r in load_spec(out).provenance["rejected"]}
    assert rejected[str(huge)].startswith(reason)
    # What the converter accepted, verify and the reader open.
    assert run_command([sys.executable, "-m", "beam_pipelines.verify", str(out)]).returncode == 0
    fixed = ["--mode", "fixed", "--ways", "3", "--shots", "1", "--query", "1", "--episodes", "2"]
    read = [sys.executable, "-m", "episodes.read", "--dataset", str(out), "--split", "train"]
    # Fixed ways with Omniglot's alphabets in use: one error line naming the opt-out, as
    # Meta-Dataset's sampler refuses num_ways with use_bilevel_hierarchy.
    refused = run_command([*read, *fixed])
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ways=3"), refused.stderr
    assert "--no-use-bilevel-hierarchy" in lines[0]
    assert run_command([*read, *fixed, "--no-use-bilevel-hierarchy"]).returncode == 0
    # One limit: Pillow's in the verify and reader processes is the converter's.
    probe = "import PIL.Image as I, {}; print(2 * I.MAX_IMAGE_PIXELS)"  # Pillow's refusal
    for module in (
        "beam_pipelines.verify",
        "episodes.read",
        "beam_pipelines.conversion.image_codec",
    ):
        shown = run_command([sys.executable, "-c", probe.format(module)])
        assert shown.stdout.split()[-1] == str(MAX_IMAGE_PIXELS), (module, shown.stderr)
    assert size_problem(MAX_IMAGE_PIXELS, 1) is None and size_problem(MAX_IMAGE_PIXELS + 1, 1)


def _emnist_cmd(root: Path, out: Path, *extra: str) -> list[str]:
    return convert_command(root, out, "--emnist-split", "mnist", *extra, source="emnist")


@pytest.mark.slow
def test_idx_orientation_and_class_names_file(tmp_path):
    import io

    import numpy as np
    from PIL import Image

    from episodes.records.record_reader import RecordReader
    from tests.fixtures.raw.emnist import write_emnist_fixture

    fixture = write_emnist_fixture(tmp_path / "raw")
    names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
             "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]  # fmt: skip
    names_file = tmp_path / "fashion_classes.txt"
    names_file.write_text("\n".join(names) + "\n")
    upright, as_stored = tmp_path / "upright", tmp_path / "as_stored"
    assert run_command(_emnist_cmd(fixture.root, upright)).returncode == 0
    flags = ("--no-idx-transpose", "--class-names", str(names_file))
    result = run_command(_emnist_cmd(fixture.root, as_stored, *flags))
    assert result.returncode == 0, result.stderr
    spec = load_spec(as_stored)
    assert spec.class_names == names and load_spec(upright).class_names == list("0123456789")
    assert spec.provenance["class_names_from"] == str(names_file)

    def first(folder: Path) -> np.ndarray:  # record 0 of class 3: the first test row of label 3
        return np.asarray(Image.open(io.BytesIO(RecordReader(folder).read_example(3, 0)[0])))

    label = fixture.labels["mnist"]["test"]
    expected = fixture.upright["mnist"]["test"][np.flatnonzero(label == 3)[0]]
    np.testing.assert_array_equal(first(upright), expected)
    np.testing.assert_array_equal(first(as_stored), expected.T)  # the IDX rows as they are
    # A names file that does not fit the split: one line naming it, before any work.
    names_file.write_text("\n".join(names[:9]) + "\n")
    bad = run_command(_emnist_cmd(fixture.root, tmp_path / "bad", "--class-names", str(names_file)))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert f"--class-names {names_file}: 9 names; expected 10" in bad.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_ctrl_c_in_the_shards_job_prints_one_line_and_leaves_nothing(tmp_path):
    """`beam_pipelines.episodes` stops like a conversion: one line, no staging folder, 130."""
    raw = tmp_path / "raw"
    write_omniglot_fixture(raw, drawers=8)
    dataset = tmp_path / "omniglot"
    assert run_command(convert_command(raw, dataset)).returncode == 0
    out = tmp_path / "shards"
    cmd = [sys.executable, "-m", "beam_pipelines.episodes", "--dataset", str(dataset)]
    cmd += ["--split", "train", "--episodes", "200000", "--num-shards", "4"]
    cmd += ["--output", str(out), "--direct_num_workers", "2"]
    proc = start_in_own_group(cmd)
    wait_for(lambda: sorted(tmp_path.glob(".shards.tmp*")), "the staging folder", proc=proc)
    time.sleep(PIPELINE_STARTED_S)
    assert proc.poll() is None, "the shards job ended early"
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S * 3)
    assert time.monotonic() - sent < STOPS_WITHIN_S
    assert proc.returncode == 130
    lines = [line for line in (stdout + stderr).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith("[")]  # progress lines aside
    assert said == [
        f"interrupted: shards job stopped and its staging folder removed; {out} was not written"
    ], lines
    assert not sorted(tmp_path.glob(".shards.tmp*")) and not out.exists()
    wait_group_gone(proc.pid)
