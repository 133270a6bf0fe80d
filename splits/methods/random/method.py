"""`--method random`: seeded random class splits by fractions (`algorithm.random_split`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from episodes.records.split_file import SplitFile
from episodes.records.split_sizes import DEFAULT_FRACTIONS, validate_fractions
from episodes.util.config_flags import config_field
from splits.methods import register_method
from splits.methods.random.algorithm import random_split
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod

__all__ = ["RandomMethod", "RandomParameters"]


@dataclass(frozen=True)
class RandomParameters:
    """Fractions of the classes per split (the shared rule of `episodes.records.split_sizes`)."""

    fractions: tuple[float, float, float] = config_field(
        DEFAULT_FRACTIONS,
        help="class fractions per split; valid and test get floor(f N) classes, train the rest",
        metavar=("TRAIN", "VALID", "TEST"),
    )

    def __post_init__(self) -> None:
        validate_fractions(self.fractions)


@register_method
class RandomMethod(SplitMethod):
    """The classes shuffled by `--seed` (default 0) and cut by `--fractions`."""

    name = "random"
    summary = "seeded random split by fractions (the ATG paper's R = 0)"
    Parameters = RandomParameters
    reads = ("dataset", "class_names")

    def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
        classes = inputs.classes()
        fallback = classes.dataset or Path(inputs.class_names or "dataset").stem
        seed = 0 if inputs.seed is None else inputs.seed
        dataset = inputs.name(fallback)
        split = random_split(classes.names, self.parameters.fractions, seed, dataset)
        return [PlannedSplit(dataset, f"random_seed{seed}.json", lambda: split)]

    def describe(self, split: SplitFile, seconds: float) -> str:
        sizes = split.sizes()
        return (
            f"random split seed {split.parameters['seed']}: "
            f"{sizes['train']}/{sizes['valid']}/{sizes['test']}"
        )
