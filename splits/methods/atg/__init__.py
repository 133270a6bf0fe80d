"""`--method atg`: Automatic Taskset Generation (Arnold & Sha, §4): `config` (ATGConfig, its one
set of settings and flags), `divergences` (D), `algorithm` (the fit and the split file) and
`method` (the `splits make` method)."""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = ["ATGConfig", "ATGFailure", "ATGMethod", "atg_split_file", "run_atg"]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "ATGConfig": "splits.methods.atg.config",
        "ATGFailure": "splits.methods.atg.algorithm",
        "ATGMethod": "splits.methods.atg.method",
        "atg_split_file": "splits.methods.atg.algorithm",
        "run_atg": "splits.methods.atg.algorithm",
    },
)
