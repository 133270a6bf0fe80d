"""`python -m learners.report`: tables and plots from `learners.evaluate` outputs.

Subcommands (EVAL is an evaluation folder holding summary.json, episodes.csv, classes.csv):
  ranks EVAL... [--per-run]     Meta-Dataset table: accuracy +- CI (rank) per source, Avg. rank;
                                one column per configuration: runs that differ only in --seed
                                become one column "LABEL (N seeds)" (--per-run: one per EVAL)
  hardness EVAL... --output P   accuracy vs hardness scatter with a regression line per method
  ways-shots EVAL... --output D accuracy by ways and class precision by shots (two PNGs)
  base-novel EVAL... --output P accuracy on tau_BN(lambda) against lambda (FIX-ML sec. 4.2)
  divergence EVAL... [--r R...] [--group-by auto|label|method]
                                slope of test accuracy against ATG's R, per method (runs that
                                differ only in --seed averaged per R, spread across seeds shown)
  seeds EVAL...                 mean over training seeds of runs that differ only in --seed,
                                the spread across seeds next to the mean episode CI
  kendall --run RUN [--snapshots CSV] [--last K]
                                Kendall tau of validation vs test rankings of snapshots

A `ranks` column of N >= 2 seeds shows, per source, the mean of the seeds' mean accuracies and
the 95% CI of that mean across seeds (`SeedSummary.seed_ci95`: Student's t(0.975, N - 1) *
sample std / sqrt(N), since N is a handful of seeds, not hundreds of episodes): the spread a table over training seeds reports (FIX-ML's Table 5 gives the seeds' std), as a CI
half-width because the ranks' tie test (Meta-Dataset A.5) compares 95% CIs of means. The mean
episode CI (`episode_ci95`) would leave out how much training itself varies. A column of one
evaluation keeps its episode CI, as before.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure  # drawn without pyplot: no backend is chosen or changed

from episodes.util.cli_errors import UserError, run_main, user_faults
from episodes.util.cli_style import command_parser, finite_float
from episodes.util.json_files import read_json_object
from learners import LearnerConfigError, LearnerInputError
from learners.evaluation.metrics import (
    average_ranks,
    divergence_slope,
    grouped_summaries,
    kendall_tau,
    regression_line,
    t_95,
)
from learners.training.run_dir import RESUMABLE_CHANGES
from learners.training.training_loop import VALIDATION_LOG

__all__ = [
    "base_novel",
    "build_parser",
    "column_labels",
    "divergence",
    "Evaluation",
    "format_rank_table",
    "load_evaluation",
    "main",
    "plot_hardness",
    "rank_table",
    "ReportInputError",
    "run",
    "seed_group_key",
    "seed_groups",
    "seed_summary",
    "SEEDS_FOOTNOTE",
    "seeds_report",
    "SeedSummary",
    "series_name",
    "snapshot_kendall",
    "training_seed",
    "ways_shots",
]


class ReportInputError(UserError, ValueError):
    """Evaluation folders or run files a report cannot be made from (the message names them)."""


@dataclass
class Evaluation:
    path: Path
    summary: dict[str, Any]
    episodes: list[dict[str, str]]
    classes: list[dict[str, str]]

    @property
    def label(self) -> str:
        return str(self.summary.get("label") or self.path.name)


def _read_csv(path: Path) -> list[dict[str, str]]:
    """Rows of a CSV file; '#' lines before the header (what a column measures) are skipped."""
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def load_evaluation(folder: str | Path) -> Evaluation:
    """The files of one `learners.evaluate` folder; one line naming the file when summary.json
    is missing, truncated or lacks the accuracies every report reads."""
    path = Path(folder)
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise LearnerInputError(f"{path}: no summary.json (not a learners.evaluate folder)")
    summary = read_json_object(summary_path, ReportInputError)
    _check_summary(summary_path, summary)
    return Evaluation(
        path, summary, _read_csv(path / "episodes.csv"), _read_csv(path / "classes.csv")
    )


def _is_accuracy(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(k), (int, float)) for k in ("mean", "ci95")
    )


def _check_summary(path: Path, summary: dict[str, Any]) -> None:
    """The fields the reports read: "accuracy" and each "per_source" entry a {mean, ci95}."""
    per_source = summary.get("per_source", {})
    if not _is_accuracy(summary.get("accuracy")):
        broken = "accuracy"
    elif not isinstance(per_source, dict):
        broken = "per_source"
    else:
        broken = next((f"per_source.{s}" for s, v in per_source.items() if not _is_accuracy(v)), "")
    if broken:
        raise ReportInputError(
            f"{path}: {broken!r} is not an accuracy {{mean, ci95}} (written by learners.evaluate?)"
        )


def column_labels(evaluations: Sequence[Evaluation]) -> list[str]:
    """One distinct name per evaluation given: its label, and where two share a label, its
    folder (then its position), so that no evaluation hides another in a table or a plot."""
    return _distinct_names([e.label for e in evaluations], [str(e.path) for e in evaluations])


def _distinct_names(names: Sequence[str], places: Sequence[str]) -> list[str]:
    """`names`, each one shared by several followed by its place (a folder), then its
    position where that still repeats."""
    counts = Counter(names)
    labels = [f"{x} [{p}]" if counts[x] > 1 else x for x, p in zip(names, places)]
    counts = Counter(labels)
    return [f"{x} #{i + 1}" if counts[x] > 1 else x for i, x in enumerate(labels)]


# --- average rank table ------------------------------------------------------------------


# Printed under a ranks table with a column of several seeds: its +- is not an episode CI.
SEEDS_FOOTNOTE = (
    "+-: the 95% CI across training seeds (Student's t) in columns of N seeds, over test "
    "episodes in the others"
)


def rank_table(
    evaluations: Sequence[Evaluation], per_run: bool = False
) -> dict[str, dict[str, tuple[float, float]]]:
    """{source: {column label: (mean, ci95)}} from per-source summaries: one column per
    configuration (`seed_groups`), or with `per_run` one per evaluation. A configuration run
    with several seeds shows, per source, the mean of the seeds' mean accuracies and the 95% CI
    of that mean across seeds (`SeedSummary.seed_ci95`); a single evaluation its own numbers."""
    if per_run:
        groups = [[evaluation] for evaluation in evaluations]
    else:
        groups = seed_groups(evaluations)
    labels = _distinct_names(
        [_group_name(members) for members in groups],
        [", ".join(str(e.path) for e in members) for members in groups],
    )
    cells = [_seed_columns(members, label) for members, label in zip(groups, labels)]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for label, column in zip(labels, cells):
        for source, values in column.items():
            table.setdefault(source, {})[label] = values
    gaps = [
        f"{label} lacks {', '.join(s for s in table if s not in column)}"
        for label, column in zip(labels, cells)
        if set(column) != set(table)
    ]
    if not table or gaps:
        raise ReportInputError(
            "a ranks table needs every column evaluated on the same test sources"
            + (f" ({'; '.join(gaps)})" if gaps else " (no per-source accuracies)")
        )
    return table


def _group_name(members: Sequence[Evaluation]) -> str:
    """A configuration's column name: its label ('A / B' where its seeds' labels differ),
    followed by its number of seeds when it has several."""
    name = _labels_of(members)
    return name if len(members) == 1 else f"{name} ({len(members)} seeds)"


def _seed_columns(members: Sequence[Evaluation], label: str) -> dict[str, tuple[float, float]]:
    """{source: (mean, ci95)} of one configuration (fractions, as summary.json has them); a
    ValueError when its seeds repeat a run, are unknown, or were tested on other sources."""
    if len(members) == 1:
        per_source = members[0].summary.get("per_source", {})
        return {s: (v["mean"], v["ci95"]) for s, v in per_source.items()}
    seed_summary(members)  # refuses a run passed twice before anything is averaged
    unknown = [str(e.path) for e in members if training_seed(e) is None]
    if unknown:
        raise ReportInputError(
            f"{label}: the training seed of {', '.join(unknown)} is unknown (its run folder's "
            "config.json is gone), so the same run twice cannot be told from two seeds: "
            "pass --per-run"
        )
    sources = list(dict.fromkeys(s for e in members for s in e.summary.get("per_source", {})))
    gaps = [
        f"{e.path} lacks {', '.join(s for s in sources if s not in e.summary.get('per_source', {}))}"
        for e in members
        if set(e.summary.get("per_source", {})) != set(sources)
    ]
    if gaps:
        raise ReportInputError(
            f"{label}: its seeds were evaluated on different test sources ({'; '.join(gaps)}): "
            "evaluate every seed on the same sources, or pass --per-run"
        )
    columns = {}
    for source in sources:
        summary = seed_summary(members, source)
        columns[source] = (summary.mean / 100, summary.seed_ci95 / 100)
    return columns


def format_rank_table(table: Mapping[str, Mapping[str, tuple[float, float]]]) -> str:
    """The paper's table: one row per test source, 'acc +- ci (rank)', then Avg. rank."""
    per_source, average = average_ranks(table)
    methods = list(average)
    header = ["Test Source", *methods]
    rows = [header]
    for source in table:
        rows.append(
            [source]
            + [
                f"{100 * table[source][m][0]:.2f} +- {100 * table[source][m][1]:.2f} "
                f"({per_source[source][m]:g})"
                for m in methods
            ]
        )
    rows.append(["Avg. rank"] + [f"{average[m]:.2f}" for m in methods])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


