"""Moved: ATG is the split method `splits.methods.atg` (`config`, `algorithm`, `method`).

Until version 0.3.0 the old command `python -m splits.atg ...` runs `python -m splits make
--method atg ...` after a one-line note, and the old import path (`from splits.atg import
run_atg`) gives the new names with a DeprecationWarning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from episodes.util.moved_modules import moved_names

__all__ = ["build_parser", "main"]

__getattr__ = moved_names(
    __name__,
    {
        **dict.fromkeys(
            ("ATGConfig", "DEFAULT_RESTARTS", "INITS", "REDUCTIONS"), "splits.methods.atg.config"
        ),
        **dict.fromkeys(
            (
                "DTYPES",
                "PILOT_STEPS",
                "ATGFailure",
                "ATGFit",
                "ATGResult",
                "assign_splits",
                "atg_objective",
                "atg_split_file",
                "default_file_name",
                "descend",
                "fit_centroids",
                "initial_centroids",
                "normalise_rows",
                "reachable_check",
                "run_atg",
            ),
            "splits.methods.atg.algorithm",
        ),
    },
)


def build_parser() -> argparse.ArgumentParser:
    """`python -m splits make --method atg`'s parser (this command's old name runs it)."""
    from splits.make import build_parser as make_parser

    return make_parser("atg")


def main(argv: Sequence[str] | None = None) -> int:
    from splits.make import run_old_command

    return run_old_command("splits.atg", "atg", argv)


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
