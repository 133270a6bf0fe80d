"""The sampling modes, one module each in this package (`episodes.sampling.sampling_mode`).

`get_mode("mixed", lam=0.5)` builds one, `mode_names()` lists them, `mode_from_json` rebuilds
one from `SamplingMode.to_json()`. The registry imports a mode's module only when it is asked
for (or listed for a command's flags).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from episodes.sampling.sampler_config import SamplerError
from episodes.sampling.sampling_mode import SamplingMode

__all__ = [
    "DEFAULT_MODE",
    "get_mode",
    "manifest_fields",
    "mode_class",
    "mode_from_json",
    "mode_names",
    "register_mode",
]

DEFAULT_MODE = "meta_dataset"
_REGISTRY: dict[str, type[SamplingMode]] = {}


def register_mode(cls: type[SamplingMode]) -> type[SamplingMode]:
    """Class decorator: make `cls` the sampling mode of its module's name."""
    module = cls.__module__.rpartition(".")[2]
    if cls.name != module:
        raise TypeError(f"sampling mode {cls.__name__} is named {cls.name!r} in module {module!r}")
    _REGISTRY[cls.name] = cls
    return cls


def mode_names() -> list[str]:
    """Every mode's name, sorted (the modules of this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def mode_class(name: str) -> type[SamplingMode]:
    """The mode registered as `name`; SamplerError lists the known names."""
    names = mode_names()
    if name not in names:
        raise SamplerError(f"unknown sampling mode {name!r}: expected one of {', '.join(names)}")
    importlib.import_module(f"{__name__}.{name}")
    if name not in _REGISTRY:
        raise TypeError(f"module {__name__}.{name} registers no sampling mode")
    return _REGISTRY[name]


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
