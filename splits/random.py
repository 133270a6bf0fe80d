"""Moved: random splits are the split method `splits.methods.random` (`algorithm.random_split`).

Until version 0.3.0 the old command `python -m splits.random ...` runs `python -m splits make
--method random ...` after a one-line note, and `from splits.random import random_split` gives
the new function with a DeprecationWarning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from episodes.util.moved_modules import moved_names

__all__ = ["build_parser", "main"]

__getattr__ = moved_names(__name__, {"random_split": "splits.methods.random.algorithm"})


def build_parser() -> argparse.ArgumentParser:
    """`python -m splits make --method random`'s parser (this command's old name runs it)."""
    from splits.make import build_parser as make_parser

    return make_parser("random")


def main(argv: Sequence[str] | None = None) -> int:
    from splits.make import run_old_command

    return run_old_command("splits.random", "random", argv)


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
