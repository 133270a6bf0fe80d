"""The split methods of `python -m splits make`, one folder (or one module) each in this package.

`get_method("random", fractions=(0.7, 0.15, 0.15))` builds one, `method_names()` lists them. A
method is `splits/methods/<name>/`: its `method.py` defines a `splits.split_method.SplitMethod`
subclass decorated with `@register_method`, named as its folder, with its one configuration
dataclass as `Parameters`; the algorithm it adapts lives beside it (`algorithm.py`). A small
method may be the single module `splits/methods/<name>.py` instead. The registry imports only
the method asked for (a random split does not load ATG's torch).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from splits.split_method import SplitMethod

__all__ = ["get_method", "method_class", "method_names", "register_method"]

_REGISTRY: dict[str, type[SplitMethod]] = {}


def _method_of(module: str) -> str:
    """The method a module belongs to: `splits.methods.atg.method` and `splits.methods.atg`
    belong to 'atg' (the name after this package's)."""
    inside = module.removeprefix(__name__ + ".")
    return inside.split(".")[0] if inside != module else module.rpartition(".")[2]


def register_method(cls: type[SplitMethod]) -> type[SplitMethod]:
    """Class decorator: make `cls` the method of its folder's (or module's) name."""
    folder = _method_of(cls.__module__)
    if cls.name != folder:
        raise TypeError(
            f"split method {cls.__name__} is named {cls.name!r} in module {cls.__module__!r} "
            f"(its name must be {folder!r})"
        )
    _REGISTRY[cls.name] = cls
    return cls


def method_names() -> list[str]:
    """Every method's name, sorted (the folders and modules of this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def method_class(name: str) -> type[SplitMethod]:
    """The method class registered as `name`; ValueError lists the known names."""
    names = method_names()
    if name not in names:
        raise ValueError(f"unknown split method {name!r}: expected one of {', '.join(names)}")
    module = importlib.import_module(f"{__name__}.{name}")
    if name not in _REGISTRY and hasattr(module, "__path__"):
        importlib.import_module(f"{__name__}.{name}.method")
    if name not in _REGISTRY:
        raise TypeError(f"{__name__}.{name} registers no split method")
    return _REGISTRY[name]


def get_method(name: str, parameters: Any = None, /, **values: Any) -> SplitMethod:
    """The method `name` with its parameters (a Parameters object, or its fields as keywords)."""
    return method_class(name)(parameters, **values)
