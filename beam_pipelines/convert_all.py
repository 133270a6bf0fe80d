"""`python -m beam_pipelines.convert --all --input RAW_ROOT --output OUT_ROOT`: convert every
source found under RAW_ROOT in one Beam pipeline, one output folder per dataset.

Each source is looked for in its own sub-folder of RAW_ROOT, named by the source's
`raw_folders` (first name that exists wins; by default the source's name), e.g. aircraft in
`fgvc-aircraft-2013b` or `aircraft`, traffic_sign in `GTSRB` or `traffic_sign`; `--help` lists
them all.

A found folder is planned with its source (the layout is validated then); a folder whose layout
is wrong is reported as skipped with the reason and the others go on. The pipeline has one
ConvertUnits branch per planned source, each writing into its own
temporary folder; all are moved into place (OUT_ROOT/<dataset>/) only when the whole pipeline
succeeded. Per-source options (e.g. --quickdraw-max-per-class) apply to their source;
`--splits-dir DIR` replaces the published split of a dataset by DIR/<dataset>_splits.json or
DIR/<dataset>.json where such a file exists.

RAW_ROOT and OUT_ROOT may be object-storage URLs (a bucket root, `s3://bucket/raw`): the root is
listed once, the sources that read object storage are planned from that listing (the others
are reported as skipped, with the reason), and each dataset is published under OUT_ROOT.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import apache_beam as beam

from beam_pipelines.conversion.options import add_source_arguments, conversion_parser
from beam_pipelines.conversion.pipeline import (
    abort_output,
    begin_output,
    check_output,
    commit_output,
    lock_local_output,
)
from beam_pipelines.conversion.progress import ProgressReporter
from beam_pipelines.conversion.writer import ConvertUnits
from beam_pipelines.runners.interrupt_exit import exit_on_interrupt, interrupts_deferred
from beam_pipelines.runners.options import RunnerChoice, make_runner
from beam_pipelines.sources import SOURCES
from beam_pipelines.sources._lib.source_config import SourceConfig
from beam_pipelines.sources.base import ConversionPlan, LayoutError, Source
from episodes.records.dataset_spec import DatasetSpec, Split, load_spec
from episodes.storage import paths as storage_paths
from episodes.util.atomic_files import missing_parents, remove_if_empty
from episodes.util.cli_errors import run_main, user_faults
from episodes.util.cli_style import CommandParser
from episodes.util.output_overlap import refuse_overlap

__all__ = [
    "AllSourcesReport",
    "build_parser",
    "candidate_sources",
    "configs_from_args",
    "convert_all",
    "main",
    "output_location",
    "plan_sources",
    "RemoteRoot",
    "source_folder",
    "SourceOutcome",
    "split_file_in",
]


@dataclass
class SourceOutcome:
    """What happened to one source of an all-sources run."""

    source: str
    folder: Path | None = None
    status: str = "not found"  # not found | skipped | planned | converted
    reason: str = ""
    plan: ConversionPlan | None = None
    source_object: Source | None = None
    spec: DatasetSpec | None = None

    @property
    def rejected(self) -> int:
        return int(self.spec.provenance.get("rejected_count", 0)) if self.spec else 0


@dataclass
class AllSourcesReport:
    outcomes: list[SourceOutcome]
    output_root: Path
    seconds: float = 0.0
    runner: str = ""
    notes: list[str] = field(default_factory=list)

    def by_status(self, status: str) -> list[str]:
        return [o.source for o in self.outcomes if o.status == status]

    def summary(self) -> str:
        rows = [("source", "folder", "status", "classes", "images", "rejected", "splits / reason")]
        for o in self.outcomes:
            if o.spec is not None:
                spec = o.spec
                splits = (
                    " / ".join(f"{s.value} {len(spec.classes(s))}" for s in Split)
                    if spec.has_splits
                    else "no fixed split"
                )
                rows.append(
                    (
                        o.source,
                        o.folder.name,
                        o.status,
                        str(spec.num_classes),
                        f"{spec.total_images:,}",
                        str(o.rejected),
                        splits,
                    )
                )
            else:
                rows.append(
                    (
                        o.source,
                        o.folder.name if o.folder else "-",
                        o.status,
                        "-",
                        "-",
                        "-",
                        o.reason,
                    )
                )
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + "  " + r[6] for r in rows]
        lines.append(
            f"found {len(self.by_status('converted')) + len(self.by_status('skipped'))}, "
            f"converted {len(self.by_status('converted'))}, skipped {len(self.by_status('skipped'))}"
            f" -> {self.output_root} in {self.seconds:.1f} s ({self.runner})"
        )
        return "\n".join(lines + self.notes)


class RemoteRoot(str):
    """An object-storage output root: `root / name` is the URL of a dataset folder below it."""

    def __truediv__(self, name: str) -> str:
        return storage_paths.join(str(self), name)


def output_location(root: str | Path) -> Path | RemoteRoot:
    """The output root as a local Path or a RemoteRoot URL."""
    if storage_paths.is_remote(root):
        return RemoteRoot(storage_paths.folder_url(str(root)))
    return Path(root)


def source_folder(root: Path, source: str) -> Path | None:
    """The sub-folder of `root` holding `source`'s raw data, if any."""
    for name in SOURCES[source].raw_folder_names():
        if (root / name).exists():
            return root / name
    return None


