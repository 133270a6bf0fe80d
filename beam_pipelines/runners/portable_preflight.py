"""Before a job on a portable runner whose SDK workers start outside this process
(`--environment_type EXTERNAL`, a worker pool, or `PROCESS`): check that a worker starts and
imports this project.

A worker pool (`python -m apache_beam.runners.worker.worker_pool_main`) starts each worker as
`python -c ...` with the `python` first on the pool's PATH; where that interpreter lacks
apache_beam the worker dies at once, its error goes to the pool's output only, and the job
service waits for it forever (Beam's Python job service without a timeout, its Java one with a
log line every 2 minutes): the launcher hangs without a word. So a one-element probe job runs
first through the same runner and flags, in a child process killed if stuck; it reports the
worker's interpreter and which of this repository's packages it cannot import, and a worker
that does not run it within `--worker-start-timeout` seconds ends the command in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence

from episodes.util.cli_errors import UserError

__all__ = [
    "add_worker_start_timeout_argument",
    "check_sdk_workers",
    "DEFAULT_WORKER_START_TIMEOUT_S",
    "ENVIRONMENT_URNS",
    "HINT_AFTER_S",
    "main",
    "MARKER",
    "PORTABLE_RUNNERS",
    "PROBED_ENVIRONMENTS",
    "refuse_unrunnable_environment",
    "report_worker",
    "run_probe",
    "SUBMIT_ALLOWANCE_S",
    "worker_environment",
    "WORKER_PACKAGES",
    "worker_start_timeout",
    "WorkerStartError",
]

DEFAULT_WORKER_START_TIMEOUT_S = 180.0
PROBED_ENVIRONMENTS = {"EXTERNAL", "PROCESS"}
ENVIRONMENT_URNS = {"beam:env:external:v1": "EXTERNAL", "beam:env:process:v1": "PROCESS"}
# The Beam runners whose SDK workers follow --environment_type (a job service starts them).
PORTABLE_RUNNERS = {"portablerunner", "flinkrunner", "sparkrunner", "prismrunner"}
# This repository's top-level packages: every DoFn of its jobs lives in one of them.
WORKER_PACKAGES = ("beam_pipelines", "episodes", "splits", "learners")
MARKER = "FEWSHOT_WORKER_PROBE"
HINT_AFTER_S = 15.0
# The probe's own allowance to reach the job service, beyond the worker's start.
SUBMIT_ALLOWANCE_S = 90.0


class WorkerStartError(UserError, ValueError):
    """SDK workers that the runner's flags cannot start, or that start but cannot import this
    project: one line saying which flag or install to fix."""


def add_worker_start_timeout_argument(parser) -> None:
    parser.add_argument(
        "--worker-start-timeout",
        type=float,
        default=DEFAULT_WORKER_START_TIMEOUT_S,
        metavar="SECONDS",
        help="with --environment_type EXTERNAL or PROCESS on a portable runner: how long a "
        "probe job waits for an SDK worker to start and import this project before saying "
        f"what is wrong (default {DEFAULT_WORKER_START_TIMEOUT_S:g}; 0 skips the check)",
    )


def worker_start_timeout(args: argparse.Namespace) -> float:
    """`--worker-start-timeout`, checked: 0 (no check) or a positive, finite number."""
    value = getattr(args, "worker_start_timeout", DEFAULT_WORKER_START_TIMEOUT_S)
    if not (0 <= value < float("inf")):
        raise WorkerStartError(
            f"--worker-start-timeout {value}: expected a number of seconds (0 skips the check)"
        )
    return value


def worker_environment(runner: str, options) -> tuple[str, str] | None:
    """(kind, config) of the SDK workers' environment when they start outside this process on a
    portable runner (EXTERNAL or PROCESS), else None (LOOPBACK, DOCKER, Dataflow, ...)."""
    from apache_beam.options.pipeline_options import PortableOptions

    if runner.lower().rsplit(".", 1)[-1] not in PORTABLE_RUNNERS:
        return None
    portable = options.view_as(PortableOptions)
    kind = str(portable.environment_type or "")
    kind = ENVIRONMENT_URNS.get(kind.lower(), kind.upper())
    if kind not in PROBED_ENVIRONMENTS:
        return None
    config = portable.environment_config or ""
    if kind == "PROCESS" and not config:
        command = portable.lookup_environment_option("process_command")
        config = json.dumps({"command": command}) if command else ""
    return kind, config


def refuse_unrunnable_environment(kind: str, config: str, options) -> None:
    """The environment faults known without starting anything, each in one line."""
    from apache_beam.options.pipeline_options import PortableOptions

    described = f"--environment_type {kind}"
    if kind == "EXTERNAL" and not config:
        raise WorkerStartError(
            f"{described} needs the worker pool's address: --environment_config HOST:PORT "
            f"(--environment_options external_service_address alone fails inside Beam "
            f"{_beam_version()}; a "
            "pool started with `python -m apache_beam.runners.worker.worker_pool_main "
            "--service_port PORT`)"
        )
    if kind == "PROCESS":
        try:
            command = json.loads(config).get("command") if config else None
        except (ValueError, AttributeError):
            command = None
        if not command:
            raise WorkerStartError(
                f"{described} needs the worker command: --environment_config "
                '\'{"command": "/path/to/boot"}\' (or --environment_options process_command=...)'
            )
        if options.view_as(PortableOptions).job_endpoint == "embed":
            raise WorkerStartError(
                f"{described}: Beam's embedded job service (--job_endpoint embed) cannot start "
                "PROCESS workers; use --environment_type EXTERNAL with a worker pool, or a "
                "Flink or Spark job server"
            )


def _beam_version() -> str:
    import apache_beam

    return apache_beam.__version__


def check_sdk_workers(runner: str, beam_args: Sequence[str], options, timeout_s: float) -> str:
    """Run the probe job for the EXTERNAL / PROCESS workers of `runner` (in a child process,
    killed if it outlives its allowance); one line (ValueError) naming the environment, the
    worker's interpreter and what to do when no worker ran it or it cannot import this
    project. Returns the line describing the checked workers, or "" when nothing was checked."""
    environment = worker_environment(runner, options)
    if environment is None:
        return ""
    kind, config = environment
    refuse_unrunnable_environment(kind, config, options)
    if timeout_s == 0:
        return ""
    command = [
        sys.executable,
        "-c",
        "from beam_pipelines.runners.portable_preflight import main; main()",
        "--timeout",
        str(timeout_s),
        "--",
        f"--runner={runner}",
        *beam_args,
    ]
    start = time.monotonic()
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_child_env()
    )
    try:
        try:
            output, _ = child.communicate(timeout=HINT_AFTER_S)
        except subprocess.TimeoutExpired:
            print(
                f"[workers] waiting for an SDK worker of {_described(kind, config)} (up to "
                f"{timeout_s:g} s, --worker-start-timeout); {_cause_hint(kind, config)}",
                file=sys.stderr,
                flush=True,
            )
            output, _ = child.communicate(timeout=timeout_s + SUBMIT_ALLOWANCE_S - HINT_AFTER_S)
    except subprocess.TimeoutExpired:
        raise WorkerStartError(_no_worker_line(kind, config, timeout_s)) from None
    finally:
        if child.poll() is None:  # stuck past its allowance, or Ctrl-C here
            child.kill()
            child.wait()
    outcome = _last_json_line(output)
    return _judge(outcome, kind, config, options, timeout_s, time.monotonic() - start)


def _child_env() -> dict[str, str]:
    """This process's environment, with the folder this copy of the repository is imported
    from first on PYTHONPATH, so the probe's child imports the same copy."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _last_json_line(output: str) -> dict:
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {"outcome": "failed", "error": "the probe job ended without a result"}


