"""The split methods of `python -m splits make`, one module each in this package.

`get_method("random", fractions=(0.7, 0.15, 0.15))` builds one, `method_names()` lists them. A
method module defines a `splits.split_method.SplitMethod` subclass decorated with
`@register_method`, named as its module: the registry imports only the method asked for (a
random split does not load ATG's torch).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from splits.split_method import SplitMethod

_REGISTRY: dict[str, type[SplitMethod]] = {}


def register_method(cls: type[SplitMethod]) -> type[SplitMethod]:
    """Class decorator: make `cls` the method of its module's name."""
    module = cls.__module__.rpartition(".")[2]
    if cls.name != module:
        raise TypeError(f"split method {cls.__name__} is named {cls.name!r} in module {module!r}")
    _REGISTRY[cls.name] = cls
    return cls


def method_names() -> list[str]:
    """Every method's name, sorted (the modules of this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def method_class(name: str) -> type[SplitMethod]:
    """The method class registered as `name`; ValueError lists the known names."""
    names = method_names()
    if name not in names:
        raise ValueError(f"unknown split method {name!r}: expected one of {', '.join(names)}")
    importlib.import_module(f"{__name__}.{name}")
    if name not in _REGISTRY:
        raise TypeError(f"module {__name__}.{name} registers no split method")
    return _REGISTRY[name]


def get_method(name: str, parameters: Any = None, /, **values: Any) -> SplitMethod:
    """The method `name` with its parameters (a Parameters object, or its fields as keywords)."""
    return method_class(name)(parameters, **values)