def candidate_sources(only: list[str] | None = None) -> list[str]:
    """Sources an all-sources run looks for, by name: every registered one that reads a folder."""
    names = sorted(n for n, cls in SOURCES.items() if cls.raw_folder_names())
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise LayoutError(
                f"--sources {','.join(unknown)}: expected names among {', '.join(names)}"
            )
        names = [n for n in names if n in only]
    return names


def configs_from_args(
    args: argparse.Namespace, names: Sequence[str], splits_dir: str | Path | None = None
) -> dict[str, SourceConfig]:
    """Each source's config from the flags given (a bad value raises ConfigError before any
    work), with its own split file from `splits_dir` where it has one."""
    configs = {}
    for name in names:
        config = SOURCES[name].config_class.from_args(args)
        own = split_file_in(splits_dir, name) if splits_dir else None
        if own is not None and "split_file" in {f.name for f in dataclasses.fields(config)}:
            config = dataclasses.replace(config, split_file=str(own))
        configs[name] = config
    return configs


def split_file_in(splits_dir: str | Path, source: str) -> Path | None:
    """DIR/<source>_splits.json or DIR/<source>.json, the first that exists."""
    for name in (f"{source}_splits.json", f"{source}.json"):
        if (Path(splits_dir) / name).is_file():
            return Path(splits_dir) / name
    return None


def plan_sources(
    input_root: Path, configs: Mapping[str, SourceConfig], only: list[str] | None = None
) -> list[SourceOutcome]:
    """Find and plan every source under `input_root`; wrong layouts become 'skipped'."""
    outcomes = []
    datasets: dict[str, str] = {}
    remote = storage_paths.is_remote(input_root)
    for name in candidate_sources(only):
        outcome = SourceOutcome(name, source_folder(input_root, name))
        outcomes.append(outcome)
        if outcome.folder is None:
            continue
        if remote and not SOURCES[name].remote_input:
            outcome.status = "skipped"
            outcome.reason = f"the {name} source reads local files only; copy it to a local folder"
            continue
        try:
            source: Source = SOURCES[name](configs.get(name))
            plan = source.plan(outcome.folder)
            if not plan.classes:
                raise LayoutError(f"{outcome.folder}: no classes found; expected {source.layout}")
        except (LayoutError, ValueError, OSError) as exc:
            outcome.status, outcome.reason = "skipped", str(exc)
            continue
        if plan.dataset_name in datasets:
            outcome.status = "skipped"
            outcome.reason = (
                f"dataset {plan.dataset_name!r} already comes from {datasets[plan.dataset_name]}"
            )
            continue
        datasets[plan.dataset_name] = name
        outcome.status, outcome.plan, outcome.source_object = "planned", plan, source
    return outcomes


def convert_all(
    input_root: str | Path,
    output_root: str | Path,
    runner: RunnerChoice,
    configs: Mapping[str, SourceConfig] | None = None,
    overwrite: bool = False,
    only: list[str] | None = None,
    exit_on_ctrl_c: bool = False,
) -> AllSourcesReport:
    """Convert every source found under `input_root` in one pipeline into `output_root` (local
    folders or object-storage URLs); `configs` holds the sources' options (default: each
    source's defaults)."""
    split_files = [
        ("--splits-dir", getattr(c, "split_file", None)) for c in (configs or {}).values()
    ]
    refuse_overlap(("--output", output_root), [("--input", input_root), *split_files])
    storage_paths.use_options(runner.options)
    runner.check_storage(input_root, output_root)
    input_root = storage_paths.input_location(input_root)
    output_root = output_location(output_root)
    if not input_root.is_dir():
        raise LayoutError(f"{input_root}: not a folder; expected one sub-folder per source")
    outcomes = plan_sources(input_root, configs or {}, only)
    planned = [o for o in outcomes if o.status == "planned"]
    report = AllSourcesReport(outcomes, output_root, runner=runner.description)
    if not planned:
        expected = ", ".join(
            f"{s}: {SOURCES[s].raw_folder_names()[0]}" for s in candidate_sources(only)
        )
        found = [f"{o.source} ({o.reason})" for o in outcomes if o.status == "skipped"]
        raise LayoutError(
            f"{input_root}: no source to convert; expected sub-folders {expected}"
            + (f"; skipped: {'; '.join(found)}" if found else "")
        )
    with ExitStack() as locks:  # one conversion per output folder at a time
        if not storage_paths.is_remote(output_root):  # folders made for it go if left empty
            locks.callback(remove_if_empty, missing_parents(output_root / "dataset"))
        for outcome in planned:
            lock = lock_local_output(output_root / outcome.plan.dataset_name)
            if lock is not None:
                locks.callback(lock.release)
        ctrl_c_locks = locks if exit_on_ctrl_c else None
        return _convert_planned(planned, report, output_root, runner, overwrite, ctrl_c_locks)


