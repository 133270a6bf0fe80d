"""Old import paths of modules that moved (the restructuring of issue 11), kept for one release:
`import episodes.dataset_spec` gives `episodes.records.dataset_spec` itself (the same module
object, so classes and errors compare equal) with a DeprecationWarning naming the new path.

A finder on `sys.meta_path` answers only the names in `MOVED`; anything else imports as usual.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

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


def moved_note(old: str) -> str:
    return (
        f"{old} moved to {MOVED[old]}: import it from there (the old path goes in the next release)"
    )


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name as its new module, warning once per import of the old name."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(moved_note(spec.name), DeprecationWarning, stacklevel=_caller_level())
        return importlib.import_module(MOVED[spec.name])

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


def install() -> None:
    """Put the finder on `sys.meta_path` (once)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