def _pool_command(config: str) -> str:
    """The command starting a worker pool at `config` whose workers run this interpreter."""
    return (
        f"PATH={os.path.dirname(sys.executable)}:$PATH {sys.executable} -m "
        f"apache_beam.runners.worker.worker_pool_main --service_port {config.rsplit(':', 1)[-1]}"
    )


def _cause_hint(kind: str, config: str) -> str:
    if kind == "EXTERNAL":
        return (
            f"the pool at {config} starts each worker with the `python` first on its own PATH, "
            "which must import apache_beam and this project: start the pool with this "
            f"virtualenv's python on its PATH ({_pool_command(config)}); the pool's output "
            "shows the worker's error"
        )
    return (
        "the command must start a Python that imports apache_beam and this project (the "
        "job server's log shows its error)"
    )


def _described(kind: str, config: str) -> str:
    """The checked workers' environment as the flags that chose it."""
    return f"--environment_type {kind} --environment_config {config}"


def _no_worker_line(kind: str, config: str, timeout_s: float) -> str:
    return (
        f"no SDK worker of {_described(kind, config)} started within {timeout_s:g} s "
        f"(--worker-start-timeout): {_cause_hint(kind, config)}"
    )


def _judge(
    outcome: dict,
    kind: str,
    config: str,
    options,
    timeout_s: float,
    took_s: float,
) -> str:
    """The line for a finished probe (its workers), or ValueError with the fault's line."""
    from apache_beam.options.pipeline_options import PortableOptions

    described = _described(kind, config)
    state = outcome.get("outcome")
    if state == "timeout":
        raise WorkerStartError(_no_worker_line(kind, config, timeout_s))
    report = outcome.get("report") or _report_in(outcome.get("error", ""))
    if report and report.get("failed"):
        missing = "; ".join(f"{name} ({why})" for name, why in report["failed"].items())
        fix = (
            f"start the pool at {config} with this virtualenv's python first on its PATH, or "
            "install this project (pip install -e .) where its workers run"
            if kind == "EXTERNAL"
            else "make the command start a Python where this project is installed"
        )
        raise WorkerStartError(
            f"the SDK workers of {described} run {report['python']} (Python "
            f"{report['python_version']}, apache_beam {report['beam']}), which cannot import "
            f"{missing}: {fix}"
        )
    if state != "done":
        error = outcome.get("error", "")
        if outcome.get("stage") == "submit":
            endpoint = options.view_as(PortableOptions).job_endpoint
            raise WorkerStartError(
                f"the probe job for the SDK workers of {described} could not be submitted to "
                f"the job service at {endpoint} ({_error_reason(error)}): check --job_endpoint "
                "and that its job server runs"
            )
        advice = "check --environment_type / --environment_config and the job server's log"
        if kind == "EXTERNAL" and "StatusCode.UNAVAILABLE" in error:
            advice = (
                f"no worker pool answers at {config}: start one ({_pool_command(config)}) or "
                "correct --environment_config"
            )
        elif kind == "EXTERNAL" and "Error starting worker" in error:
            advice = _cause_hint(kind, config)
        raise WorkerStartError(
            f"the probe job for the SDK workers of {described} failed: "
            f"{_error_reason(error)} ({advice})"
        )
    if report:
        return (
            f"SDK workers of {described}: {report['python']} (Python "
            f"{report['python_version']}, apache_beam {report['beam']}), checked in {took_s:.1f} s"
        )
    return f"SDK workers of {described}: checked in {took_s:.1f} s"


