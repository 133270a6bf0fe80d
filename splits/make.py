"""`python -m splits make --method NAME ...`: write split files by any registered method.

  python -m splits make --method random --dataset OUT/cifar100 --fractions 0.7 0.15 0.15
  python -m splits make --method semantic --kind dag --dataset OUT/ilsvrc_2012
  python -m splits make --method atg --embeddings EMB.npz --dataset OUT/omniglot \
      --divergence 0.04 0.32 0.64 0.96
  python -m splits make --method published --name atg/lfw10_D0.96 --class-names NAMES.txt

The inputs every method shares are defined here once; a method's own flags come from its
Parameters dataclass (`--method NAME --help` lists them). Everything is read and checked
before any long work: bad values, missing inputs, an unreachable ATG divergence and an
existing `--output` (without `--overwrite`) end in one line and nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from episodes.util.cli_errors import (
    OutputExistsError,
    UsageError,
    UserError,
    run_main,
    user_faults,
)
from episodes.util.cli_style import (
    OLD_SPELLINGS_UNTIL,
    CommandParser,
    add_dataset_argument,
    command_parser,
    single_dataset,
)
from episodes.util.config_flags import add_config_arguments, config_from_args
from episodes.util.output_overlap import refuse_overlap
from splits.methods import method_class, method_names
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod

__all__ = [
    "DEFAULT_FOLDER",
    "INPUT_FLAGS",
    "build_parser",
    "check_inputs_used",
    "main",
    "output_paths",
    "parse_args",
    "run",
    "run_old_command",
    "split_inputs",
]

DEFAULT_FOLDER = Path("splits")
# The shared inputs, as SplitInputs fields: the flag of each, for "not used by" messages.
INPUT_FLAGS = {"dataset": "--dataset", "class_names": "--class-names", "embeddings": "--embeddings"}


def build_parser(method: str | None = None) -> CommandParser:
    """The parser of `python -m splits make`; with `method`, that method's flags too."""
    names = method_names()
    parser = command_parser(
        "splits make",
        description="Write train / valid / test class split files by one of the split methods.",
        epilog=f"methods: {', '.join(names)}; `--method NAME --help` lists a method's flags",
    )
    parser.add_argument("--method", required=True, choices=names, help="how to split")
    inputs = parser.add_argument_group("inputs (each method reads the ones it needs)")
    add_dataset_argument(
        inputs,
        required=False,
        several=False,
        help="converted dataset folder (or its dataset_spec.json): its classes, names, hierarchy",
    )
    inputs.add_argument(
        "--class-names",
        metavar="FILE",
        renamed_from=("--classes-from", "--class-names-from"),
        help="class names instead of --dataset: a JSON list, a text file (one name a line) or "
        "an embeddings .npz",
    )
    inputs.add_argument(
        "--embeddings", metavar="NPZ", help="class embeddings (python -m splits.embed): ATG's input"
    )
    inputs.add_argument(
        "--dataset-name",
        metavar="NAME",
        help="the name a split file records (default: the --dataset spec's, else the method's)",
    )
    inputs.add_argument("--seed", type=int, default=None, help="random seed (default 0)")
    output = parser.add_argument_group("output")
    output.add_argument(
        "--output",
        metavar="PATH",
        renamed_from=("--output-dir",),
        help="split file (a .json path), or a folder for the method's file names "
        "(default splits/DATASET/)",
    )
    output.add_argument("--overwrite", action="store_true", help="replace existing split files")
    output.add_argument("--quiet", action="store_true", help="no progress lines")
    if method is not None:
        chosen = method_class(method)
        group = parser.add_argument_group(f"--method {method}: {chosen.summary}")
        add_config_arguments(group, chosen.Parameters)
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Two passes: `--method` first, then the parser with that method's flags."""
    given = list(sys.argv[1:] if argv is None else argv)
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--method")
    method = peek.parse_known_args(given)[0].method
    return build_parser(method if method in method_names() else None).parse_args(given)


