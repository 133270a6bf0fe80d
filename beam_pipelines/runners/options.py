"""Pipeline options shared by every Beam job: the local runner pinned, others passed through.

Beam's `DirectRunner` first tries the Prism runner, which downloads a Go binary at run time.
Local runs therefore use the FnApiRunner (what DirectRunner falls back to) directly: in memory
for one worker, `multi_processing` for `--direct_num_workers N > 1`, whose worker processes run
`python -m beam_pipelines.runners.local_worker` (Beam's harness without Ctrl-C tracebacks and start-up
warnings; it ends with its launcher). `--runner DaskRunner` (a `dask.distributed` cluster) is
beam_pipelines.runners.dask_runner. Any other `--runner` (DataflowRunner, FlinkRunner, SparkRunner,
PortableRunner, PrismRunner) and its flags go to Beam unchanged; `--direct_num_workers` above 1
is refused with them (it would be ignored: their workers are set by their own flags). SDK workers
that start outside this process (EXTERNAL, PROCESS) are checked first by a probe job
(beam_pipelines.runners.portable_preflight, `--worker-start-timeout`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipelines.runners.portable_preflight import (
    add_worker_start_timeout_argument,
    check_sdk_workers,
    worker_start_timeout,
)
from episodes.storage.access import DEFAULT_TIMEOUT_S, check_access
from episodes.storage.paths import is_remote, unknown_local_flags
from episodes.util.cli_errors import UsageError

__all__ = [
    "add_runner_arguments",
    "add_storage_timeout_argument",
    "DASK_RUNNER_NAMES",
    "LOCAL_RUNNER_NAMES",
    "LOG_LEVEL_FLAG",
    "make_runner",
    "make_runner_only",
    "RELAYED_WORKER_LOGGER",
    "RunnerChoice",
    "storage_timeout",
]

LOCAL_RUNNER_NAMES = {"directrunner", "direct", "fnapirunner", "local"}
DASK_RUNNER_NAMES = {"daskrunner", "dask", "apache_beam.runners.dask.dask_runner.daskrunner"}
LOG_LEVEL_FLAG = "--default_sdk_harness_log_level"
# Where the local runner re-logs what its worker processes log.
RELAYED_WORKER_LOGGER = "apache_beam.runners.portability.local_job_service"


@dataclass
class RunnerChoice:
    runner: object  # a runner instance, or a runner name for Beam to resolve
    options: PipelineOptions
    is_local: bool
    description: str
    storage_timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def one_local_worker(self) -> bool:
        """The local runner with one worker, in the launcher's own process."""
        values = self.options.get_all_options()
        return self.is_local and values.get("direct_running_mode") == "in_memory"

    def check_storage(self, *locations) -> None:
        """One quick access check of each object-storage URL among `locations` (see
        episodes.storage.access), before any long work."""
        for location in locations:
            if location is not None and is_remote(location):
                check_access(str(location), self.options, self.storage_timeout_s)


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Beam runner")
    group.add_argument(
        "--runner",
        default="DirectRunner",
        help="Beam runner: DirectRunner (local, default, never downloads), DataflowRunner, "
        "FlinkRunner, SparkRunner, ... ; runner-specific flags are passed through",
    )
    add_storage_timeout_argument(group)
    add_worker_start_timeout_argument(group)
    group.add_argument(
        "--direct_num_workers",
        type=int,
        default=1,
        help="local worker processes for the DirectRunner (default 1)",
    )


def add_storage_timeout_argument(parser) -> None:
    parser.add_argument(
        "--storage-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the one access check of an s3:// or gs:// URL waits before saying what "
        f"is missing (default {DEFAULT_TIMEOUT_S:g})",
    )


def storage_timeout(args: argparse.Namespace) -> float:
    """`--storage-timeout`, checked: a positive, finite number of seconds."""
    value = getattr(args, "storage_timeout", DEFAULT_TIMEOUT_S)
    if not (0 < value < float("inf")):
        raise UsageError(f"--storage-timeout {value}: expected a positive number of seconds")
    return value