# --- plots -----------------------------------------------------------------------------


def plot_hardness(evaluations: Sequence[Evaluation], png: Path) -> dict[str, tuple[float, float]]:
    """Accuracy vs hardness scatter with one regression line per method; returns the lines."""
    figure = Figure(figsize=(6, 4.5))
    axes = figure.subplots()
    lines = {}
    for evaluation, label in zip(evaluations, column_labels(evaluations)):
        points = [
            (float(r["hardness"]), 100 * float(r["accuracy"]))
            for r in evaluation.episodes
            if r["hardness"] not in ("", "nan") and not math.isnan(float(r["hardness"]))
        ]
        if len(points) < 2:
            raise ReportInputError(f"{evaluation.path}: needs >= 2 episodes with a hardness value")
        xs, ys = zip(*points)
        scatter = axes.scatter(xs, ys, s=10, alpha=0.5, label=label)
        if max(xs) > min(xs):
            slope, intercept = regression_line(xs, ys)
            lines[label] = (slope, intercept)
            grid = [min(xs), max(xs)]
            axes.plot(
                grid, [slope * x + intercept for x in grid], color=scatter.get_facecolor()[0][:3]
            )
    axes.set_xlabel("hardness (Dhillon et al., eq. 9)")
    axes.set_ylabel("accuracy (%)")
    axes.legend(fontsize=8)
    _save(figure, png)
    return lines


