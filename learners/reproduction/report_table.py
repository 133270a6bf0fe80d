"""The reproduction's table: per row the paper's number (cited by table, row and column) beside
ours, with both 95% confidence intervals and the difference; a row that could not run says why.

Ours is the mean accuracy over the test episodes +- 1.96 std / sqrt(n) (learners.evaluate); the
difference's +- is sqrt(ci_ours^2 + ci_paper^2), the 95% half-width of a difference of two
independent means (the paper's CI alone when ours has none, ours alone when the paper prints
none)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from learners.reproduction.plan_parts import PlanSpec, Row
from learners.reproduction.published_numbers import PublishedNumber

__all__ = ["difference", "markdown_table", "Ours", "row_records", "table_rows"]


@dataclass(frozen=True)
class Ours:
    """One of our evaluations, in percent."""

    accuracy: float
    ci95: float
    n: int

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> Ours:
        return cls(100 * float(result["mean"]), 100 * float(result["ci95"]), int(result["n"]))


def difference(published: PublishedNumber | None, ours: Ours | None) -> tuple[float, float] | None:
    """(ours - paper, its 95% half-width) in percentage points, None without both numbers."""
    if published is None or ours is None:
        return None
    spread = math.hypot(ours.ci95, published.ci95 or 0.0)
    return ours.accuracy - published.accuracy, spread


def _paper_cell(published: PublishedNumber | None, ref: int | None, figure: bool) -> str:
    if published is None:
        return "none printed (figure)" if figure else "none printed"
    ci = f" +- {published.ci95:.2f}" if published.ci95 is not None else ""
    return f"{published.accuracy:.2f}{ci} [{ref}]"


def _ours_cell(ours: Ours | None) -> str:
    return "-" if ours is None else f"{ours.accuracy:.2f} +- {ours.ci95:.2f} (n={ours.n})"


def _note(row: Row, status: str | None) -> str:
    if row.missing:
        return row.missing
    if status is not None:
        return f"{status}: stage {row.evaluation}" + (f"; {row.deviation}" if row.deviation else "")
    return row.deviation or ""


def table_rows(
    spec: PlanSpec, ours: Mapping[str, Ours], unfinished: Mapping[str, str]
) -> tuple[list[list[str]], list[PublishedNumber]]:
    """The table's cells (header first) and the published numbers cited, in citation order.
    `ours` maps finished evaluation stages to their numbers; `unfinished` the others to why."""
    cited: list[PublishedNumber] = []
    header = [*spec.row_header, "Paper", "Ours", "Ours - paper", "Note"]
    lines = [header]
    for row in spec.rows:
        ref = None
        if row.published is not None:
            if row.published not in cited:
                cited.append(row.published)
            ref = cited.index(row.published) + 1
        mine = ours.get(row.evaluation) if row.evaluation else None
        gap = difference(row.published, mine)
        status = unfinished.get(row.evaluation) if row.evaluation else None
        lines.append(
            [
                *row.cells,
                _paper_cell(row.published, ref, spec.figure is not None),
                _ours_cell(mine),
                "-" if gap is None else f"{gap[0]:+.2f} +- {gap[1]:.2f}",
                _note(row, status),
            ]
        )
    return lines, cited


def markdown_table(lines: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table of `lines` (the first is the header); '|' in a cell is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(lines[0]), line(["---"] * len(lines[0])), *(line(c) for c in lines[1:])]


def row_records(
    spec: PlanSpec, ours: Mapping[str, Ours], unfinished: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The rows as JSON-ready records (report.json)."""
    records = []
    for row in spec.rows:
        mine = ours.get(row.evaluation) if row.evaluation else None
        gap = difference(row.published, mine)
        published = row.published
        records.append(
            {
                "row": dict(zip(spec.row_header, row.cells)),
                "paper": None
                if published is None
                else {
                    "accuracy": published.accuracy,
                    "ci95": published.ci95,
                    "citation": published.citation(),
                },
                "ours": None if mine is None else vars(mine),
                "difference": None if gap is None else {"value": gap[0], "ci95": gap[1]},
                "evaluation_stage": row.evaluation,
                "not_run": row.missing
                or (unfinished.get(row.evaluation) if row.evaluation else None),
                "deviation": row.deviation,
            }
        )
    return records
