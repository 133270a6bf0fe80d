"""What a converter is: a map from one raw layout to (class, image) items, plus a class plan.

A source only knows its layout. `plan()` runs on the launching machine before the pipeline
starts: it validates the layout (clear error naming the path and what was expected), fixes the
class list in id order (train < valid < test), the hierarchy and the work units. `read_unit()`
runs inside Beam workers and yields `RawItem`s. Decoding, encoding, sharding per class, index
files, the spec and the report are the shared writer's job (beam_pipelines/conversion/writer.py).
"""

from __future__ import annotations

import abc
import argparse
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from beam_pipelines.conversion.image_codec import ImageOptions
from beam_pipelines.conversion.pixel_conventions import (
    META_DATASET,
    REFERENCE_JPEG_QUALITY,
    pixel_convention,
)
from beam_pipelines.sources._lib.raw_downloads import RawDownload
from beam_pipelines.sources._lib.source_config import SourceConfig
from episodes.records.dataset_spec import DagHierarchy, Split
from episodes.records.split_sizes import split_by_fractions as cut_by_fractions
from episodes.util.cli_errors import UserError

__all__ = [
    "ClassInfo",
    "ConversionPlan",
    "LayoutError",
    "RawItem",
    "require_dir",
    "require_input",
    "Source",
    "split_by_fractions",
    "WorkUnit",
]


class LayoutError(UserError, ValueError):
    """The input folder does not hold the raw layout the source expects."""


@dataclass(frozen=True)
class ClassInfo:
    """One class of the converted dataset; its id is its position in the plan."""

    name: str
    split: Split | None = None
    superclass: str | None = None


@dataclass(frozen=True)
class WorkUnit:
    """An independently readable piece of raw data (a folder, an archive member list, a file).

    `payload` is source-specific and must be picklable; `expected_items` feeds progress/ETA.
    `whole_class`: the class of every item of this unit, when no other unit holds items of it;
    the writer then writes that class file while reading the unit (no spill, no shuffle)."""

    key: str
    payload: Any
    expected_items: int = 0
    whole_class: str | None = None


@dataclass(frozen=True)
class RawItem:
    """One raw example: encoded bytes or a uint8 pixel array, plus where it came from.

    `key` orders records inside a class (stable across runs and worker counts); `path` names
    the origin in reports; `error` marks an input the source could not even read."""

    class_name: str
    key: str
    path: str
    data: bytes | None = None
    array: np.ndarray | None = None
    crop_box: tuple[int, int, int, int] | None = None
    error: str | None = None


@dataclass
class ConversionPlan:
    """Everything fixed before the pipeline starts."""

    source: str
    dataset_name: str
    classes: list[ClassInfo]
    units: list[WorkUnit]
    image_options: ImageOptions
    dag: DagHierarchy | None = None
    superclass_names: list[str] | None = None  # bi-level hierarchy, in superclass id order
    provenance: dict[str, Any] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason) found in planning

    def __post_init__(self):
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise LayoutError(f"plan for {self.dataset_name}: duplicate class names {dupes[:5]}")
        order = {Split.TRAIN: 0, Split.VALID: 1, Split.TEST: 2, None: 3}
        ranks = [order[c.split] for c in self.classes]
        if ranks != sorted(ranks):
            raise ValueError(
                f"plan for {self.dataset_name}: class ids must be contiguous with train < valid < test"
            )
        whole = [u.whole_class for u in self.units if u.whole_class is not None]
        unknown = sorted(set(whole) - set(names))
        repeated = (
            sorted({c for c in whole if whole.count(c) > 1}) if len(set(whole)) < len(whole) else []
        )
        if unknown or repeated:
            raise ValueError(
                f"plan for {self.dataset_name}: whole-class units must each hold a planned class "
                f"no other unit holds (unknown {unknown[:5]}, in several units {repeated[:5]})"
            )

    @property
    def expected_items(self) -> int:
        return sum(u.expected_items for u in self.units)

    def class_index(self) -> dict[str, int]:
        return {c.name: i for i, c in enumerate(self.classes)}


