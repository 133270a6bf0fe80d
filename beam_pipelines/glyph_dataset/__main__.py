"""`python -m beam_pipelines.glyph_dataset --output DIR --seed 0`: write the embedded glyph dataset."""

from __future__ import annotations

import sys

from beam_pipelines.glyph_dataset.cli import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
