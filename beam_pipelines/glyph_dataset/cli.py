"""`python -m beam_pipelines.glyph_dataset`: the command's parser and `main` (one line per fault)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from beam_pipelines.glyph_dataset.config import (
    OMNIGLOT_DRAWERS,
    OMNIGLOT_SIZE,
    GlyphDatasetConfig,
)
from beam_pipelines.glyph_dataset.generation import generate
from episodes.util.cli_errors import user_faults
from episodes.util.cli_style import CommandParser, command_parser

__all__ = ["build_parser", "main"]


def build_parser() -> CommandParser:
    """The command's parser (a usage error: one `error:` line, exit status 2)."""
    parser = command_parser(
        "beam_pipelines.glyph_dataset",
        description="Write the embedded glyph dataset in Omniglot's archive layout\n"
        "(images_background/, images_evaluation/), deterministic from --seed.",
    )
    parser.add_argument("--output", required=True, type=Path, help="dataset folder to write")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--alphabets", type=int, default=50, help="alphabets, 60%% background (default 50)"
    )
    parser.add_argument(
        "--examples", type=int, default=OMNIGLOT_DRAWERS, help="drawers per character (20)"
    )
    parser.add_argument(
        "--image-size",
        type=int,
        default=OMNIGLOT_SIZE,
        metavar="N",
        renamed_from=("--size",),
        help=f"image side in pixels of the drawn glyphs (default {OMNIGLOT_SIZE}, Omniglot's)",
    )
    parser.add_argument(
        "--max-characters", type=int, default=None, help="keep the first N characters per alphabet"
    )
    parser.add_argument(
        "--zip", action="store_true", help="write images_background.zip / images_evaluation.zip"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    """Generate as asked; bad input is one `error:` line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    config = GlyphDatasetConfig(
        seed=args.seed,
        alphabets=args.alphabets,
        examples=args.examples,
        size=args.image_size,
        max_characters=args.max_characters,
        as_zip=args.zip,
    )
    summary = generate(
        args.output,
        config,
        overwrite=args.overwrite,
        workers=args.workers,
        progress=not args.quiet,
    )
    print(summary.describe())
    return 0
