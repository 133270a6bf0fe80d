"""The last stage: OUT/report/report.md and report.json from the finished evaluations, rebuilt
on every run (it only reads the other stages), with `learners.report` (ranks, or ATG's slope
against the divergence) over our evaluations appended as that command prints it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from episodes.util.atomic_files import write_text_atomically
from learners.reproduction.plan_parts import PlanRequest, PlanSpec
from learners.reproduction.report_table import Ours, markdown_table, row_records, table_rows
from learners.reproduction.stage_records import FINISHED, StageRecord, now, write_record
from learners.reproduction.stage_runner import DONE, Outcome, child_environment
from learners.reproduction.stages import Stage

__all__ = ["REPORT", "TINY_WARNING", "write_report"]

REPORT = "report"  # the stage folder
TINY_WARNING = (
    "--scale tiny: a few steps and episodes on small widths, to test the pipeline; the numbers "
    "are not comparable with the paper's"
)


def _ours(spec: PlanSpec, outcomes: Mapping[str, Outcome]) -> tuple[dict, dict]:
    """Our numbers by evaluation stage, and why the unfinished ones are not there."""
    ours: dict[str, Ours] = {}
    unfinished: dict[str, str] = {}
    for stage in spec.stages:
        if stage.kind != "evaluate":
            continue
        outcome = outcomes.get(stage.name)
        if outcome is not None and outcome.status in DONE and outcome.record is not None:
            ours[stage.name] = Ours.from_result(outcome.record.result)
        else:
            unfinished[stage.name] = outcome.status if outcome else "not run"
    return ours, unfinished


def _learners_report(spec: PlanSpec, ours: Mapping[str, Ours], out: Path) -> tuple[list, str]:
    """`python -m learners.report ranks|divergence EVAL...` over our (test) evaluations."""
    evaluations = [
        str(out / stage.name / "eval")
        for stage in spec.stages
        if stage.name in ours and "--split" in stage.command
        if stage.command[stage.command.index("--split") + 1] == "test"
    ]
    if not evaluations:
        return [], "no evaluation finished"
    command = ["learners.report", spec.report_command, *evaluations]
    done = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        env=child_environment(),
        stdin=subprocess.DEVNULL,
    )
    return command, (done.stdout + done.stderr).rstrip()


def write_report(
    request: PlanRequest,
    spec: PlanSpec,
    outcomes: Mapping[str, Outcome],
    command_line: str,
) -> tuple[Path, list[str]]:
    """Write OUT/report/report.md, report.json and stage.json; the report.md path and the
    table's Markdown lines."""
    folder = request.out / REPORT
    folder.mkdir(parents=True, exist_ok=True)
    ours, unfinished = _ours(spec, outcomes)
    lines, cited = table_rows(spec, ours, unfinished)
    command, printed = _learners_report(spec, ours, request.out)
    deviations = [*spec.deviations, *([TINY_WARNING] if request.tiny else [])]
    table = markdown_table(lines)
    text = [
        f"# Reproduction of {spec.plan}",
        "",
        spec.title,
        "",
        f"Command: `{command_line}`",
        "",
        *table,
        "",
        "Paper: its accuracy (%) +- its 95% CI, cited below. Ours: mean accuracy (%) over n "
        "test episodes +- 1.96 std / sqrt(n). Ours - paper: the difference +- "
        "sqrt(ci_ours^2 + ci_paper^2).",
        "",
        *(f"[{i}] {number.citation()}" for i, number in enumerate(cited, 1)),
    ]
    if spec.figure is not None:
        figure = spec.figure
        text += [
            "",
            f"{figure.paper}, {figure.figure}: {figure.what_it_shows}. No paper column: "
            f"the figure's values are not printed. The text says: {figure.stated_in_text}.",
        ]
    text += ["", "## Deviations from the paper", ""]
    text += [f"- {line}" for line in [*deviations, *spec.notes]]
    text += ["", "## Stages", ""]
    text += markdown_table(
        [
            ["Stage", "Status", "Command"],
            *(_stage_line(stage, outcomes.get(stage.name)) for stage in spec.stages),
        ]
    )
    if command:
        text += ["", f"## Our evaluations by `python -m {' '.join(command[:2])}`", ""]
        text += ["```", printed, "```"]
    report = folder / "report.md"
    write_text_atomically(report, "\n".join(text) + "\n")
    record = {
        "plan": spec.plan,
        "command": command_line,
        "scale": request.scale,
        "rows": row_records(spec, ours, unfinished),
        "deviations": deviations,
        "notes": spec.notes,
        "figure": None if spec.figure is None else vars(spec.figure),
    }
    write_text_atomically(folder / "report.json", json.dumps(record, indent=2) + "\n")
    write_record(
        folder,
        StageRecord(
            stage=REPORT,
            kind="report",
            command=command,
            shown=f"python -m {' '.join(command)}" if command else "",
            status=FINISHED,
            attempts=1,
            started=now(),
            ended=now(),
            result={"report": str(report), "rows": len(spec.rows), "with_ours": len(ours)},
        ),
    )
    return report, table


def _stage_line(stage: Stage, outcome: Outcome | None) -> list[str]:
    status = outcome.status if outcome else "not run"
    if outcome and outcome.record and outcome.record.result.get("chosen"):
        result = outcome.record.result
        status += f" ({result['chosen']}.pt, step {result['step']})"
    elif outcome and outcome.note and outcome.status not in DONE:
        status += f" ({outcome.note})"
    return [stage.name, status, f"`{stage.shown()}`"]
