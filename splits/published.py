"""`python -m splits.published list | show NAME`: the published split files shipped with the
toolkit (`episodes.records.published_splits`, where they live since version 0.2.0: the
converters read them too, and `beam_pipelines` stands below `splits`).

Names are '<group>/<file stem>', e.g. 'atg/lfw10_D0.96', 'meta_dataset/ilsvrc_2012',
'fc100/cifar100'. `show NAME` prints sizes and source; `--class-names FILE` resolves printed
indices to names. `python -m splits make --method published --name NAME --output FILE` writes
one as a split file (`splits.methods.published`). The regeneration commands
(`splits.published_tables`, `splits.published_meta_dataset`) share the helpers below.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from episodes.records import published_splits
from episodes.records.split_file import SplitFile
from episodes.util.cli_errors import user_faults
from episodes.util.cli_style import CommandParser, command_parser
from episodes.util.moved_modules import moved_names

__all__ = ["build_parser", "main", "regeneration_parser", "write_published_files"]

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ("PUBLISHED_DIR", "list_published", "load_published"), "episodes.records.published_splits"
    ),
)


def regeneration_parser(prog: str, description: str, default_folder: Path) -> CommandParser:
    """The parser of a command that regenerates shipped split files from their sources (the
    paper text, the reference data): `--output DIR`, by default the shipped folder."""
    parser = command_parser(prog, description=description)
    parser.add_argument(
        "--output",
        default=str(default_folder),
        metavar="DIR",
        renamed_from=("--out-dir",),
        help="folder for the split files (default: the shipped ones, episodes/records/published/)",
    )
    return parser


def write_published_files(
    splits: Iterable[SplitFile], folder: str | Path, file_name: Callable[[SplitFile], str]
) -> None:
    """Save each split as `folder/file_name(split)`, printing its path and train/valid/test
    sizes."""
    for split in splits:
        path = split.save(Path(folder) / file_name(split))
        sizes = split.sizes()
        print(f"{path}: {sizes['train']}/{sizes['valid']}/{sizes['test']}")


def build_parser() -> argparse.ArgumentParser:
    """`python -m splits.published list | show NAME`."""
    parser = command_parser(
        "splits.published",
        description="List or show the shipped split files (`python -m splits make --method "
        "published --name NAME` writes one).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the names of the shipped splits")
    show = sub.add_parser("show", help="sizes, source and index convention of one")
    show.add_argument("name")
    show.add_argument("--class-names", metavar="FILE", help="class list in the table's index order")
    # Writing moved to `splits make --method published`; these still work, with a note.
    show.add_argument("--output", help=argparse.SUPPRESS)
    show.add_argument("--overwrite", action="store_true", help=argparse.SUPPRESS)
    return parser


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "list":
        print("\n".join(published_splits.list_published()))
        return 0
    names = None
    if args.class_names:
        from splits.class_names import read_class_names

        names = read_class_names(args.class_names)
    split = published_splits.load_published(args.name, names)
    sizes = split.sizes()
    print(
        f"{args.name}: {split.dataset} {split.method} "
        f"{sizes['train']}/{sizes['valid']}/{sizes['test']}"
    )
    if split.source:
        print(f"source: {split.source}")
    if split.index_convention:
        print(f"index convention: {split.index_convention}; named: {split.has_names()}")
    if args.output is None:
        return 0
    from splits.make import run_old_command

    given = ["--name", args.name, "--output", args.output]
    given += ["--class-names", args.class_names] if args.class_names else []
    given += ["--overwrite"] if args.overwrite else []
    return run_old_command("splits.published show --output", "published", given)


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
