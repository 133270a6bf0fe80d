"""`--method atg`: splits of chosen difficulty from class embeddings (`splits.atg`, ATG §4).

One split file per target divergence R (several R: a sweep), each named
atg_<measure>_R<R>_seed<seed>.json. Every R is checked (a short pilot, `reachable_check`)
before the first long run; an R that the full run does not reach is reported and not saved,
and the other R of the sweep still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from episodes.records.split_file import SplitFile
from splits.atg import (
    DEFAULT_RESTARTS,
    DTYPES,
    INITS,
    REDUCTIONS,
    ATGConfig,
    atg_split_file,
    default_file_name,
    normalise_rows,
    reachable_check,
)
from splits.class_names import read_class_names
from splits.divergences import DIVERGENCES
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.methods import register_method
from splits.parameter_flags import parameter
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod
from splits.split_sizes import split_counts


@dataclass(frozen=True)
class ATGParameters:
    """ATG's hyper-parameters (`splits.atg.ATGConfig`, defaults from App. A.6) and the target
    divergences R, one split file each; the seed is the shared `--seed`."""

    target_divergences: tuple[float, ...] = parameter(
        flag="--divergence",
        metavar="R",
        renamed_from=("--sweep",),
        help="target divergence R >= 0; several R: one split file per R (a sweep)",
    )
    measure: str = parameter(ATGConfig.divergence, choices=DIVERGENCES, help="divergence D")
    lam: float = parameter(
        ATGConfig.lam,
        flag="--lambda",
        help="penalty weight; with the mean likelihood the paper's summed objective's weight is "
        "M * lambda",
    )
    iterations: int = parameter(ATGConfig.iterations, help="SGD steps per start")
    lr: float = parameter(ATGConfig.lr, help="SGD learning rate")
    momentum: float = parameter(ATGConfig.momentum, help="SGD momentum")
    restarts: int = parameter(
        DEFAULT_RESTARTS, help="starts per R; the lowest J that reaches R is kept"
    )
    init: str = parameter(
        ATGConfig.init,
        choices=INITS,
        help="centroid starts: centre (mean embedding +- 0.01) or reference (N(0, I), as the "
        "authors' example code)",
    )
    tolerance: float = parameter(
        ATGConfig.tolerance, help="largest relative miss of R that is saved"
    )
    fractions: tuple[float, float, float] = parameter(
        ATGConfig.fractions,
        metavar=("TRAIN", "VALID", "TEST"),
        help="class fractions per split; valid and test get floor(f N) classes, train the rest",
    )
    nll_reduction: str = parameter(
        ATGConfig.nll_reduction,
        choices=REDUCTIONS,
        help="mean (lambda_eff = M lambda) or sum (the paper's formula) of the likelihood",
    )
    damping: float = parameter(
        ATGConfig.damping, help="diagonal damping of the Wasserstein-2 Gaussians"
    )
    threads: int = parameter(ATGConfig.threads, help="torch CPU threads")
    dtype: str = parameter(
        ATGConfig.dtype,
        choices=tuple(DTYPES),
        help="precision of the SGD iterations (final numbers are float64)",
    )

    def __post_init__(self) -> None:
        if not self.target_divergences:
            raise ValueError("give at least one target divergence R (--divergence R [R ...])")
        for config in self.configs(seed=0):
            config.validate()

    def configs(self, seed: int) -> list[ATGConfig]:
        """One ATGConfig per target divergence."""
        return [
            ATGConfig(
                target_divergence=r,
                lam=self.lam,
                divergence=self.measure,
                iterations=self.iterations,
                lr=self.lr,
                momentum=self.momentum,
                seed=seed,
                fractions=tuple(self.fractions),
                nll_reduction=self.nll_reduction,
                damping=self.damping,
                threads=self.threads,
                dtype=self.dtype,
                restarts=self.restarts,
                init=self.init,
                tolerance=self.tolerance,
            )
            for r in self.target_divergences
        ]


@register_method
class ATGMethod(SplitMethod):
    """Automatic Taskset Generation on `--embeddings` (checked against `--dataset` /
    `--class-names` when given); the dataset name defaults to the embeddings file's stem."""

    name = "atg"
    summary = "splits of chosen divergence R from class embeddings (Arnold & Sha)"
    Parameters = ATGParameters
    reads = ("dataset", "class_names", "embeddings")

    def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
        configs = self.parameters.configs(0 if inputs.seed is None else inputs.seed)
        if inputs.embeddings is None:
            raise ValueError("--method atg needs --embeddings NPZ (python -m splits.embed)")
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
