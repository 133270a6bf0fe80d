"""Old import paths of modules and names that moved, kept until `REMOVAL_VERSION` (0.3.0):
`import episodes.dataset_spec` gives `episodes.records.dataset_spec` itself (the same module
object, so classes and errors compare equal) with a DeprecationWarning naming the new path.

A finder on `sys.meta_path` answers only the names in `MOVED` and in the tables other packages
add with `install(table)` (`learners` keeps its own, issue 31); anything else imports as usual.
It is the one import-time side effect of the toolkit's packages, and a documented one: Python
resolves `import episodes.dataset_spec` only through `sys.meta_path` (or a file at that path),
so the alternative is a stub file per old name, which would fill again the package roots the
moves emptied. The packages that hold old names (`episodes`, `splits`, `learners`) call `install()` when
they are imported, once per process; the finder and its table go in REMOVAL_VERSION.

A module that stays but whose names moved elsewhere (a command module that used to hold library
code) forwards them with `moved_names`, the same warning for one name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from episodes.util.release import REMOVAL_VERSION

__all__ = ["MOVED", "MovedModuleFinder", "install", "moved_names", "moved_note", "new_name"]


def _moved_into(package: str, old_package: str, names: tuple[str, ...]) -> dict[str, str]:
    return {f"{old_package}.{name}": f"{package}.{name}" for name in names}


# old dotted name -> new dotted name (git log --diff-filter=R: pure moves only)
MOVED: dict[str, str] = {
    # issue 11: episodes' root into records / images / hierarchy / util
    **_moved_into("episodes.hierarchy", "episodes", ("imagenet_dag", "imagenet_nodes", "wordnet")),
    **_moved_into(
        "episodes.images",
        "episodes",
        ("decoded_cache", "image_decode", "image_size_limit", "record_images", "reference_resize"),
    ),
    **_moved_into(
        "episodes.records",
        "episodes",
        (
            "dataset_spec",
            "example_proto",
            "reader_errors",
            "record_index",
            "record_reader",
            "tfrecord_io",
        ),
    ),
    "episodes.storage_paths": "episodes.storage.paths",  # issue 11, then issue 35 (below)
    **_moved_into(
        "episodes.util",
        "episodes",
        ("atomic_files", "cli_errors", "progress_lines", "shared_segments", "worker_processes"),
    ),
    # issue 35: the rest of episodes' root into sampling / reading / adapters (version 0.2.0)
    **_moved_into(
        "episodes.sampling",
        "episodes",
        (
            "episode",
            "episode_cli",
            "episode_stats",
            "fixml_records",
            "sampler",
            "sampler_config",
            "sampler_factory",
            "sampler_formulas",
        ),
    ),
    **_moved_into(
        "episodes.reading",
        "episodes",
        ("decode_processes", "description_prefetch", "episode_grid", "episode_shards", "reader"),
    ),
    **_moved_into("episodes.adapters", "episodes", ("tf_adapter", "torch_adapter")),
    # the glyph generator writes raw data for the converters (`episodes/glyph_dataset.py` keeps
    # the old command and package names)
    **_moved_into(
        "beam_pipelines.glyph_dataset",
        "episodes.glyph_dataset",
        (
            "alphabet_plan",
            "cli",
            "config",
            "drawer_style",
            "drawing",
            "fonts",
            "generation",
            "glyph_selection",
            "manifest",
            "output_check",
            "output_writers",
            "script_groups",
            "summary",
        ),
    ),
    # what beam_pipelines' sources share with splits goes down to episodes (no package circle)
    "splits.split_sizes": "episodes.records.split_sizes",
    # a split method's algorithm lives beside it (`splits.atg`, `splits.random` and
    # `splits.semantic` stay as files: they are also old command names)
    "splits.divergences": "splits.methods.atg.divergences",
    # issue 35: beam_pipelines' helpers by role (conversion/, runners/, downloads/, sources/_lib/)
    # and object storage out of the records (episodes/storage/); `beam_pipelines.conversion` is
    # the conversion package now, its old module's names forwarded by the package (version 0.2.0)
    "beam_pipelines.conversion_progress": "beam_pipelines.conversion.progress",
    "beam_pipelines.convert_options": "beam_pipelines.conversion.options",
    "beam_pipelines.whole_class_file": "beam_pipelines.conversion.whole_class_file",
    "beam_pipelines.writer": "beam_pipelines.conversion.writer",
    "beam_pipelines.frame_spill": "beam_pipelines.conversion.frame_spill",
    "beam_pipelines.image_codec": "beam_pipelines.conversion.image_codec",
    "beam_pipelines.jpeg_markers": "beam_pipelines.conversion.jpeg_markers",
    "beam_pipelines.pixel_conventions": "beam_pipelines.conversion.pixel_conventions",
    "beam_pipelines.runner_options": "beam_pipelines.runners.options",
    "beam_pipelines.dask_runner": "beam_pipelines.runners.dask_runner",
    "beam_pipelines.local_worker": "beam_pipelines.runners.local_worker",
    "beam_pipelines.portable_preflight": "beam_pipelines.runners.portable_preflight",
    "beam_pipelines.output_lock": "beam_pipelines.runners.output_lock",
    "beam_pipelines.job_faults": "beam_pipelines.runners.job_faults",
    "beam_pipelines.interrupt_exit": "beam_pipelines.runners.interrupt_exit",
    "beam_pipelines.beam_import_noise": "beam_pipelines.runners.beam_import_noise",
    "beam_pipelines.download_registry": "beam_pipelines.downloads.registry",
    "beam_pipelines.http_fetch": "beam_pipelines.downloads.http_fetch",
    "beam_pipelines.sources.archive_members": "beam_pipelines.sources._lib.archive_members",
    "beam_pipelines.sources.folder_entries": "beam_pipelines.sources._lib.folder_entries",
    "beam_pipelines.sources.fraction_split": "beam_pipelines.sources._lib.fraction_split",
    "beam_pipelines.sources.image_file_units": "beam_pipelines.sources._lib.image_file_units",
    "beam_pipelines.sources.input_files": "beam_pipelines.sources._lib.input_files",
    "beam_pipelines.sources.listed_split_source": "beam_pipelines.sources._lib.listed_split_source",
    "beam_pipelines.sources.published_splits": "beam_pipelines.sources._lib.published_splits",
    "beam_pipelines.sources.raw_downloads": "beam_pipelines.sources._lib.raw_downloads",
    "beam_pipelines.sources.source_config": "beam_pipelines.sources._lib.source_config",
    "episodes.records.storage_paths": "episodes.storage.paths",
    "episodes.records.storage_access": "episodes.storage.access",
    "episodes.records.object_uploads": "episodes.storage.uploads",
    "episodes.records.parallel_reads": "episodes.storage.parallel_reads",
    "episodes.records.remote_records": "episodes.storage.remote_records",
}


# Every table the finder answers: MOVED, then those `install(table)` added.
_TABLES: list[Mapping[str, str]] = [MOVED]


def new_name(old: str) -> str | None:
    """The dotted name a moved module `old` has now (None when it did not move)."""
    for table in _TABLES:
        if old in table:
            return table[old]
    return None


def moved_note(old: str, new: str | None = None) -> str:
    """The warning for a moved module or name `old` (now `new`, by default its new name in the
    tables)."""
    new = new_name(old) if new is None else new
    return (
        f"{old} moved to {new}: import it from there (the old path goes in version "
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
    """Put the finder first on `sys.meta_path` (once): an old name then always means its new
    module, even where a stale file of the old layout is still found on the path (an install
    upgraded in place, an editable install of an older checkout). `table` (old dotted name ->
    new) adds a package's own moved modules to those it answers."""
    if table is not None and not any(known is table for known in _TABLES):
        _TABLES.append(table)
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())


def moved_names(
    module: str, names: Mapping[str, str], *, stacklevel: int = 2
) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `module` that gives each old name of `names` from where
    it went, with a DeprecationWarning naming both: a value "pkg.mod" is the module the name
    moved to, "pkg.mod:NewName" the module and new name of a renamed one. `stacklevel` counts
    from the caller of the returned function (one more when another `__getattr__` calls it)."""

    def __getattr__(name: str) -> Any:
        target = names.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_module, _, new_name = target.partition(":")
        new_name = new_name or name
        note = moved_note(f"{module}.{name}", f"{new_module}.{new_name}")
        warnings.warn(note, DeprecationWarning, stacklevel=stacklevel)
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__
