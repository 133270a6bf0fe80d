"""Class splits (train / valid / test): published, random, semantic and ATG splits, one way to
make them (`python -m splits make --method NAME`), their analyses and the class embeddings ATG
reads (`python -m splits.embed`).

Sub-packages: `methods` (one folder per split method: its configuration, its algorithm and its
`splits make` adapter) and `embeddings` (the embedding job). `splits` stands on `episodes`,
`beam_pipelines` and `learners`; none of them imports it.

Modules that moved keep their old import path until version 0.3.0, with a DeprecationWarning
(`episodes.util.moved_modules`; importing this package installs that finder, as `episodes`
does).
"""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names
from episodes.util.moved_modules import install as _install_moved_modules
from episodes.util.release import VERSION

__version__ = VERSION

__all__ = [
    "PlannedSplit",
    "SplitInputs",
    "SplitMethod",
    "__version__",
    "get_method",
    "method_names",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        **dict.fromkeys(("PlannedSplit", "SplitInputs", "SplitMethod"), "splits.split_method"),
        **dict.fromkeys(("get_method", "method_names"), "splits.methods"),
    },
)

_install_moved_modules()
