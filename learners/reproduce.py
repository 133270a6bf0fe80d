"""`python -m learners.reproduce PLAN`: one command from converted data to a paper's table.

Examples:
  python -m learners.reproduce meta_dataset/table1 --method protonet --data DATA --output OUT
  python -m learners.reproduce dhillon/table1 --data DATA --output OUT
  python -m learners.reproduce atg/figure2 --benchmark cifar100 --data DATA --output OUT
  python -m learners.reproduce meta_dataset/table1 --method protonet --data DATA \\
      --train-source omniglot --scale tiny --output OUT
  python -m learners.reproduce --list

DATA holds one converted dataset per source (DATA/ilsvrc_2012/, DATA/omniglot/, ...). The plan
runs the stages the paper ran, each a folder under OUT with its stage.json (command, status,
result) and output.log: pre-training, its best-validation checkpoint, the episodic training
started from it (--init-from), evaluation on every test source (600 episodes; 1,000 for
Dhillon et al.), then OUT/report/report.md: the paper's number (cited by table, row and
column) beside ours with both CIs and the difference. Run the same command again after an
interruption: finished stages are verified and skipped, an interrupted one runs again with the
same command (learners.train resumes from its last checkpoint). A source the plan needs but
DATA lacks is a report row saying so. --dry-run prints every stage's command and runs nothing.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from episodes.util.cli_errors import UserError, run_main, user_faults
from episodes.util.cli_style import command_parser
from episodes.util.folder_lock import acquire_folder_lock
from episodes.util.output_overlap import refuse_overlap
from learners.reproduction.data_folder import converted_sources
from learners.reproduction.plan_parts import FULL, SCALES, PlanRequest, PlanSpec
from learners.reproduction.plans import PLANS, Plan
from learners.reproduction.report_stage import REPORT, write_report
from learners.reproduction.stage_records import read_record
from learners.reproduction.stage_runner import (
    DONE,
    check_recorded_commands,
    run_stages,
)
from learners.reproduction.stages import comparable

__all__ = [
    "build_parser",
    "INTERRUPTED",
    "LOCK",
    "main",
    "make_request",
    "plan_list",
    "print_dry_run",
]

LOCK = ".reproduce.lock"  # in --output: one reproduction at a time writes there


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("learners.reproduce", __doc__)
    parser.add_argument(
        "plan", nargs="?", choices=sorted(PLANS), metavar="PLAN", help=", ".join(sorted(PLANS))
    )
    parser.add_argument(
        "--list", action="store_true", help="list every plan and its methods, and exit"
    )
    parser.add_argument(
        "--method",
        action="append",
        help="a learner of the plan (repeatable; 'all': every one; see --list)",
    )
    parser.add_argument(
        "--benchmark",
        action="append",
        help="only this dataset of a plan that trains on several (repeatable; default all)",
    )
    parser.add_argument(
        "--data", metavar="DIR", help="folder of converted datasets, one per source"
    )
    parser.add_argument("--output", help="folder of the stage folders and the report")
    parser.add_argument(
        "--train-source",
        metavar="NAME",
        help="train on this source of --data instead of the paper's (a deviation in the report)",
    )
    parser.add_argument(
        "--scale",
        choices=SCALES,
        default=FULL,
        help="full: the paper's sizes; tiny: a few steps and episodes of every stage",
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    parser.add_argument(
        "--dry-run", action="store_true", help="print every stage's command and run nothing"
    )
    return parser


def plan_list() -> list[str]:
    lines = []
    for plan in PLANS.values():
        lines.append(f"{plan.name}: {plan.about}")
        default = ", ".join(plan.default_methods) or "none: --method is required"
        lines.append(f"  --method {' | '.join(plan.methods)} | all (default: {default})")
        if plan.benchmarks:
            lines.append(f"  --benchmark {' | '.join(plan.benchmarks)} (default: all)")
        lines.append(f"  recipes: {', '.join(plan.recipes)}")
    return lines


def _chosen(values: list[str] | None, known: tuple[str, ...], default, what: str, plan: Plan):
    """The methods or benchmarks asked for, checked against the plan's."""
    if not values:
        if not default:
            raise UserError(
                f"{plan.name} needs --{what}: one of {', '.join(known)}, or all (see --list)"
            )
        return tuple(default)
    if "all" in values:
        return known
    unknown = [v for v in values if v not in known]
    if unknown:
        raise UserError(
            f"--{what} {unknown[0]}: not one of {plan.name}'s ({', '.join(known)}, or all)"
        )
    return tuple(dict.fromkeys(values))