def _plot_grouped(
    series: Mapping[str, Mapping[Any, Any]], xlabel: str, ylabel: str, png: Path
) -> None:
    figure = Figure(figsize=(6, 4.5))
    axes = figure.subplots()
    for label, groups in series.items():
        xs = sorted(groups)
        means = [100 * groups[x].mean for x in xs]
        cis = [100 * groups[x].ci95 for x in xs]
        axes.plot(xs, means, marker="o", label=label)
        axes.fill_between(
            xs, [m - c for m, c in zip(means, cis)], [m + c for m, c in zip(means, cis)], alpha=0.2
        )
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.legend(fontsize=8)
    _save(figure, png)


def _save(figure: Any, png: Path) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(png, dpi=120)


def ways_shots(evaluations: Sequence[Evaluation], out_dir: Path) -> str:
    """Accuracy by ways and precision by shots (Meta-Dataset Fig. 2); returns a text table."""
    by_ways, by_shots = {}, {}
    for evaluation, label in zip(evaluations, column_labels(evaluations)):
        by_ways[label] = grouped_summaries(
            [float(r["accuracy"]) for r in evaluation.episodes],
            [int(r["ways"]) for r in evaluation.episodes],
        )
        by_shots[label] = grouped_summaries(
            [float(r["precision"]) for r in evaluation.classes],
            [int(r["shots"]) for r in evaluation.classes],
        )
    _plot_grouped(by_ways, "ways", "accuracy (%)", out_dir / "accuracy_by_ways.png")
    _plot_grouped(by_shots, "shots", "class precision (%)", out_dir / "precision_by_shots.png")
    lines = []
    for name, series in (("ways", by_ways), ("shots", by_shots)):
        for label, groups in series.items():
            cells = ", ".join(
                f"{g}: {100 * s.mean:.1f}+-{100 * s.ci95:.1f}" for g, s in groups.items()
            )
            lines.append(f"{label} by {name}: {cells}")
    return "\n".join(lines)


