"""ATG's settings, each declared once: its default (the paper's, App. A.6, where it gives one),
its `splits make --method atg` flag, its help and its check.

One `ATGConfig` holds the target divergences R of a sweep; `runs(seed)` gives one config per R,
the form the algorithm (`splits.methods.atg.algorithm`) takes. A single R may be given as a
number: `ATGConfig(0.32, iterations=300)` is `ATGConfig((0.32,), iterations=300)`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

from episodes.records.split_sizes import DEFAULT_FRACTIONS, validate_fractions
from episodes.util.config_flags import ConfigError, config_field
from splits.methods.atg.divergences import DEFAULT_DAMPING, DIVERGENCES

__all__ = ["DEFAULT_RESTARTS", "DTYPE_NAMES", "INITS", "REDUCTIONS", "ATGConfig"]

REDUCTIONS = ("mean", "sum")
INITS = ("centre", "reference")
DTYPE_NAMES = ("float32", "float64")
DEFAULT_RESTARTS = 4


@dataclass(frozen=True)
class ATGConfig:
    """Hyper-parameters of ATG; defaults are the paper's (App. A.6) except the mean likelihood
    (lambda_eff = M lambda), the centred start and several restarts (`algorithm` explains
    each). Invalid values raise ConfigError (a ValueError) when the config is made."""

    target_divergences: tuple[float, ...] = config_field(
        flag="--divergence",
        metavar="R",
        renamed_from=("--sweep",),
        help="target divergence R >= 0; several R: one split file per R (a sweep)",
    )
    divergence: str = config_field(
        "symmetric_kl", flag="--measure", choices=DIVERGENCES, help="divergence D"
    )
    lam: float = config_field(
        1.0,
        flag="--penalty-weight",
        renamed_from=("--lambda",),  # --lambda is FIX-ML's base/novel mixing of the samplers
        help="lambda, the weight of the penalty (D - R)^2; with the mean likelihood the paper's summed objective's weight is "
        "M * lambda",
    )
    iterations: int = config_field(7000, help="SGD steps per start")
    lr: float = config_field(0.1, help="SGD learning rate")
    momentum: float = config_field(0.9, help="SGD momentum")
    restarts: int = config_field(
        DEFAULT_RESTARTS, help="starts per R; the lowest J that reaches R is kept"
    )
    init: str = config_field(
        "centre",
        choices=INITS,
        help="centroid starts: centre (mean embedding +- 0.01) or reference (N(0, I), as the "
        "authors' example code)",
    )
    tolerance: float = config_field(0.05, help="largest relative miss of R that is saved")
    fractions: tuple[float, float, float] = config_field(
        DEFAULT_FRACTIONS,
        metavar=("TRAIN", "VALID", "TEST"),
        help="class fractions per split; valid and test get floor(f N) classes, train the rest",
    )
    nll_reduction: str = config_field(
        "mean",
        choices=REDUCTIONS,
        help="mean (lambda_eff = M lambda) or sum (the paper's formula) of the likelihood",
    )
    damping: float = config_field(
        DEFAULT_DAMPING, help="diagonal damping of the Wasserstein-2 Gaussians"
    )
    threads: int = config_field(
        1,
        flag="--torch-threads",
        renamed_from=("--threads",),  # --threads is the decoding threads of the reader
        help="torch CPU threads",
    )
    dtype: str = config_field(
        "float32",
        choices=DTYPE_NAMES,
        flag="--precision",
        renamed_from=("--dtype",),  # --dtype is the dtype of the reader's episode arrays
        help="precision of the SGD iterations (final numbers are float64)",
    )
    seed: int = config_field(
        0, help="the seed of the starts and ties (`splits make --seed`)", cli=False
    )
    init_offset: float = config_field(
        0.01, help="how far apart the centred starts are pushed", cli=False
    )

    def __post_init__(self) -> None:
        if isinstance(self.target_divergences, numbers.Real):  # one R given as a number
            object.__setattr__(self, "target_divergences", (self.target_divergences,))
        object.__setattr__(self, "target_divergences", tuple(self.target_divergences))
        object.__setattr__(self, "fractions", tuple(self.fractions))
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError naming the first bad value."""
        if not self.target_divergences:
            raise ConfigError("give at least one target divergence R (--divergence R [R ...])")
        for r in self.target_divergences:
            if not isinstance(r, int | float) or not math.isfinite(r) or r < 0:
                raise ConfigError(f"target divergence R must be a finite number >= 0, got {r!r}")
        if not math.isfinite(self.lam) or self.lam < 0:
            raise ConfigError(f"lambda must be >= 0, got {self.lam!r}")
        if self.divergence not in DIVERGENCES:
            raise ConfigError(f"divergence {self.divergence!r} is not one of {DIVERGENCES}")
        if int(self.iterations) != self.iterations or self.iterations < 0:
            raise ConfigError(f"iterations must be a non-negative integer, got {self.iterations!r}")
        if not self.lr > 0:
            raise ConfigError(f"learning rate must be > 0, got {self.lr!r}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if self.nll_reduction not in REDUCTIONS:
            raise ConfigError(f"nll_reduction {self.nll_reduction!r} is not one of {REDUCTIONS}")
        if not self.damping > 0:
            raise ConfigError(f"damping must be > 0, got {self.damping!r}")
        if self.dtype not in DTYPE_NAMES:
            raise ConfigError(f"dtype {self.dtype!r} is not one of {DTYPE_NAMES}")
        if not (math.isfinite(self.init_offset) and self.init_offset > 0):
            raise ConfigError(f"init_offset must be > 0, got {self.init_offset!r}")
        if self.threads < 1:
            raise ConfigError(f"threads must be >= 1, got {self.threads!r}")
        if int(self.restarts) != self.restarts or self.restarts < 1:
            raise ConfigError(f"restarts must be an integer >= 1, got {self.restarts!r}")
        if self.init not in INITS:
            raise ConfigError(f"init {self.init!r} is not one of {INITS}")
        if not (math.isfinite(self.tolerance) and 0 < self.tolerance < 1):
            raise ConfigError(f"tolerance must be in (0, 1), got {self.tolerance!r}")
        validate_fractions(self.fractions)

    @property
    def target_divergence(self) -> float:
        """The R of a one-R config (what one ATG run aims at); several R: use `runs`."""
        if len(self.target_divergences) != 1:  # a caller's bug, not a user's
            raise ValueError(
                f"one ATG run aims at one R, this config has {len(self.target_divergences)} "
                f"({list(self.target_divergences)}): run each of config.runs()"
            )
        return self.target_divergences[0]

    def runs(self, seed: int | None = None) -> list[ATGConfig]:
        """One config per target divergence (with `seed`, when given): the runs of a sweep."""
        seed = self.seed if seed is None else seed
        return [replace(self, target_divergences=(r,), seed=seed) for r in self.target_divergences]

    def with_target(self, r: float) -> ATGConfig:
        """This config aiming at the one R `r`."""
        return replace(self, target_divergences=(r,))

    def lambda_effective(self, num_classes: int) -> float:
        """The penalty weight of the paper's summed objective that this objective equals (up
        to a factor 1/M): M * lambda with the mean likelihood, lambda with the sum."""
        return self.lam * (num_classes if self.nll_reduction == "mean" else 1)

    def reaches(self, divergence: float) -> bool:
        """Whether an achieved divergence is within `tolerance` of R (R = 0: zero)."""
        r = self.target_divergence
        return math.isfinite(divergence) and abs(divergence - r) <= max(self.tolerance * r, 1e-9)
