"""The sampling modes, one module each in this package (`episodes.sampling.sampling_mode`).

`get_mode("mixed", lam=0.5)` builds one, `mode_names()` lists them, `mode_from_json` rebuilds
one from `SamplingMode.to_json()`. The registry imports a mode's module only when it is asked
for (or listed for a command's flags).
"""

from __future__ import annotations

from typing import Any

from episodes.sampling.sampler_config import SamplerError
from episodes.sampling.sampling_mode import SamplingMode
from episodes.util.plugin_registry import PluginRegistry

__all__ = [
    "DEFAULT_MODE",
    "MODES",
    "get_mode",
    "manifest_fields",
    "mode_class",
    "mode_from_json",
    "mode_names",
    "register_mode",
]

DEFAULT_MODE = "meta_dataset"
MODES = PluginRegistry(__name__, "sampling mode", SamplerError)
register_mode = MODES.register
mode_names = MODES.names


def mode_class(name: str) -> type[SamplingMode]:
    """The mode registered as `name`; SamplerError lists the known names."""
    return MODES.get(name)


def get_mode(name: str = DEFAULT_MODE, options: Any = None, /, **values: Any) -> SamplingMode:
    """The mode `name` with its options (an Options object, or its fields as keywords)."""
    return mode_class(name)(options, **values)


def mode_from_json(raw: dict[str, Any] | None) -> SamplingMode:
    """The mode `SamplingMode.to_json()` describes (None: the default mode)."""
    if raw is None:
        return get_mode()
    values = dict(raw)
    return get_mode(values.pop("mode"), **values)


def manifest_fields(mode: SamplingMode) -> dict[str, Any]:
    """The keys every registered mode records in an episode-shards manifest, None but for
    those of `mode`: manifests of every mode have the same keys."""
    fields: dict[str, Any] = {}
    for name in mode_names():
        fields.update(dict.fromkeys(mode_class(name).recorded))
    fields.update(mode.record())
    return fields
