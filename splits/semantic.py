"""Moved: semantic splits are the split method `splits.methods.semantic` (`algorithm`).

Until version 0.3.0 the old command `python -m splits.semantic superclass|dag ...` runs `python
-m splits make --method semantic --kind superclass|dag ...` after a one-line note, and the old
import path (`from splits.semantic import dag_split`) gives the new names with a
DeprecationWarning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from episodes.util.moved_modules import moved_names

__all__ = ["build_parser", "main"]

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        (
            "FC100_SOURCE",
            "FC100_SUPERCLASSES",
            "ILSVRC_ROOTS",
            "OMNIGLOT_COUNTS",
            "HierarchyError",
            "dag_split",
            "descendants",
            "leaves_of",
            "spec_parents",
            "spec_superclasses",
            "superclass_split",
        ),
        "splits.methods.semantic.algorithm",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """`python -m splits make --method semantic`'s parser (this command's old name runs it)."""
    from splits.make import build_parser as make_parser

    return make_parser("semantic")


def main(argv: Sequence[str] | None = None) -> int:
    """The old `python -m splits.semantic superclass|dag ...`: the kind becomes `--kind`."""
    from splits.make import run_old_command

    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] in (["superclass"], ["dag"]):
        given = ["--kind", *given]
    return run_old_command("splits.semantic", "semantic", given)


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