def base_novel(evaluations: Sequence[Evaluation], png: Path) -> str:
    """Accuracy against lambda per method (evaluations made with --base-novel-lambda)."""
    series: dict[str, dict[float, Any]] = {}
    for evaluation in evaluations:
        lam = evaluation.summary.get("base_novel_lambda")
        if lam is None:
            raise ReportInputError(f"{evaluation.path}: evaluated without --base-novel-lambda")
        series.setdefault(evaluation.label, {})[float(lam)] = _Summary(
            evaluation.summary["accuracy"]
        )
    _plot_grouped(series, "lambda (share of novel classes)", "accuracy (%)", png)
    return "\n".join(
        f"{label}: "
        + ", ".join(
            f"lambda={x:g}: {100 * s.mean:.2f}+-{100 * s.ci95:.2f}"
            for x, s in sorted(groups.items())
        )
        for label, groups in series.items()
    )


@dataclass
class _Summary:
    values: dict[str, float]

    @property
    def mean(self) -> float:
        return float(self.values["mean"])

    @property
    def ci95(self) -> float:
        return float(self.values["ci95"])


# --- seeds as a dimension ------------------------------------------------------------------

# Run options that runs differing only in --seed may also differ in: the seed, and those that
# do not change results (how data is loaded, how many snapshots are kept).
_NOT_RESULTS = {"seed", *RESUMABLE_CHANGES} - {"total_steps"}
# Evaluation settings that name the run rather than how it is evaluated.
_RUN_NAMES = ("run", "run_name", "checkpoint_step")


def _run_config(evaluation: Evaluation) -> dict[str, Any]:
    """The training run's config.json (empty when the run folder is gone)."""
    run = (evaluation.summary.get("settings") or {}).get("run") or evaluation.summary.get("run")
    path = Path(str(run)) / "config.json" if run else None
    if path is None or not path.is_file():
        return {}
    return read_json_object(path, ReportInputError)


def training_seed(evaluation: Evaluation) -> int | None:
    """The --seed the evaluated run was trained with (None when unknown)."""
    seed = _run_config(evaluation).get("seed")
    return int(seed) if seed is not None else None


def seed_group_key(evaluation: Evaluation) -> str:
    """What runs that differ only in --seed share: the run's options but the seed (and the
    loading ones), and every evaluation setting but the run's name."""
    config = {k: v for k, v in _run_config(evaluation).items() if k not in _NOT_RESULTS}
    settings = {
        k: v for k, v in (evaluation.summary.get("settings") or {}).items() if k not in _RUN_NAMES
    }
    return json.dumps({"run": config, "evaluation": settings}, sort_keys=True, default=str)


@dataclass
class SeedSummary:
    """One configuration over training seeds: the mean of the seeds' mean accuracies, their
    sample spread (ddof=1) and the mean of the seeds' episode 95% CIs (all in %)."""

    seeds: list[int | None]
    means: list[float]
    cis: list[float]

    @property
    def mean(self) -> float:
        return sum(self.means) / len(self.means)

    @property
    def seed_std(self) -> float:
        if len(self.means) < 2:
            return 0.0
        mean = self.mean
        return math.sqrt(sum((m - mean) ** 2 for m in self.means) / (len(self.means) - 1))

    @property
    def seed_ci95(self) -> float:
        return t_95(len(self.means)) * self.seed_std / math.sqrt(len(self.means))

    @property
    def episode_ci95(self) -> float:
        return sum(self.cis) / len(self.cis)

    def text(self) -> str:
        seeds = ", ".join("?" if s is None else str(s) for s in self.seeds)
        if len(self.means) < 2:  # no spread to show: a std and CI of one value are not 0
            return (
                f"{self.mean:.2f} (episode CI +-{self.episode_ci95:.2f}; 1 seed [{seeds}]: "
                "the spread across seeds needs 2+ seeds)"
            )
        return (
            f"{self.mean:.2f} (episode CI +-{self.episode_ci95:.2f}; across {len(self.means)} "
            f"seed(s) [{seeds}]: std {self.seed_std:.2f}, CI +-{self.seed_ci95:.2f})"
        )


