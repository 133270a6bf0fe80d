"""The split methods of `python -m splits make`, one folder (or one module) each in this package.

`get_method("random", fractions=(0.7, 0.15, 0.15))` builds one, `method_names()` lists them. A
method is `splits/methods/<name>/`: its `method.py` defines a `splits.split_method.SplitMethod`
subclass decorated with `@register_method`, named as its folder, with its one configuration
dataclass as `Parameters`; the algorithm it adapts lives beside it (`algorithm.py`). A small
method may be the single module `splits/methods/<name>.py` instead. The registry imports only
the method asked for (a random split does not load ATG's torch).
"""

from __future__ import annotations

from typing import Any

from episodes.util.plugin_registry import PluginRegistry
from splits.split_method import SplitMethod

__all__ = ["METHODS", "get_method", "method_class", "method_names", "register_method"]

METHODS = PluginRegistry(__name__, "split method", ValueError, entry="method")
register_method = METHODS.register
method_names = METHODS.names


def method_class(name: str) -> type[SplitMethod]:
    """The method class registered as `name`; ValueError lists the known names."""
    return METHODS.get(name)


def get_method(name: str, parameters: Any = None, /, **values: Any) -> SplitMethod:
    """The method `name` with its parameters (a Parameters object, or its fields as keywords)."""
    return method_class(name)(parameters, **values)
