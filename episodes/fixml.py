"""`python -m episodes.fixml {pool,holdout} --dataset DIR ... --output FILE`: draw a FIX-ML fixed
support pool or held-out base examples once and save them as JSON (Setlur et al., section 4).

The drawing lives in `episodes.sampling.fixml` (and the file types in
`episodes.sampling.fixml_records`); this module is the command. The library names it used to
hold still import from here until version 0.3.0, with a DeprecationWarning (it reaches them
through their modules, so that every such import warns).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from episodes.records.dataset_spec import load_spec
from episodes.sampling import fixml, fixml_records
from episodes.util.atomic_files import atomic_path
from episodes.util.cli_errors import OutputExistsError, UserError, run_main, user_faults
from episodes.util.cli_style import (
    add_dataset_argument,
    command_parser,
    finite_float,
    single_dataset,
)
from episodes.util.moved_modules import moved_names
from episodes.util.output_overlap import refuse_overlap

__all__ = ["build_parser", "main"]

__getattr__ = moved_names(
    __name__,
    {
        **dict.fromkeys(
            ("MixedSampler", "check_lambda", "make_base_holdout", "make_fixed_support_pool"),
            "episodes.sampling.fixml",
        ),
        **dict.fromkeys(
            ("BaseHoldout", "FixedSupportPool", "HOLDOUT_FORMAT", "POOL_FORMAT"),
            "episodes.sampling.fixml_records",
        ),
    },
)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "episodes.fixml",
        "Draw FIX-ML fixed support pools or held-out base examples (JSON files).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    pool_cmd = commands.add_parser("pool", help="k fixed support records per class of a split")
    pool_cmd.add_argument("--k", type=int, required=True, help="support examples per class")
    pool_cmd.add_argument("--holdout", type=Path, help="holdout JSON whose records to avoid")
    hold_cmd = commands.add_parser("holdout", help="held-out records of each base class")
    hold_cmd.add_argument(
        "--fraction",
        type=finite_float,
        required=True,
        help="fraction of each class held out, in (0, 1)",
    )
    for cmd in (pool_cmd, hold_cmd):
        add_dataset_argument(
            cmd, several=False, help="converted dataset folder (or its dataset_spec.json)"
        )
        cmd.add_old_positional("spec", "--dataset")
        cmd.add_argument(
            "--split", default="train", help="split: train, valid or test (default train)"
        )
        cmd.add_argument("--seed", type=int, default=0, help="random seed of the draw (default 0)")
        cmd.add_argument(
            "--output", type=Path, required=True, help="JSON file to write", renamed_from=("--out",)
        )
        cmd.add_argument("--overwrite", action="store_true", help="replace an existing file")
    return parser


@user_faults
def main(argv: list[str] | None = None) -> int:
    """python -m episodes.fixml {pool,holdout} --dataset DIR ...: write a pool or holdout file."""
    args = build_parser().parse_args(argv)
    dataset = single_dataset(args.dataset)
    if not args.output.parent.is_dir():
        raise UserError(f"--output {args.output}: folder {args.output.parent} does not exist")
    if args.output.exists() and not args.overwrite:
        raise OutputExistsError(f"--output {args.output}: exists (add --overwrite to replace it)")
    holdout_file = getattr(args, "holdout", None)
    refuse_overlap(("--output", args.output), [("--dataset", dataset), ("--holdout", holdout_file)])
    spec = load_spec(dataset)
    if args.command == "pool":
        holdout = fixml_records.BaseHoldout.load(args.holdout) if args.holdout else None
        result: fixml_records.FixedSupportPool | fixml_records.BaseHoldout
        result = fixml.make_fixed_support_pool(spec, args.split, args.k, args.seed, holdout=holdout)
    else:
        result = fixml.make_base_holdout(spec, args.split, args.fraction, args.seed)
    with atomic_path(args.output) as tmp:
        result.save(tmp)
    total = sum(len(r) for r in result.records.values())
    print(f"wrote {args.output}: {len(result.records)} classes, {total} records")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
