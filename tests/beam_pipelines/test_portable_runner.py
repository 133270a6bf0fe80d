"""The conversion and shard jobs through Beam's PortableRunner (embedded job service, LOOPBACK
workers): the submission path of Flink, Spark and Dataflow Runner v2, run locally. Every output
file must be byte-identical to the DirectRunner's. SDK workers from a real worker pool on
127.0.0.1 (`--environment_type EXTERNAL`): a pool whose `python` lacks apache_beam or this
project ends the command in one line, never a silent hang (beam_pipelines.runners.portable_preflight)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apache_beam
import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.episodes import main as shards_main
from beam_pipelines.runners.options import make_runner
from episodes.records.dataset_spec import load_spec
from tests.fixtures.cli_processes import REPO, python_m
from tests.fixtures.object_store import wait_until_listening
from tests.fixtures.portable_runner_input import write_runner_check_input
from tests.fixtures.ports import free_port
from tests.fixtures.reader_datasets import write_dataset

PORTABLE = [
    "--runner",
    "PortableRunner",
    "--job_endpoint",
    "embed",
    "--environment_type",
    "LOOPBACK",
]


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _assert_same_folders(direct: Path, portable: Path) -> None:
    a, b = files_of(direct), files_of(portable)
    assert sorted(a) == sorted(b)
    different = [name for name in a if a[name] != b[name]]
    assert not different, f"files differ between DirectRunner and PortableRunner: {different}"


@pytest.mark.parametrize("source", ["omniglot", "emnist"])
def test_conversion_is_byte_identical_on_the_portable_runner(source, tmp_path, capsys):
    common = write_runner_check_input(source, tmp_path / "raw")
    assert convert_cli.main([*common, "--output", str(tmp_path / "direct")]) == 0
    assert convert_cli.main([*common, "--output", str(tmp_path / "portable"), *PORTABLE]) == 0
    assert "PortableRunner" in capsys.readouterr().out
    _assert_same_folders(tmp_path / "direct", tmp_path / "portable")
    spec = load_spec(tmp_path / "portable")
    assert spec.total_images > 0 and spec.provenance["rejected_count"] >= 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_episode_shards_are_byte_identical_on_the_portable_runner(tmp_path):
    toy = write_dataset(tmp_path / "toy")
    common = [
        "--dataset",
        str(toy.root),
        "--split",
        "test",
        "--episodes",
        "9",
        "--seed",
        "5",
        "--num-shards",
        "4",
        "--mode",
        "fixed",
        "--ways",
        "3",
        "--shots",
        "2",
        "--query",
        "2",
    ]
    assert shards_main([*common, "--output", str(tmp_path / "direct")]) == 0
    assert shards_main([*common, "--output", str(tmp_path / "portable"), *PORTABLE]) == 0
    _assert_same_folders(tmp_path / "direct", tmp_path / "portable")
    assert len(list((tmp_path / "portable").glob("episodes-*.tfrecords"))) == 4


def test_direct_num_workers_refused_for_the_portable_runner():
    """Its SDK workers are set by its own flags: a DirectRunner worker count is refused in one
    line, not silently ignored (one SDK worker ran whatever it said)."""
    with pytest.raises(ValueError, match="--direct_num_workers 2 applies to the DirectRunner"):
        make_runner(argparse.Namespace(runner="PortableRunner", direct_num_workers=2), [])


# -- SDK workers from a worker pool (--environment_type EXTERNAL) ----------------------------

OWN_PACKAGES = {"beam_pipelines", "episodes", "splits", "learners"}


def _python_on_path(folder: Path, *, beam: bool) -> Path:
    """A folder holding a `python` that a worker pool will start: this interpreter without any
    site-packages (`beam=False`: no apache_beam, a bare python), or with apache_beam and every
    other installed package but none of this repository's (`beam=True`)."""
    folder.mkdir()
    environment = ""
    if beam:
        site = Path(apache_beam.__file__).resolve().parents[1]
        copy = folder / "site"
        copy.mkdir()
        for entry in site.iterdir():
            if entry.name.split(".")[0] not in OWN_PACKAGES and "fewshot" not in entry.name:
                (copy / entry.name).symlink_to(entry)
        environment = f"PYTHONPATH={copy} "
    script = folder / "python"
    script.write_text(f'#!/bin/sh\n{environment}exec {sys.executable} -S "$@"\n')
    script.chmod(0o755)
    return folder