def make_runner(args: argparse.Namespace, beam_args: list[str]) -> RunnerChoice:
    """Runner instance and options for the parsed flags (`make_runner_only`), with the
    `--storage-timeout` its access checks use; SDK workers started outside this process
    (EXTERNAL, PROCESS) checked first (beam_pipelines.runners.portable_preflight)."""
    timeout_s = worker_start_timeout(args)
    choice = make_runner_only(args, beam_args)
    choice.storage_timeout_s = storage_timeout(args)
    if not choice.is_local:
        checked = check_sdk_workers(str(args.runner), beam_args, choice.options, timeout_s)
        if checked:
            print(f"[workers] {checked}", file=sys.stderr, flush=True)
    return choice


def make_runner_only(args: argparse.Namespace, beam_args: list[str]) -> RunnerChoice:
    """Runner instance and options for the parsed `--runner` / `--direct_num_workers`.

    The local runner would ignore any flag left for Beam other than the file-system ones, so
    such a flag (a misspelt option) is refused here, before any work, never silently dropped."""
    if args.direct_num_workers < 1:
        raise UsageError(f"--direct_num_workers must be >= 1, got {args.direct_num_workers}")
    name = str(args.runner)
    if name.lower() in LOCAL_RUNNER_NAMES:
        unknown = unknown_local_flags(beam_args)
        if unknown:
            raise UsageError(
                f"unknown option(s) {' '.join(unknown)} for the DirectRunner (check the "
                "spelling; only file-system flags pass through to a local run)"
            )
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        workers = args.direct_num_workers
        mode = "multi_processing" if workers > 1 else "in_memory"
        log_level_given = any(a.startswith(LOG_LEVEL_FLAG) for a in beam_args)
        options = PipelineOptions(
            list(beam_args)
            + [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
            + ([] if log_level_given else [f"{LOG_LEVEL_FLAG}=WARNING"])
        )
        # As Beam's DirectRunner does: hand the options to the worker processes too.
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        )
        if workers == 1:
            runner = fn_runner.FnApiRunner(provision_info=provision)
        else:
            runner = _local_process_runner(provision)
            if not log_level_given:  # the workers' start-up warnings, re-logged: noise here
                logging.getLogger(RELAYED_WORKER_LOGGER).setLevel(logging.ERROR)
        return RunnerChoice(
            runner, options, True, f"DirectRunner (FnApiRunner, {mode}, {workers} worker(s))"
        )
    if args.direct_num_workers > 1:
        raise UsageError(
            f"--direct_num_workers {args.direct_num_workers} applies to the DirectRunner only; "
            f"{name} sets its workers with its own flags (e.g. --sdk_worker_parallelism, "
            "--num_workers, or the Dask cluster's size)"
        )
    if name.lower() in DASK_RUNNER_NAMES:
        return _dask_runner(beam_args)
    options = PipelineOptions(list(beam_args) + [f"--runner={name}"])
    return RunnerChoice(name, options, False, name)


def _dask_runner(beam_args: list[str]) -> RunnerChoice:
    """Beam's Dask runner as beam_pipelines.runners.dask_runner adapts it; one line if dask is not
    installed."""
    try:
        from beam_pipelines.runners import dask_runner
    except ImportError as exc:
        raise UsageError(
            f"--runner DaskRunner needs the dask and distributed packages ({exc}); install them "
            "with `pip install dask distributed` (both pinned in requirements.lock)"
        ) from None
    flags = list(beam_args)
    options = PipelineOptions(flags)
    address = next((a for a in flags if a.startswith("--dask_client_address")), "")
    where = address.split("=", 1)[1] if "=" in address else "a local dask cluster"
    return RunnerChoice(dask_runner.ProjectDaskRunner(), options, False, f"DaskRunner ({where})")


def _local_process_runner(provision):
    """An FnApiRunner whose worker processes run `python -m beam_pipelines.runners.local_worker`."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.transforms.environments import SubprocessSDKEnvironment

    # `exec`: Beam starts the command through a shell; the worker replaces it, so the launcher
    # is the worker's parent (which the worker watches) and the pid Beam holds is the worker's.
    command = f"exec {sys.executable} -m beam_pipelines.runners.local_worker"
    workers_environment = SubprocessSDKEnvironment.from_command_string(command)

    class LocalProcessRunner(fn_runner.FnApiRunner):
        # FnApiRunner.run_pipeline sets Beam's own harness command for `multi_processing`
        # right before it uses it; this attribute keeps ours instead.
        @property
        def _default_environment(self):
            return workers_environment

        @_default_environment.setter
        def _default_environment(self, _value):
            pass

    return LocalProcessRunner(provision_info=provision)