def make_request(args: argparse.Namespace) -> PlanRequest:
    """The request, every input checked before any work."""
    if args.plan is None:
        raise UserError("give a PLAN (one of " + ", ".join(sorted(PLANS)) + ") or --list")
    if args.data is None or args.output is None:
        raise UserError(f"{args.plan} needs --data DIR and --output DIR")
    plan = PLANS[args.plan]
    data, out = Path(args.data).resolve(), Path(args.output).resolve()
    if not data.is_dir():
        raise UserError(f"--data {args.data}: not a folder (expected converted datasets in it)")
    refuse_overlap(("--output", out), [("--data", data)])
    if args.benchmark and not plan.benchmarks:
        raise UserError(f"--benchmark: {plan.name} trains on one source; see --train-source")
    sources = converted_sources(data)
    if args.train_source is not None and args.train_source not in sources:
        found = ", ".join(sources) or "none"
        raise UserError(
            f"--train-source {args.train_source}: {data / args.train_source} holds no converted "
            f"dataset (dataset_spec.json); converted under --data: {found}"
        )
    return PlanRequest(
        plan=plan.name,
        data=data,
        out=out,
        methods=_chosen(args.method, plan.methods, plan.default_methods, "method", plan),
        benchmarks=_chosen(args.benchmark, plan.benchmarks, plan.benchmarks, "benchmark", plan)
        if plan.benchmarks
        else (),
        train_source=args.train_source,
        scale=args.scale,
        device=args.device,
        sources=sources,
    )


def _status(stage, out: Path) -> str:
    record = read_record(stage.folder(out))
    if record is None:
        return "to run"
    if comparable(record.command) != comparable(stage.command):
        return "recorded with another command: refused"
    return {
        "finished": "finished: verified, then skipped",
        "running": "interrupted: runs again",
        "failed": "failed: runs again",
    }.get(record.status, record.status)


def print_dry_run(request: PlanRequest, spec: PlanSpec) -> None:
    print(f"{spec.plan}: {spec.title}")
    print(f"stages, in order, each a folder under {request.out}:")
    for index, stage in enumerate(spec.stages, 1):
        print(f"  [{index}/{len(spec.stages)}] {stage.name} ({_status(stage, request.out)})")
        print(f"      {stage.shown()}")
    print(f"  then {REPORT}: report.md and report.json, rebuilt on every run, with")
    print(f"      python -m learners.report {spec.report_command} EVAL... (our test evaluations)")
    missing = [row for row in spec.rows if row.missing]
    if missing:
        print(f"rows that cannot run ({len(missing)} of {len(spec.rows)}; the report lists them):")
        for row in missing:
            print(f"  {' / '.join(row.cells)}: {row.missing}")
    for line in spec.deviations:
        print(f"deviation: {line}")


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        print("\n".join(plan_list()))
        return 0
    request = make_request(args)
    spec = PLANS[request.plan].build(request)
    if args.dry_run:
        print_dry_run(request, spec)
        check_recorded_commands(spec.stages, request.out)
        return 0
    if not any(stage.kind == "evaluate" for stage in spec.stages):
        reasons = sorted({row.missing for row in spec.rows if row.missing})
        reason = reasons[0].removeprefix("not run: ") if reasons else "it has no rows"
        raise UserError(f"nothing of {spec.plan} can run: {reason}")
    check_recorded_commands(spec.stages, request.out)
    request.out.mkdir(parents=True, exist_ok=True)
    lock = acquire_folder_lock(
        request.out / LOCK,
        request.out,
        "--output {folder}: another reproduction writes there ({holder}); wait for it to end",
    )
    with lock:
        outcomes = run_stages(spec.stages, request.out, print)
        shown = "python -m learners.reproduce " + shlex.join(sys.argv[1:] if argv is None else argv)
        report, table = write_report(request, spec, outcomes, shown)
    print("\n".join(table))
    print(f"report: {report}")
    failed = [name for name, outcome in outcomes.items() if outcome.status not in DONE]
    if failed:
        print(
            f"{len(failed)} stage(s) did not finish: {', '.join(failed)}; see their output.log, "
            "then run the same command again",
            file=sys.stderr,
        )
        return 1
    return 0


INTERRUPTED = "interrupted; run the same command again to resume (finished stages are skipped)"

if __name__ == "__main__":
    sys.exit(run_main(main, interrupted=INTERRUPTED))