def seed_summary(evaluations: Sequence[Evaluation], source: str | None = None) -> SeedSummary:
    """Evaluations of runs differing only in --seed, summarised over seeds (their accuracy on
    all test episodes, or on those of one test `source`); ValueError when two share a seed (the
    same run twice would count double)."""
    seeds = [training_seed(e) for e in evaluations]
    known = [s for s in seeds if s is not None]
    if len(set(known)) != len(known):
        paths = ", ".join(str(e.path) for e in evaluations)
        raise ReportInputError(
            f"evaluations {paths} repeat a training seed {known}: pass each run once"
        )
    values = [
        e.summary["accuracy"] if source is None else e.summary["per_source"][source]
        for e in evaluations
    ]
    return SeedSummary(seeds, [100 * v["mean"] for v in values], [100 * v["ci95"] for v in values])


def seed_groups(evaluations: Sequence[Evaluation]) -> list[list[Evaluation]]:
    """The evaluations by configuration (`seed_group_key`), in order of first appearance."""
    groups: dict[str, list[Evaluation]] = {}
    for evaluation in evaluations:
        groups.setdefault(seed_group_key(evaluation), []).append(evaluation)
    return list(groups.values())


def _labels_of(members: Sequence[Evaluation]) -> str:
    """A configuration's name: its evaluations' labels, sorted, each once."""
    return " / ".join(sorted({e.label for e in members}))


def seeds_report(evaluations: Sequence[Evaluation]) -> str:
    """One line per configuration: the mean over its training seeds and both spreads."""
    lines = []
    for members in seed_groups(evaluations):
        lines.append(f"{_labels_of(members)}: {seed_summary(members).text()}")
    return "\n".join(lines)


def series_name(evaluation: Evaluation, group_by: str) -> str:
    """The curve an evaluation belongs to: its --label, or its method (and inference)."""
    if group_by == "label":
        return evaluation.label
    inference = evaluation.summary.get("inference")
    method = str(evaluation.summary.get("method") or evaluation.label)
    return f"{method} ({inference})" if inference else method


def divergence(
    evaluations: Sequence[Evaluation],
    r_values: Sequence[float] | None,
    group_by: str = "auto",
) -> str:
    """Per method, the slope of test accuracy (points of %) against R (ATG Table 5). Each
    method's evaluations at one R are runs that differ only in --seed: their mean is the point,
    the spread across seeds is printed beside the episode CI. `auto` groups by --label unless
    every label names a single evaluation (one label per R), then by method."""
    if r_values is not None and len(r_values) != len(evaluations):
        raise ReportInputError(f"--r has {len(r_values)} values for {len(evaluations)} evaluations")
    if group_by == "auto":
        counts = Counter(e.label for e in evaluations)
        group_by = "method" if len(evaluations) > 1 and max(counts.values()) == 1 else "label"
    cells: dict[str, dict[float, list[Evaluation]]] = {}
    for index, evaluation in enumerate(evaluations):
        r = r_values[index] if r_values is not None else evaluation.summary.get("split_R")
        if r is None:
            raise ReportInputError(f"{evaluation.path}: its split file records no R; pass --r")
        series = cells.setdefault(series_name(evaluation, group_by), {})
        series.setdefault(float(r), []).append(evaluation)
    lines = []
    for name, by_r in cells.items():
        points = {r: seed_summary(members) for r, members in sorted(by_r.items())}
        if len(points) < 2:
            raise ReportInputError(
                f"{name}: evaluations at a single R ({next(iter(points)):g}); a slope needs "
                "two values of R (or --group-by method when each R has its own --label)"
            )
        rs = list(points)
        slope = divergence_slope(rs, [p.mean for p in points.values()])
        lines.append(
            f"{name}: slope {slope:.2f} accuracy points per unit"
            f" of R over R in [{min(rs):g}, {max(rs):g}] ({len(rs)} splits)"
        )
        lines += [f"  R={r:g}: {summary.text()}" for r, summary in points.items()]
    return "\n".join(lines)


def snapshot_kendall(run: Path, snapshots_csv: Path, last: int | None = None) -> tuple[float, int]:
    """Kendall tau between validation and test accuracies of the same snapshots."""
    valid = {int(r["step"]): float(r["accuracy"]) for r in _read_csv(run / VALIDATION_LOG)}
    test = {int(r["step"]): float(r["accuracy"]) for r in _read_csv(snapshots_csv)}
    steps = sorted(set(valid) & set(test))
    if last is not None:
        steps = steps[-last:]
    if len(steps) < 2:
        raise ReportInputError(
            f"{run}: need >= 2 snapshots with validation and test accuracy, got {steps}"
        )
    return kendall_tau([valid[s] for s in steps], [test[s] for s in steps]), len(steps)