def _convert_planned(
    planned: list,
    report: AllSourcesReport,
    output_root: Path,
    runner: RunnerChoice,
    overwrite: bool,
    ctrl_c_locks: ExitStack | None,
) -> AllSourcesReport:
    """Convert the planned sources; with `ctrl_c_locks`, a Ctrl-C removes every staging folder,
    releases these locks and ends the process (beam_pipelines.runners.interrupt_exit)."""
    for outcome in planned:  # refuse before any work starts
        check_output(output_root / outcome.plan.dataset_name, overwrite)
    temps: dict[str, Path] = {}
    start = time.monotonic()
    try:
        for outcome in planned:
            temps[outcome.source] = begin_output(output_root / outcome.plan.dataset_name, overwrite)

        def on_ctrl_c() -> None:
            for tmp in temps.values():
                abort_output(tmp)
            ctrl_c_locks.close()

        guard = nullcontext()
        if ctrl_c_locks is not None:
            stopped = "interrupted: conversions stopped, staging folders removed; no output changed"
            guard = exit_on_interrupt(on_ctrl_c, stopped)
        pipeline = beam.Pipeline(runner=runner.runner, options=runner.options)
        with guard, ExitStack() as progress, pipeline:  # runs the pipeline, then the progress stops
            for outcome in planned:
                tmp, planned_images = temps[outcome.source], outcome.plan.expected_items
                progress.enter_context(
                    ProgressReporter(tmp, planned_images, label=f"convert {outcome.source}")
                )
                plan = outcome.plan
                _ = pipeline | f"Convert[{outcome.source}]" >> ConvertUnits(
                    outcome.source_object, plan, str(temps[outcome.source])
                )
        with interrupts_deferred():  # never half-published
            for outcome in planned:
                commit_output(temps.pop(outcome.source), output_root / outcome.plan.dataset_name)
    except BaseException:
        for tmp in temps.values():
            abort_output(tmp)
        raise
    report.seconds = time.monotonic() - start
    for outcome in planned:
        output = output_root / outcome.plan.dataset_name
        remote = storage_paths.is_remote(output)
        outcome.spec = storage_paths.load_remote_spec(str(output)) if remote else load_spec(output)
        outcome.status = "converted"
    return report


def build_parser() -> CommandParser:
    """The convert CLI's flags, every source's own options (each flag once) and --all's."""
    parser = conversion_parser(
        "beam_pipelines.convert --all",
        "Convert every source found under --input (one sub-folder per source).",
    )
    group = parser.add_argument_group("all sources")
    group.add_argument(
        "--sources",
        default=None,
        help="comma-separated subset of sources to look for (default: all)",
    )
    group.add_argument(
        "--splits-dir",
        default=None,
        help="folder of <dataset>_splits.json / <dataset>.json files replacing the published "
        "splits",
    )
    add_source_arguments(parser, [SOURCES[name] for name in sorted(SOURCES)])
    return parser


@user_faults
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    missing = [flag for flag in ("input", "output") if not getattr(args, flag)]
    if missing:
        parser.error(f"missing {', '.join('--' + m for m in missing)}")
    if getattr(args, "split_file", None):
        parser.error("--split-file names one dataset's split; with --all use --splits-dir DIR")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    only = [s.strip() for s in args.sources.split(",") if s.strip()] if args.sources else None
    configs = configs_from_args(args, candidate_sources(only), args.splits_dir)
    runner = make_runner(args, beam_args)
    report = convert_all(
        args.input,
        args.output,
        runner,
        configs,
        overwrite=args.overwrite,
        only=only,
        exit_on_ctrl_c=True,
    )
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
