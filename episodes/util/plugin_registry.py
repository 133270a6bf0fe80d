"""Plug-ins found as the modules of one package, each registering a class under its module's name
(the split methods of `splits.methods`, the sampling modes of `episodes.sampling.modes`).

Listing the names reads the package's folder and imports nothing; asking for one imports only
its module, so a plug-in's heavy imports (ATG's torch) are paid only when it is used. A plug-in
may be a folder (a sub-package) whose `entry` module registers the class.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

__all__ = ["PluginRegistry"]


class PluginRegistry:
    """The plug-ins of `package` (its modules and folders not starting with "_"): `kind` names
    them in messages, `error` is raised for an unknown name, and a folder plug-in registers in
    its module `entry`."""

    def __init__(
        self, package: str, kind: str, error: type[Exception] = ValueError, entry: str = "method"
    ):
        self.package, self.kind, self.error, self.entry = package, kind, error, entry
        self.classes: dict[str, type] = {}

    def owner(self, module: str) -> str:
        """The plug-in a module belongs to: `pkg.atg.method` and `pkg.atg` belong to 'atg'."""
        inside = module.removeprefix(self.package + ".")
        return inside.split(".")[0] if inside != module else module.rpartition(".")[2]

    def register(self, cls: type) -> type:
        """Class decorator: make `cls` (its `name` that of its module or folder) a plug-in."""
        owner = self.owner(cls.__module__)
        if cls.name != owner:  # type: ignore[attr-defined]
            raise TypeError(
                f"{self.kind} {cls.__name__} is named {cls.name!r} in module "  # type: ignore[attr-defined]
                f"{cls.__module__!r} (its name must be {owner!r})"
            )
        self.classes[owner] = cls
        return cls

    def names(self) -> list[str]:
        """Every plug-in's name, sorted (the package's modules and folders)."""
        path = sys.modules[self.package].__path__
        return sorted(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))

    def get(self, name: str) -> type:
        """The class registered as `name`; `error` lists the known names."""
        names = self.names()
        if name not in names:
            raise self.error(f"unknown {self.kind} {name!r}: expected one of {', '.join(names)}")
        module = importlib.import_module(f"{self.package}.{name}")
        if name not in self.classes and hasattr(module, "__path__"):
            importlib.import_module(f"{self.package}.{name}.{self.entry}")
        if name not in self.classes:
            raise TypeError(f"{self.package}.{name} registers no {self.kind}")
        return self.classes[name]
