"""Old import paths of modules that moved (the restructuring of issue 11), kept for one release:
`import episodes.dataset_spec` gives `episodes.records.dataset_spec` itself (the same module
object, so classes and errors compare equal) with a DeprecationWarning naming the new path.

A finder on `sys.meta_path` answers only the names in `MOVED` and in the tables other packages
add with `install(table)` (`learners` keeps its own, issue 31); anything else imports as usual.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Mapping
from types import ModuleType

REMOVAL_VERSION = "0.3.0"  # the release in which the old paths go

# old dotted name -> new dotted name (git log --diff-filter=R: pure moves only)
MOVED: dict[str, str] = {
    **{
        f"episodes.{name}": f"episodes.hierarchy.{name}"
        for name in ("imagenet_dag", "imagenet_nodes", "wordnet")
    },
    **{
        f"episodes.{name}": f"episodes.images.{name}"
        for name in ("decoded_cache", "image_decode", "image_size_limit", "record_images")
    },
    "episodes.reference_resize": "episodes.images.reference_resize",
    **{
        f"episodes.{name}": f"episodes.records.{name}"
        for name in (
            "dataset_spec",
            "example_proto",
            "reader_errors",
            "record_index",
            "record_reader",
            "tfrecord_io",
            "storage_paths",
        )
    },
    **{
        f"episodes.{name}": f"episodes.util.{name}"
        for name in (
            "atomic_files",
            "cli_errors",
            "progress_lines",
            "shared_segments",
            "worker_processes",
        )
    },
}


# Every table the finder answers: MOVED, then those `install(table)` added.
_TABLES: list[Mapping[str, str]] = [MOVED]


def new_name(old: str) -> str | None:
    """The dotted name a moved module `old` has now (None when it did not move)."""
    for table in _TABLES:
        if old in table:
            return table[old]
    return None


def moved_note(old: str) -> str:
    return (
        f"{old} moved to {new_name(old)}: import it from there (the old path goes in version "
        f"{REMOVAL_VERSION})"
    )


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name as its new module, warning once per import of the old name."""

    def find_spec(self, fullname: str, path=None, target=None):
        if new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(moved_note(spec.name), DeprecationWarning, stacklevel=_caller_level())
        return importlib.import_module(new_name(spec.name))

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module ran when it was imported."""


def _caller_level() -> int:
    """The stack level of the first frame outside the import machinery and this file, so the
    warning names the line that imported the old path (DeprecationWarnings show by default
    only where that line is in `__main__`). `warnings.warn` skips importlib's frames itself
    when it counts levels, so they are not counted here."""
    frame, level = sys._getframe(1), 1  # create_module, stack level 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        if not internal and name != __file__:
            return level
        frame = frame.f_back
        if frame is not None and not (
            "importlib" in frame.f_code.co_filename and "_bootstrap" in frame.f_code.co_filename
        ):
            level += 1
    return level


def install(table: Mapping[str, str] | None = None) -> None:
    """Put the finder first on `sys.meta_path` (once), so that an old name means its new module
    even where a stale file of the old layout is still found (an editable install of an older
    checkout); `table` (old dotted name -> new) adds a package's own moved modules."""
    if table is not None and not any(known is table for known in _TABLES):
        _TABLES.append(table)
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
