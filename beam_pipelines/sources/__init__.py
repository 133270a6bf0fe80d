"""Registry of raw-layout sources: `--source NAME` -> Source class.

Every module of this package that defines a `Source` subclass with a `name` is registered,
so adding a converter is adding one module.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from beam_pipelines.sources.base import LayoutError, Source


def _discover() -> dict[str, type[Source]]:
    found: dict[str, type[Source]] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_") or module_info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, Source)
                and obj is not Source
                and obj.__module__ == module.__name__
                and not inspect.isabstract(obj)
                and getattr(obj, "name", None)
            ):
                if obj.name in found and found[obj.name] is not obj:
                    raise RuntimeError(f"two sources named {obj.name!r}")
                found[obj.name] = obj
    return found


SOURCES: dict[str, type[Source]] = _discover()


def get_source_class(name: str) -> type[Source]:
    """The Source class for `--source NAME`; `tfds:NAME` resolves to the `tfds` source."""
    key = "tfds" if name.startswith("tfds:") else name
    if key not in SOURCES:
        raise LayoutError(
            f"unknown --source {name!r}: expected one of {', '.join(sorted(SOURCES))}"
        )
    return SOURCES[key]


__all__ = ["SOURCES", "LayoutError", "Source", "get_source_class"]