def split_inputs(args: argparse.Namespace, old_command: str | None = None) -> SplitInputs:
    """The shared inputs of parsed flags. Under an old command name (`python -m splits.atg`),
    `--dataset NAME` that is no path is the dataset's name, as it was there (with a note)."""
    dataset = single_dataset(args.dataset)
    name = args.dataset_name
    if old_command and dataset is not None and not Path(dataset).exists():
        print(
            f"note: --dataset NAME of python -m {old_command} is now --dataset-name NAME "
            f"(--dataset takes a converted dataset folder); the old use goes in "
            f"{OLD_SPELLINGS_UNTIL}",
            file=sys.stderr,
        )
        dataset, name = None, name or dataset
    return SplitInputs(
        dataset=dataset,
        class_names=args.class_names,
        embeddings=args.embeddings,
        dataset_name=name,
        seed=args.seed,
        progress=not args.quiet,
    )


def check_inputs_used(method: SplitMethod, inputs: SplitInputs) -> None:
    """Refuse a shared input the method does not read (it would be silently ignored)."""
    for field, flag in INPUT_FLAGS.items():
        if getattr(inputs, field) is not None and field not in method.reads:
            raise UsageError(f"{flag} is not an input of --method {method.name}")


def output_paths(output: str | None, planned: Sequence[PlannedSplit]) -> list[Path]:
    """Where each planned split goes: `--output FILE.json` (one split), else the method's file
    names in the `--output` folder (default splits/<dataset>/)."""
    if output is not None and output.endswith(".json"):
        if len(planned) > 1:
            raise UsageError(
                f"--output {output} is one file but {len(planned)} split files are made: "
                "give a folder"
            )
        return [Path(output)]
    return [
        (Path(output) if output else DEFAULT_FOLDER / item.dataset) / item.file_name
        for item in planned
    ]


@user_faults
def run(argv: Sequence[str] | None = None, old_command: str | None = None) -> int:
    """Parse, check everything, then make and save each planned split file."""
    args = parse_args(argv)
    chosen = method_class(args.method)
    method = chosen(config_from_args(chosen.Parameters, args))
    inputs = split_inputs(args, old_command)
    check_inputs_used(method, inputs)
    planned = method.plan(inputs)
    paths = output_paths(args.output, planned)
    read = [(flag, getattr(inputs, field)) for field, flag in INPUT_FLAGS.items()]
    for path in [args.output] if args.output else paths:  # the folder or file given, else each
        refuse_overlap(("--output", path), read)
    existing = [str(p) for p in paths if p.exists()]
    if existing and not args.overwrite:
        raise OutputExistsError(f"{existing[0]} exists; pass --overwrite to replace it")
    for item in planned:
        item.preflight()
    failed: list[UserError] = []
    for item, path in zip(planned, paths):  # one R of a sweep that fails leaves the others
        start = time.perf_counter()
        try:
            split = item.build()
        except UserError as err:
            failed.append(err)
            continue
        split.save(path)
        print(f"{method.describe(split, time.perf_counter() - start)} -> {path}")
    if len(failed) == 1 and len(planned) == 1:
        raise failed[0]
    if failed:
        raise UserError(
            f"{len(failed)} of {len(planned)} split files not made: "
            + "; ".join(str(err) for err in failed)
        )
    return 0


def run_old_command(old: str, method: str, argv: Sequence[str] | None) -> int:
    """`python -m OLD ...`, an old name of `python -m splits make --method METHOD ...`: a
    one-line note, then the same run (old flag spellings still parse, each with a note)."""
    print(
        f"note: python -m {old} is now python -m splits make --method {method}; the old name "
        f"goes in {OLD_SPELLINGS_UNTIL}",
        file=sys.stderr,
    )
    given = list(sys.argv[1:] if argv is None else argv)
    return run(["--method", method, *given], old_command=old)


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv)


if __name__ == "__main__":
    sys.exit(run_main(main))
