"""Commands that moved keep their old `python -m` name until the next version
(`episodes.util.release.REMOVAL_VERSION`), with a one-line note."""

from __future__ import annotations

import runpy
import sys

from episodes.util.release import REMOVAL_VERSION

__all__ = ["run_moved"]


def run_moved(old: str, new: str) -> None:
    """Run `python -m new` with this process's arguments after saying where `old` went."""
    print(
        f"note: python -m {old} is now python -m {new}; the old name goes in version "
        f"{REMOVAL_VERSION}",
        file=sys.stderr,
    )
    runpy.run_module(new, run_name="__main__", alter_sys=True)
