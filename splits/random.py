"""Seeded random class splits (the ATG paper's 'Random' tasksets, equivalent to R = 0).

`python -m splits.random --classes-from DATASET_OR_SPEC --fractions 0.7 0.15 0.15 --seed 0
--output FILE`.  The one fraction rule of `split_sizes` (valid and test get floor(f * N)
classes, train the rest, no asked-for split empty), shared with `convert --split-fractions`:
the same class names, fractions and seed give the same split.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from splits.class_names import ACCEPTED, read_class_list
from splits.split_file import SplitFile
from splits.split_sizes import DEFAULT_FRACTIONS, add_fractions_argument, split_by_fractions


def random_split(
    class_names: Sequence[str],
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seed: int = 0,
    dataset: str = "dataset",
) -> SplitFile:
    """Shuffle the classes with `seed` and cut them into train / valid / test by `fractions`
    (`split_sizes.split_by_fractions`)."""
    train, valid, test = split_by_fractions(class_names, fractions, seed)
    return SplitFile(
        dataset=dataset,
        method="random",
        train=train,
        valid=valid,
        test=test,
        parameters={"seed": int(seed), "fractions": [float(f) for f in fractions]},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m splits.random", description="Write a seeded random class split."
    )
    parser.add_argument("--classes-from", required=True, help=ACCEPTED)
    add_fractions_argument(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", help="dataset name (default: the spec's, else file stem)")
    parser.add_argument("--output", required=True, help="split file to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)
    try:
        if Path(args.output).exists() and not args.overwrite:
            raise ValueError(f"{args.output} exists; pass --overwrite to replace it")
        classes = read_class_list(args.classes_from)
        dataset = args.dataset or classes.dataset or Path(args.classes_from).stem
        split = random_split(classes.names, args.fractions, args.seed, dataset)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    split.save(args.output)
    sizes = split.sizes()
    print(
        f"random split seed {args.seed}: {sizes['train']}/{sizes['valid']}/{sizes['test']}"
        f" -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
