"""One interface for every way of making a split file (`python -m splits make --method NAME`).

A method is a small class (the models: learn2learn's `get_tasksets(name)`, scikit-learn's
estimators): a `name`, a frozen `Parameters` dataclass whose fields are the method's flags
(`episodes.util.config_flags.config_field`) and which validates itself, and `plan(inputs)`, which reads and
checks the inputs every method shares (`SplitInputs`) and returns the split files it will write
(`PlannedSplit`), all before any long work. `make(inputs)` runs the plan: one SplitFile, or a
list when the plan holds several (an ATG sweep). Methods register by name in `splits.methods`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from episodes.records.dataset_spec import DatasetSpec, SpecError, load_spec
from episodes.records.split_file import SplitFile
from episodes.util.cli_errors import UsageError
from splits.class_names import ClassList, read_class_list

__all__ = ["PlannedSplit", "SplitInputs", "SplitMethod"]


@dataclass(frozen=True)
class SplitInputs:
    """What every method reads: `--dataset` (a converted dataset folder or its
    dataset_spec.json), `--class-names` (a name list), `--embeddings` (ATG's npz),
    `--dataset-name`, `--seed`; each method uses the ones it needs."""

    dataset: str | os.PathLike[str] | None = None
    class_names: str | os.PathLike[str] | None = None
    embeddings: str | os.PathLike[str] | None = None
    dataset_name: str | None = None
    seed: int | None = None
    progress: bool = False

    @cached_property
    def spec(self) -> DatasetSpec | None:
        """The `--dataset` spec (None without `--dataset`); SpecError names the path."""
        if self.dataset is None:
            return None
        try:
            return load_spec(self.dataset)
        except SpecError as err:
            raise SpecError(f"--dataset {err}") from None

    def classes(self) -> ClassList:
        """The classes to split, from `--dataset` or `--class-names` (exactly one of them)."""
        if self.dataset is not None and self.class_names is not None:
            raise UsageError("give --dataset DIR or --class-names FILE, not both")
        if self.spec is not None:
            return ClassList(list(self.spec.class_names), self.spec.name)
        if self.class_names is not None:
            return read_class_list(self.class_names)
        raise UsageError(
            "no classes to split: give --dataset DIR (a converted dataset) or --class-names FILE"
        )

    def name(self, fallback: str) -> str:
        """The dataset name a split file records: `--dataset-name`, else the `--dataset` spec's
        name, else the method's `fallback` (e.g. the input file's stem)."""
        if self.dataset_name:
            return self.dataset_name
        if self.spec is not None:
            return self.spec.name
        return fallback


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class PlannedSplit:
    """One split file a method will write: the default file name (in `splits/<dataset>/`),
    the checks that take a while (run for every planned file before any is made), and how to
    make it."""

    dataset: str
    file_name: str
    build: Callable[[], SplitFile]
    preflight: Callable[[], None] = _nothing


class SplitMethod:
    """A way of partitioning a dataset's classes into train / valid / test (module docstring).

    Subclasses set `name`, `summary`, `Parameters` and `reads` (the SplitInputs fields among
    dataset, class_names and embeddings that they use), and define `plan`.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    Parameters: ClassVar[type]
    reads: ClassVar[tuple[str, ...]] = ()

    def __init__(self, parameters: Any = None, /, **values: Any):
        if parameters is not None and values:
            raise TypeError("give a Parameters object or keyword values, not both")
        if parameters is None:
            parameters = self.Parameters(**values)
        if not isinstance(parameters, self.Parameters):
            raise TypeError(
                f"{self.name}: parameters must be {self.Parameters.__name__}, "
                f"got {type(parameters).__name__}"
            )
        self.parameters = parameters

    def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
        """Read and check the inputs; the split files this method will write."""
        raise NotImplementedError

    def make(self, inputs: SplitInputs) -> SplitFile | list[SplitFile]:
        """Make the planned split files (not saved): one, or a list for several."""
        planned = self.plan(inputs)
        for item in planned:
            item.preflight()
        splits = [item.build() for item in planned]
        return splits[0] if len(splits) == 1 else splits

    def describe(self, split: SplitFile, seconds: float) -> str:
        """The line the command prints for a written split (before ' -> PATH')."""
        sizes = split.sizes()
        return f"{self.name} split: {sizes['train']}/{sizes['valid']}/{sizes['test']}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.parameters!r})"