@contextmanager
def _worker_pool(bin_folder: Path, cwd: Path, log: Path) -> Iterator[int]:
    """`python -m apache_beam.runners.worker.worker_pool_main` (this interpreter) whose workers
    run the `python` of `bin_folder`, its output in `log`; yields its port once it accepts
    connections on 127.0.0.1, and stops it (and the workers it started) on leaving."""
    port = free_port()
    env = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    with open(log, "wb") as out:
        pool = subprocess.Popen(
            [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main"]
            + ["--service_port", str(port)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_listening(pool, port, log, "the worker pool")
        yield port
    finally:
        pool.send_signal(signal.SIGINT)  # its atexit hook stops the workers it started
        try:
            pool.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pool.kill()
            pool.wait()


def _external(port: int, *extra: str) -> list[str]:
    return [
        "--runner",
        "PortableRunner",
        "--job_endpoint",
        "embed",
        "--environment_type",
        "EXTERNAL",
        "--environment_config",
        f"localhost:{port}",
        *extra,
    ]


def _convert_through_pool(
    raw: list[str], output: Path, port: int, worker_start_timeout: str
) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m beam_pipelines.convert` of `raw` to `output` with SDK workers from the pool
    at `port` (cli_processes.python_m: its time limit ends a hang as a failure); the finished
    process and the seconds it ran."""
    flags = _external(port, "--worker-start-timeout", worker_start_timeout)
    started = time.monotonic()
    done = python_m("beam_pipelines.convert", *raw, "--output", str(output), *flags)
    return done, time.monotonic() - started


def _error_line(stderr: str) -> str:
    """The command's one fault line; no traceback around it."""
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.slow
def test_a_worker_pool_of_this_virtualenv_runs_the_conversion_unchanged(tmp_path, capsys):
    """The right set-up: the pool's `python` is this interpreter, the repository on its path.
    The probe names the workers' interpreter; every file is byte-identical to the
    DirectRunner's."""
    with _worker_pool(Path(sys.executable).parent, REPO, tmp_path / "pool.log") as port:
        common = write_runner_check_input("omniglot", tmp_path / "raw")
        assert convert_cli.main([*common, "--output", str(tmp_path / "direct")]) == 0
        capsys.readouterr()
        portable = [*common, "--output", str(tmp_path / "pool"), *_external(port)]
        assert convert_cli.main(portable) == 0
    err = capsys.readouterr().err
    checked = [line for line in err.splitlines() if line.startswith("[workers] ")]
    assert len(checked) == 1, err
    assert f"--environment_config localhost:{port}" in checked[0]
    assert f"apache_beam {apache_beam.__version__}" in checked[0]
    _assert_same_folders(tmp_path / "direct", tmp_path / "pool")


@pytest.mark.slow
def test_a_pool_whose_python_lacks_apache_beam_ends_in_one_line_not_a_hang(tmp_path):
    """Its workers die at start (their error only in the pool's output) and Beam's job service
    waits for them forever; the probe gives up after --worker-start-timeout, in one line that
    says how to start the pool, and nothing is written."""
    bare = _python_on_path(tmp_path / "bin", beam=False)
    check = subprocess.run([bare / "python", "-c", "import apache_beam"], capture_output=True)
    assert check.returncode != 0  # the premise: this `python` cannot import apache_beam
    raw = write_runner_check_input("omniglot", tmp_path / "raw")
    with _worker_pool(bare, tmp_path, tmp_path / "pool.log") as port:
        done, took = _convert_through_pool(raw, tmp_path / "out", port, "4")
    assert done.returncode == 2, done.stderr
    line = _error_line(done.stderr)
    assert line.startswith(
        f"error: no SDK worker of --environment_type EXTERNAL --environment_config "
        f"localhost:{port} started within 4 s (--worker-start-timeout)"
    )
    assert f"PATH={Path(sys.executable).parent}:$PATH" in line
    assert f"worker_pool_main --service_port {port}" in line
    assert took >= 4
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_pool_whose_python_lacks_this_project_names_the_interpreter(tmp_path):
    """apache_beam imports, this repository does not: without the probe Beam failed the job
    with hundreds of traceback lines; now one line names the worker's interpreter, its
    versions and each package it cannot import."""
    beam_only = _python_on_path(tmp_path / "bin", beam=True)
    raw = write_runner_check_input("omniglot", tmp_path / "raw")
    with _worker_pool(beam_only, tmp_path, tmp_path / "pool.log") as port:
        done, _ = _convert_through_pool(raw, tmp_path / "out", port, "60")
    assert done.returncode == 2, done.stderr
    line = _error_line(done.stderr)
    assert line.startswith(
        f"error: the SDK workers of --environment_type EXTERNAL --environment_config "
        f"localhost:{port} run {sys.executable} (Python "
    )
    assert f"apache_beam {apache_beam.__version__}), which cannot import" in line
    for package in sorted(OWN_PACKAGES):
        assert f"{package} (ModuleNotFoundError: No module named '{package}')" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_no_worker_pool_at_the_address_is_one_line(tmp_path, capsys):
    port = free_port()  # nothing listens there
    raw = write_runner_check_input("omniglot", tmp_path / "raw")
    assert convert_cli.main([*raw, "--output", str(tmp_path / "out"), *_external(port)]) == 2
    line = _error_line(capsys.readouterr().err)
    assert f"no worker pool answers at localhost:{port}" in line
    assert "Connection refused" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_no_job_service_at_the_endpoint_is_one_line(tmp_path, capsys):
    raw = write_runner_check_input("omniglot", tmp_path / "raw")
    flags = _external(free_port(), "--job_server_timeout", "2")
    flags[flags.index("embed")] = f"localhost:{free_port()}"
    assert convert_cli.main([*raw, "--output", str(tmp_path / "out"), *flags]) == 2
    line = _error_line(capsys.readouterr().err)
    assert "could not be submitted to the job service at localhost:" in line
    assert "check --job_endpoint" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--environment_type", "PROCESS", "--environment_config", '{"command": "/bin/boot"}'],
            "Beam's embedded job service (--job_endpoint embed) cannot start PROCESS workers",
        ),
        (["--environment_type", "PROCESS"], "PROCESS needs the worker command"),
        (["--environment_type", "EXTERNAL"], "EXTERNAL needs the worker pool's address"),
    ],
)
def test_environments_that_cannot_start_are_refused_before_any_job(flags, expected):
    """Known without starting anything: each was a traceback from inside the job before."""
    args = argparse.Namespace(runner="PortableRunner", direct_num_workers=1)
    with pytest.raises(ValueError, match=re.escape(expected)):
        make_runner(args, ["--job_endpoint", "embed", *flags])


def test_worker_start_timeout_is_checked_and_zero_skips_the_probe():
    args = argparse.Namespace(runner="PortableRunner", direct_num_workers=1)
    args.worker_start_timeout = -1.0
    with pytest.raises(ValueError, match="--worker-start-timeout -1.0: expected a number"):
        make_runner(args, [])
    # 0: no probe job, so even an address where no pool listens passes the preflight
    args.worker_start_timeout = 0.0
    choice = make_runner(args, _external(free_port())[2:])
    assert choice.description == "PortableRunner"


def test_the_probe_reads_the_worker_report_from_a_failed_jobs_text():
    """The report crosses from the worker in the job's failure text between two markers."""
    from beam_pipelines.runners.portable_preflight import MARKER, _report_in

    report = {"python": "/usr/bin/python3", "failed": {"episodes": "ModuleNotFoundError: x"}}
    text = f"Traceback ...\nRuntimeError: {MARKER}{json.dumps(report)}{MARKER}\n"
    assert _report_in(text) == report
    assert _report_in("RuntimeError: something else") is None