class Source(abc.ABC):
    """A raw dataset layout. Subclasses set `name`, `layout` (and `config_class` for options of
    their own), and implement plan/read_unit; options are read from `self.config`."""

    name: ClassVar[str]
    layout: ClassVar[str]  # one line: the raw files a user must provide
    default_image_format: ClassVar[str] = "jpeg"
    default_mode: ClassVar[str] = "RGB"
    # A Meta-Dataset source: the reference converter's pixels by default
    # (beam_pipelines.conversion.pixel_conventions); `reference_inverts`: it stores them inverted.
    meta_dataset_pixels: ClassVar[bool] = False
    reference_inverts: ClassVar[bool] = False
    # True where plan/read_unit also work on object storage (episodes.storage.paths)
    remote_input: ClassVar[bool] = False
    # Sub-folders of a `convert --all` root that may hold this source's raw data, first found
    # wins; () means the source's own name, None a source that reads no folder (tfds).
    raw_folders: ClassVar[tuple[str, ...] | None] = ()
    # The raw files `python -m beam_pipelines.download` fetches (or says to obtain by hand) into
    # the folder `plan()` reads (beam_pipelines.sources._lib.raw_downloads); () fetches nothing.
    downloads: ClassVar[tuple[RawDownload, ...]] = ()

    # The typed options of this source (beam_pipelines.sources._lib.source_config), its flags.
    config_class: ClassVar[type[SourceConfig]] = SourceConfig

    def __init__(self, config: SourceConfig | None = None, **options: Any):
        """`config` (default: the config class's defaults), with `options` replacing fields,
        e.g. `DTDSource(random_split=True)`; a bad value raises ConfigError."""
        if config is None:
            config = self.config_class(**options)
        elif not isinstance(config, self.config_class):
            raise TypeError(
                f"{type(self).__name__} takes a {self.config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        elif options:
            config = dataclasses.replace(config, **options)
        self.config = config

    @classmethod
    def raw_folder_names(cls) -> tuple[str, ...]:
        """The sub-folder names `convert --all` looks for, first found wins (none: tfds)."""
        if cls.raw_folders is None:
            return ()
        return cls.raw_folders or (cls.name,)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Source:
        """The source configured by parsed command-line flags (`add_config_arguments`)."""
        return cls(cls.config_class.from_args(args))

    def image_options(self) -> ImageOptions:
        config = self.config
        convention = pixel_convention(config.pixel_convention, self.meta_dataset_pixels)
        reference = convention == META_DATASET
        return ImageOptions(
            image_format=config.image_format
            or ("jpeg" if reference else self.default_image_format),
            mode=config.image_mode or ("RGB" if reference else self.default_mode),
            jpeg_quality=config.jpeg_quality or (REFERENCE_JPEG_QUALITY if reference else 95),
            resize=config.resize,
            convention=convention,
            invert=reference and self.reference_inverts,
        )

    @abc.abstractmethod
    def plan(self, input_path: Path) -> ConversionPlan:
        """Validate the layout under `input_path` and fix classes, splits and work units."""

    @abc.abstractmethod
    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        """Yield the raw items of one unit (runs in Beam workers)."""


def require_input(path: Path, what: str) -> Path:
    """The input must exist (a folder or an archive file); `what` says what was expected."""
    if not path.exists():
        raise LayoutError(f"{path}: not found; expected {what}")
    return path


def require_dir(path: Path, what: str) -> Path:
    require_input(path, what)
    if not path.is_dir():
        raise LayoutError(f"{path}: not a folder; expected {what}")
    return path


def split_by_fractions(
    names: Sequence[str], fractions: Sequence[float], seed: int
) -> dict[str, Split]:
    """Seeded split of class names by fractions (train, valid, test), e.g. 70/15/15: the one
    rule of `episodes.records.split_sizes` (also `splits.methods.random`), no asked-for split left empty."""
    lists = cut_by_fractions(names, fractions, seed)
    splits = (Split.TRAIN, Split.VALID, Split.TEST)
    return {name: split for split, members in zip(splits, lists) for name in members}
