"""`python -m beam_pipelines.convert --source NAME --input RAW --output OUT`: convert a raw
dataset into per-class TFRecords + index files + dataset_spec.json with Apache Beam.

`--list-sources` prints every source with the raw layout it expects; `--source NAME --help`
lists that source's options (its typed config, beam_pipelines.sources._lib.source_config). `--all`
converts every source found under RAW (beam_pipelines.convert_all). Unknown runner flags go to
Beam (Dataflow, Flink, Spark).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from beam_pipelines import convert_all
from beam_pipelines.conversion.options import add_source_arguments, conversion_parser
from beam_pipelines.conversion.pipeline import check_output, clean_leftovers, convert
from beam_pipelines.download import download_for_convert
from beam_pipelines.runners.options import make_runner
from beam_pipelines.sources import SOURCES, get_source_class
from episodes.storage import paths as storage_paths
from episodes.util.cli_errors import UsageError, run_main, user_faults
from episodes.util.cli_style import CommandParser
from episodes.util.output_overlap import refuse_overlap

__all__ = ["build_parser", "chosen_command", "clean_only", "list_sources", "main"]


def build_parser(source: str | None = None) -> CommandParser:
    """The convert command's flags; with `source` (a name or tfds:NAME), also that source's
    own. LayoutError for an unknown source."""
    parser = conversion_parser(
        "beam_pipelines.convert",
        "Convert a raw image dataset into per-class TFRecords with Apache Beam.",
    )
    parser.add_argument(
        "--download",
        action="store_true",
        help="first fetch the source's raw files into --input (python -m beam_pipelines.download)",
    )
    parser.add_argument(
        "--clean-only",
        action="store_true",
        help="convert nothing: remove what killed runs left beside --output (staging folders "
        "or prefixes, unfinished S3 uploads), then exit",
    )
    if source:
        add_source_arguments(parser, [get_source_class(source)])
    return parser


def chosen_command(argv: list[str]) -> argparse.Namespace:
    """`--source`, `--all` and `--list-sources` of `argv`, read before the full parser exists
    (which flags it has depends on the source)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--source")
    pre.add_argument("--all", action="store_true")
    pre.add_argument("--list-sources", action="store_true")
    pre.add_argument("--download", action="store_true")
    pre.add_argument("--input")
    pre.add_argument("--output")
    pre.add_argument("--overwrite", action="store_true")
    pre.add_argument("--clean-only", action="store_true")
    return pre.parse_known_args(argv)[0]


def clean_only(args: argparse.Namespace, beam_args: list[str]) -> int:
    """`--clean-only`: the leftovers of killed runs beside --output removed, one line each,
    then one line saying how many."""
    extra = [f"--{flag}" for flag in ("source", "input") if getattr(args, flag)]
    extra += ["--all"] * bool(args.all) + ["--download"] * bool(args.download)
    if extra:
        raise UsageError(f"--clean-only converts nothing: drop {', '.join(extra)}")
    if not args.output:
        raise UsageError("--clean-only needs --output (the output whose leftovers to remove)")
    storage_paths.use_options(make_runner(args, beam_args).options)  # S3/GCS flags
    output = args.output if storage_paths.is_remote(args.output) else Path(args.output)
    removed = clean_leftovers(output)
    if removed:
        print(f"cleaned {args.output}: {len(removed)} leftover(s) of killed runs removed")
    else:
        print(f"cleaned {args.output}: nothing left over by killed runs")
    return 0


def list_sources() -> str:
    """A line per source: its name, the raw layout it expects, and the sub-folders `--all`
    looks for it in."""
    width = max(len(n) for n in SOURCES)
    lines = []
    for name in sorted(SOURCES):
        folders = SOURCES[name].raw_folder_names()
        where = f"  [--all: {' or '.join(folders)}]" if folders else ""
        lines.append(f"{name:<{width}}  {SOURCES[name].layout}{where}")
    return "\n".join(lines)


@user_faults
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = chosen_command(argv)
    if chosen.clean_only:
        args, beam_args = build_parser().parse_known_args(argv)
        return clean_only(args, beam_args)
    if chosen.download:  # fill --input first (once the output may be written), then convert
        # the output is never the input, around it or inside it (convert checks it again)
        refuse_overlap(("--output", chosen.output), [("--input", chosen.input)])
        if chosen.output and not chosen.all and "://" not in chosen.output:
            check_output(Path(chosen.output), chosen.overwrite)
        download_for_convert(chosen.source, chosen.all, chosen.input)
        argv = [a for a in argv if a != "--download"]
    if chosen.all:
        return convert_all.main(argv)
    parser = build_parser(chosen.source)
    args, beam_args = parser.parse_known_args(argv)
    if args.list_sources:
        print(list_sources())
        return 0
    data_dir = getattr(args, "tfds_data_dir", None)  # a prepared TFDS dataset's folder
    required = ["source", "output"] if data_dir else ["source", "input", "output"]
    missing = [flag for flag in required if not getattr(args, flag)]
    if missing:
        parser.error(f"missing {', '.join('--' + m for m in missing)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    source = get_source_class(args.source).from_args(args)  # options checked before any work
    runner = make_runner(args, beam_args)
    report = convert(
        source,
        args.input or data_dir,
        args.output,
        runner,
        overwrite=args.overwrite,
        exit_on_ctrl_c=True,
    )
    print(report.summary())
    return 0


if __name__ == "__main__":
    stopped = "interrupted (an output is published only when its conversion finished)"
    sys.exit(run_main(main, interrupted=stopped))
