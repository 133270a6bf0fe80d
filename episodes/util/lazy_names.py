"""A package's public names, loaded from their modules on first use (PEP 562).

`__getattr__, __dir__ = lazy_names(__name__, {"EpisodeReader": "episodes.reading.reader"})` in a
package's `__init__` makes `from package import EpisodeReader` work without the package
importing every module up front: importing one submodule stays light, and two subpackages that
name each other's modules do not import each other when either is imported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: each name of `homes` (name -> the module that
    defines it) is imported from its module when first asked for, then kept in the package."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