def _report_in(text: str) -> dict | None:
    """The worker's report carried in the text of a failed job (between two markers)."""
    parts = text.split(MARKER)
    if len(parts) < 3:
        return None
    try:
        return json.loads(parts[1])
    except ValueError:
        return None


def _error_reason(text: str) -> str:
    """The line of a job's failure text that says why: the last exception line."""
    if "beam:env:process:v1" in text:
        return "this job server (Beam's Python job service) cannot start PROCESS workers"
    details = re.search(r'details = "([^"]+)"', text)
    if details:  # a gRPC error: its details say what failed (e.g. a refused connection)
        return details.group(1)[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[-1].endswith(":"):  # an exception without a message
        name = lines[-1][:-1]
        return f"{name}: no answer within --job_server_timeout" if "Timeout" in name else name
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line[:300]
    return (lines[-1] if lines else "no error text")[:300]


def report_worker(_element):
    """The probe's one step, run by an SDK worker: its interpreter, versions and the packages
    of this repository it cannot import; raises (the job fails) when one is missing. Imports
    only inside, so it runs where this repository is missing (the probe's child process
    pickles this module by value)."""
    import importlib
    import json
    import sys

    import apache_beam
    from apache_beam.metrics import Metrics

    failed = {}
    for name in WORKER_PACKAGES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an ImportError, or a dependency failing at import
            failed[name] = f"{type(exc).__name__}: {exc}"
    report = {
        "python": sys.executable,
        "python_version": ".".join(str(part) for part in sys.version_info[:3]),
        "beam": apache_beam.__version__,
        "failed": failed,
    }
    text = json.dumps(report, sort_keys=True)
    if failed:
        raise RuntimeError(f"{MARKER}{text}{MARKER}")
    Metrics.string_set("fewshot", "worker_report").add(text)
    return text


def run_probe(beam_args: Sequence[str], timeout_s: float) -> dict:
    """Submit the probe job with `beam_args`; its outcome once it ended or `timeout_s` passed
    (then it is cancelled)."""
    import apache_beam as beam
    from apache_beam.internal.cloudpickle import cloudpickle
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import PipelineState

    # `report_worker` travels as code, not as a reference a worker without this repository
    # could not resolve (Beam's default pickler, cloudpickle; only this child process is
    # affected).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    options = PipelineOptions(list(beam_args), job_name="fewshot-worker-probe")
    pipeline = beam.Pipeline(options=options)
    _ = pipeline | "One" >> beam.Create(["probe"]) | "ReportWorker" >> beam.Map(report_worker)
    try:
        result = pipeline.run()
    except Exception as exc:  # no job service, or one that refused the job
        return {"outcome": "failed", "stage": "submit", "error": f"{type(exc).__name__}: {exc}"}
    try:
        state = result.wait_until_finish(duration=int(timeout_s * 1000))
    except Exception as exc:  # the job failed: Beam raises with the job's error text
        return {"outcome": "failed", "error": str(exc)}
    if state != PipelineState.DONE:
        try:
            result.cancel()
        except Exception:
            pass
        if state in (PipelineState.FAILED, PipelineState.CANCELLED):
            return {"outcome": "failed", "error": f"the probe job ended {state}"}
        return {"outcome": "timeout"}
    return {"outcome": "done", "report": _report_from_metrics(result)}


def _report_from_metrics(result) -> dict | None:
    try:
        sets = result.metrics().query()["string_sets"]
    except Exception:  # a runner that reports no metrics: the job's success is the answer
        return None
    for metric in sets:
        for text in metric.committed or metric.attempted or ():
            return json.loads(text)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The probe's child process: one JSON line on stdout, then the process ends at once (a
    stuck job service thread must not keep it alive)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("beam_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    beam_args = [a for a in args.beam_args if a != "--"]
    try:
        outcome = run_probe(beam_args, args.timeout)
    except Exception as exc:
        outcome = {"outcome": "failed", "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(outcome), flush=True)
    os._exit(0)