def _snapshots_csv(run_dir: Path) -> Path:
    """The snapshots.csv of the run's one test evaluation of all snapshots."""
    found = sorted((run_dir / "eval").glob("test-all*/snapshots.csv"))
    if not found:
        raise LearnerInputError(
            f"{run_dir}/eval: no test-all*/snapshots.csv; run learners.evaluate --checkpoint all"
        )
    if len(found) > 1:
        raise ReportInputError(
            f"{run_dir}/eval holds {len(found)} evaluations of all snapshots "
            f"({', '.join(p.parent.name for p in found)}): pick one with --snapshots"
        )
    return found[0]


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("learners.report", __doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("ranks", "hardness", "ways-shots", "base-novel", "divergence", "seeds"):
        sub.add_parser(name).add_argument("evals", nargs="+", help="evaluation folders")
    for name in ("hardness", "base-novel"):
        sub.choices[name].add_argument(
            "--output", required=True, metavar="PNG", help="the plot", renamed_from=("--png",)
        )
    sub.choices["ways-shots"].add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="folder of the two plots",
        renamed_from=("--out-dir",),
    )
    sub.choices["divergence"].add_argument(
        "--r",
        type=finite_float,
        nargs="+",
        default=None,
        help="R of each evaluation's split, in order (default: from split)",
    )
    sub.choices["divergence"].add_argument(
        "--group-by",
        choices=("auto", "label", "method"),
        default="auto",
        help="one curve per --label or per method (auto: per method when each evaluation has "
        "its own label)",
    )
    sub.choices["ranks"].add_argument(
        "--per-run",
        action="store_true",
        help="one column per evaluation (default: one per configuration, the runs that differ "
        "only in --seed averaged: mean of the seeds' means +- 95%% CI across seeds)",
    )
    kendall = sub.add_parser("kendall")
    kendall.add_argument(
        "--run", required=True, help="learners.train run folder (its validation log is read)"
    )
    kendall.add_argument(
        "--snapshots",
        default=None,
        help="snapshots.csv of evaluate --checkpoint all (default: the one RUN/eval/test-all-*)",
    )
    kendall.add_argument(
        "--last", type=int, default=None, help="only the last K snapshots (K >= 2)"
    )
    return parser


def run(args: argparse.Namespace) -> str:
    if args.command == "kendall":
        if args.last is not None and args.last < 2:
            raise LearnerConfigError(
                f"--last {args.last}: expected >= 2 (a ranking of the last K snapshots)"
            )
        run_dir = Path(args.run)
        csv_path = Path(args.snapshots) if args.snapshots else _snapshots_csv(run_dir)
        if not csv_path.is_file():
            raise LearnerInputError(f"{csv_path}: run learners.evaluate --checkpoint all first")
        tau, count = snapshot_kendall(run_dir, csv_path, args.last)
        return f"Kendall tau between validation and test rankings of {count} snapshots: {tau:.3f}"
    evaluations = [load_evaluation(folder) for folder in args.evals]
    if args.command == "ranks":
        text = format_rank_table(rank_table(evaluations, args.per_run))
        if not args.per_run and any(len(g) > 1 for g in seed_groups(evaluations)):
            text += "\n" + SEEDS_FOOTNOTE
        return text
    if args.command == "hardness":
        lines = plot_hardness(evaluations, Path(args.output))
        text = "\n".join(
            f"{label}: accuracy = {slope:.2f} * hardness + {intercept:.2f}"
            for label, (slope, intercept) in lines.items()
        )
        extractors = sorted({str(e.summary.get("hardness_extractor")) for e in evaluations})
        if len(extractors) > 1:
            text += (
                "\nnote: these evaluations measured hardness with different extractors "
                f"({'; '.join(extractors)}): evaluate with one --hardness-model to compare them"
            )
        return text + f"\nwrote {args.output}"
    if args.command == "ways-shots":
        return ways_shots(evaluations, Path(args.output)) + f"\nwrote PNGs in {args.output}"
    if args.command == "base-novel":
        return base_novel(evaluations, Path(args.output)) + f"\nwrote {args.output}"
    if args.command == "seeds":
        return seeds_report(evaluations)
    return divergence(evaluations, args.r, args.group_by)


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
