"""Episodes: dataset specs, record index and reader, the Meta-Dataset sampler, adapters.

The public API (README: "Reading episodes"):

    from episodes import EpisodeReader, SamplerConfig, load_spec

plus the `python -m episodes.*` commands. The names load on first use, so importing a single
submodule stays light. Modules that moved keep their old import path for one release, with a
DeprecationWarning (`episodes.util.moved_modules`).
"""

from __future__ import annotations

import importlib
from typing import Any

from episodes.util.moved_modules import install as _install_moved_modules
from episodes.util.release import VERSION as __version__

_PUBLIC = {
    "EpisodeReader": "episodes.reader",
    "SamplerConfig": "episodes.sampler_config",
    "load_spec": "episodes.records.dataset_spec",
    "DatasetSpec": "episodes.records.dataset_spec",
    "Split": "episodes.records.dataset_spec",
    "Episode": "episodes.episode",
    "EpisodeDescription": "episodes.episode",
    "EpisodeSampler": "episodes.sampler",
    "ReaderError": "episodes.records.reader_errors",
}
__all__ = sorted(_PUBLIC)

_install_moved_modules()


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'episodes' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
