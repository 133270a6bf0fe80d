"""The shape shared by the Meta-Dataset sources whose class splits come from a list.

A subclass only scans its raw layout (`scan`: the classes found, the work units, what was left
out); the class splits (published list, `--split-file` or seeded), the class-id order and the
plan are built here, the same way for every such source.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from beam_pipelines.sources._lib.image_file_units import (
    file_units,
    find_layout_root,
    list_class_folder,
    read_file_unit,
)
from beam_pipelines.sources._lib.published_splits import (
    DEFAULT_FRACTIONS,
    ListedSplitConfig,
    resolve_class_splits,
    split_provenance,
)
from beam_pipelines.sources.base import (
    ConversionPlan,
    LayoutError,
    RawItem,
    Source,
    WorkUnit,
    require_dir,
)
from episodes.storage.paths import input_location

__all__ = ["ClassFolderSource", "LayoutScan", "ListedSplitSource"]


@dataclass
class LayoutScan:
    """What a source found under its input folder."""

    root: Path  # the folder that holds the layout (the input or the folder it was extracted to)
    class_names: list[str]  # classes present in the data
    units: list[WorkUnit]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    provenance: dict[str, Any] = field(default_factory=dict)


class ListedSplitSource(Source):
    """A source whose splits are the published Meta-Dataset lists unless told otherwise."""

    config_class: ClassVar[type[ListedSplitConfig]] = ListedSplitConfig
    split_fractions: ClassVar[Sequence[float]] = DEFAULT_FRACTIONS
    meta_dataset_pixels = True
    remote_input = True  # listed and read through episodes.storage.paths

    @abc.abstractmethod
    def scan(self, input_path: Path) -> LayoutScan:
        """Validate the raw layout under `input_path` and list its classes and units."""

    def plan(self, input_path: Path) -> ConversionPlan:
        input_path = input_location(input_path)
        require_dir(input_path, f"a folder holding {self.layout}")
        scan = self.scan(input_path)
        if not scan.class_names:
            raise LayoutError(f"{scan.root}: no classes found; expected {self.layout}")
        splits = resolve_class_splits(
            self.name, scan.class_names, self.config, scan.root, self.split_fractions
        )
        provenance = {"input": str(input_path.resolve()), "layout_root": str(scan.root.resolve())}
        provenance.update(split_provenance(splits))
        provenance.update(scan.provenance)
        return ConversionPlan(
            source=self.name,
            dataset_name=self.name,
            classes=splits.classes(),
            units=scan.units,
            image_options=self.image_options(),
            provenance=provenance,
            skipped=list(scan.skipped),
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        return read_file_unit(unit)


class ClassFolderSource(ListedSplitSource):
    """A layout of one folder of image files per class under `<root>/<images_dir>/`, where the
    root is the input folder or the folder its archive extracts to (`wrappers`)."""

    images_dir: ClassVar[str] = "images"
    wrappers: ClassVar[tuple[str, ...]] = ()
    dataset_title: ClassVar[str] = ""

    def class_name_of(self, folder: Path) -> str | None:
        """The class a folder holds (None: not a class folder, reported as skipped)."""
        return folder.name

    def files_to_skip(self, folder: Path) -> tuple[str, ...]:
        """Names inside a class folder that are not images of the dataset (annotation files)."""
        return ()

    def scan(self, input_path: Path) -> LayoutScan:
        root = find_layout_root(input_path, self.images_dir, self.wrappers)
        if root is None or not (root / self.images_dir).is_dir():
            inside = f" or in {self.wrappers[0]}/" if self.wrappers else ""
            raise LayoutError(
                f"{input_path}: not a {self.dataset_title or self.name} layout: no "
                f"{self.images_dir}/ here{inside}; expected {self.layout}"
            )
        class_files, skipped = {}, []
        for folder in sorted((root / self.images_dir).iterdir()):
            class_name = self.class_name_of(folder) if folder.is_dir() else None
            if class_name is None:
                skipped.append((str(folder), f"not a class folder of {self.layout}"))
                continue
            entries, left_out = list_class_folder(folder, self.files_to_skip(folder))
            class_files[class_name] = entries
            skipped.extend(left_out)
        return LayoutScan(root, sorted(class_files), file_units(class_files), skipped)
