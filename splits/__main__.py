"""`python -m splits make ...` runs `python -m splits.make`, the one command that writes split
files by any method; `python -m splits` alone says how to call it."""

import sys

from episodes.util.cli_errors import run_main
from splits.make import main
from splits.methods import method_names

_given = sys.argv[1:]
if _given[:1] != ["make"]:
    print(
        f"usage: python -m splits make --method {{{','.join(method_names())}}} ... "
        "(see python -m splits make --help)",
        file=sys.stderr,
    )
    sys.exit(0 if _given[:1] in (["-h"], ["--help"]) else 2)
sys.exit(run_main(main, _given[1:]))
