"""`--method atg`: Automatic Taskset Generation (Arnold & Sha, §4): `config` (ATGConfig, its one
set of settings and flags), `divergences` (D), `algorithm` (the fit and the split file) and
`method` (the `splits make` method)."""

from __future__ import annotations

from typing import Any

from episodes.util.lazy_names import lazy_names
from episodes.util.moved_modules import moved_names

__all__ = ["ATGConfig", "ATGFailure", "ATGMethod", "atg_split_file", "run_atg"]

_public, __dir__ = lazy_names(
    __name__,
    {
        "ATGConfig": "splits.methods.atg.config",
        "ATGFailure": "splits.methods.atg.algorithm",
        "ATGMethod": "splits.methods.atg.method",
        "atg_split_file": "splits.methods.atg.algorithm",
        "run_atg": "splits.methods.atg.algorithm",
    },
)
# ATGParameters (the method's flags) and ATGConfig (the algorithm's) were one set declared twice.
_renamed = moved_names(
    __name__, {"ATGParameters": "splits.methods.atg.config:ATGConfig"}, stacklevel=3
)


def __getattr__(name: str) -> Any:
    return _renamed(name) if name == "ATGParameters" else _public(name)
