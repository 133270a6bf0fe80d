"""Pipeline options shared by every Beam job: the local runner pinned, others passed through.

Beam's `DirectRunner` first tries the Prism runner, which downloads a Go binary at run time.
Local runs therefore use the FnApiRunner (what DirectRunner falls back to) directly: in memory
for one worker, `multi_processing` for `--direct_num_workers N > 1`. Any other `--runner`
(DataflowRunner, FlinkRunner, SparkRunner, PrismRunner) and its flags go to Beam unchanged.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

LOCAL_RUNNER_NAMES = {"directrunner", "direct", "fnapirunner", "local"}


@dataclass
class RunnerChoice:
    runner: object  # a runner instance, or a runner name for Beam to resolve
    options: PipelineOptions
    is_local: bool
    description: str


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Beam runner")
    group.add_argument(
        "--runner",
        default="DirectRunner",
        help="Beam runner: DirectRunner (local, default, never downloads), DataflowRunner, "
        "FlinkRunner, SparkRunner, ... ; runner-specific flags are passed through",
    )
    group.add_argument(
        "--direct_num_workers",
        type=int,
        default=1,
        help="local worker processes for the DirectRunner (default 1)",
    )


def make_runner(args: argparse.Namespace, beam_args: list[str]) -> RunnerChoice:
    """Runner instance and options for the parsed `--runner` / `--direct_num_workers`."""
    if args.direct_num_workers < 1:
        raise ValueError(f"--direct_num_workers must be >= 1, got {args.direct_num_workers}")
    name = str(args.runner)
    if name.lower() in LOCAL_RUNNER_NAMES:
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        workers = args.direct_num_workers
        mode = "multi_processing" if workers > 1 else "in_memory"
        options = PipelineOptions(
            list(beam_args)
            + [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
            + ([] if any(a.startswith("--default_sdk_harness_log_level") for a in beam_args)
               else ["--default_sdk_harness_log_level=WARNING"])
        )
        # As Beam's DirectRunner does: hand the options to the worker processes too.
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        )
        return RunnerChoice(
            fn_runner.FnApiRunner(provision_info=provision), options, True, f"DirectRunner (FnApiRunner, {mode}, {workers} worker(s))"
        )
    options = PipelineOptions(list(beam_args) + [f"--runner={name}"])
    return RunnerChoice(name, options, False, name)
