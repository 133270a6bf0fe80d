"""`--method atg`: splits of chosen difficulty from class embeddings (`algorithm`, ATG §4).

One split file per target divergence R (several R: a sweep), each named
atg_<measure>_R<R>_seed<seed>.json. Every R is checked (a short pilot, `reachable_check`)
before the first long run; an R that the full run does not reach is reported and not saved,
and the other R of the sweep still run. The flags are `ATGConfig`'s fields (`config`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from episodes.records.split_file import SplitFile
from episodes.records.split_sizes import split_counts
from episodes.util.cli_errors import UsageError
from splits.class_names import read_class_names
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.methods import register_method
from splits.methods.atg.algorithm import (
    atg_split_file,
    default_file_name,
    normalise_rows,
    reachable_check,
)
from splits.methods.atg.config import ATGConfig
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod

__all__ = ["ATGMethod"]


@register_method
class ATGMethod(SplitMethod):
    """Automatic Taskset Generation on `--embeddings` (checked against `--dataset` /
    `--class-names` when given); the dataset name defaults to the embeddings file's stem."""

    name = "atg"
    summary = "splits of chosen divergence R from class embeddings (Arnold & Sha)"
    Parameters = ATGConfig
    reads = ("dataset", "class_names", "embeddings")

    def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
        configs = self.parameters.runs(0 if inputs.seed is None else inputs.seed)
        if inputs.embeddings is None:
            raise UsageError("--method atg needs --embeddings NPZ (python -m splits.embed)")
        embeddings = EmbeddingsFile.load(inputs.embeddings)
        if inputs.spec is not None:
            embeddings.check_class_names(inputs.spec.class_names)
        if inputs.class_names is not None:
            embeddings.check_class_names(read_class_names(inputs.class_names))
        split_counts(embeddings.num_classes, configs[0].fractions)
        dataset = inputs.name(Path(inputs.embeddings).stem)
        unit = normalise_rows(embeddings.embeddings)
        return [
            PlannedSplit(
                dataset,
                default_file_name(config),
                build=partial(atg_split_file, embeddings, config, dataset, inputs.progress),
                preflight=partial(reachable_check, unit, config),
            )
            for config in configs
        ]

    def describe(self, split: SplitFile, seconds: float) -> str:
        p = split.parameters
        restarts = p["restarts"]
        shares = [x for x in restarts["same_split_share"] if x is not None]
        sizes = split.sizes()
        return (
            f"R={p['R']:g}: achieved {p['divergence']} {split.achieved_divergence:.5f}, "
            f"J={split.final_objective:.5f} (best of {restarts['count']} starts, J spread "
            f"{restarts['objective_spread']:.2g}, same split as the best for "
            f"{min(shares):.0%}-100% of classes), train/valid/test "
            f"{sizes['train']}/{sizes['valid']}/{sizes['test']}, {seconds:.1f}s"
        )
