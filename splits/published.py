"""Published split files shipped in `splits/published/` and a loader that names their classes.

Names are '<group>/<file stem>', e.g. 'atg/lfw10_D0.96', 'meta_dataset/ilsvrc_2012',
'fc100/cifar100'.  `python -m splits.published list` lists them; `show NAME` prints sizes and
source; `--class-names FILE` resolves printed indices to names. `python -m splits make --method
published --name NAME --output FILE` writes one as a split file (`splits.methods.published`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from episodes.records.index_conventions import convention_class_names
from episodes.records.split_file import SplitFile, SplitFileError
from episodes.util.cli_errors import user_faults
from episodes.util.cli_style import CommandParser, command_parser

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"


def list_published() -> list[str]:
    """All shipped split names, sorted."""
    return sorted(
        p.relative_to(PUBLISHED_DIR).with_suffix("").as_posix()
        for p in PUBLISHED_DIR.rglob("*.json")
    )


def load_published(name: str, class_names: Sequence[str] | None = None) -> SplitFile:
    """Load a shipped split; index-only tables get names from `class_names` or their convention.

    Without `class_names`, tables whose convention has no offline name list (LFW10, mini- and
    tiered-ImageNet) are returned with indices only.
    """
    path = PUBLISHED_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(list_published()[:8])
        raise SplitFileError(f"no published split {name!r} (e.g. {known}, ...)")
    split = SplitFile.load(path)
    if split.class_indices is None or split.has_names():
        return split
    names = list(class_names) if class_names is not None else None
    if names is None and split.index_convention:
        names = convention_class_names(split.index_convention)
    return split.with_class_names(names) if names is not None else split


def regeneration_parser(prog: str, description: str, default_folder: Path) -> CommandParser:
    """The parser of a command that regenerates shipped split files from their sources (the
    paper text, the reference data): `--output DIR`, by default the shipped folder."""
    parser = command_parser(prog, description=description)
    parser.add_argument(
        "--output",
        default=str(default_folder),
        metavar="DIR",
        renamed_from=("--out-dir",),
        help="folder for the split files (default: the shipped ones in splits/published/)",
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


@user_faults(ValueError)
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "list":
        print("\n".join(list_published()))
        return 0
    names = None
    if args.class_names:
        from splits.class_names import read_class_names

        names = read_class_names(args.class_names)
    split = load_published(args.name, names)
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
