"""Configuration of the episode sampler: which episode shapes to draw and the paper's bounds.

Defaults are Meta-Dataset's (Triantafillou et al., section 3.2 and appendix "Details of
Meta-Dataset's sampling algorithm"); `mode="fixed"` gives classic N-way K-shot Q-query episodes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from episodes.util.cli_errors import UserError

__all__ = [
    "BASE_NOVEL_DRAWS",
    "FIXED_DEFAULT_QUERY",
    "FIXED_DEFAULT_SHOTS",
    "FIXED_DEFAULT_WAYS",
    "MODES",
    "POOL_QUERY",
    "SamplerConfig",
    "SamplerError",
]

MODES = ("variable", "fixed")
POOL_QUERY = ("all", "outside_pool")
BASE_NOVEL_DRAWS = ("weighted", "binomial")
FIXED_DEFAULT_WAYS = 5
FIXED_DEFAULT_SHOTS = 5
FIXED_DEFAULT_QUERY = 15


class SamplerError(UserError, ValueError):
    """A sampler configuration or input that cannot produce the requested episodes."""


def _check_int(name: str, value: Any, minimum: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        expected = f"an integer >= {minimum}" + (" or None" if allow_none else "")
        raise SamplerError(f"{name}={value!r} is invalid: expected {expected}")


@dataclass(frozen=True)
class SamplerConfig:
    """What episodes look like.

    mode "variable" (the paper's default): ways, query, support size and per-class shots follow
    the Meta-Dataset formulas; setting `ways` fixes the ways ("fixed ways, variable shots"),
    setting `shots` or `query` fixes that part. mode "fixed": N-way K-shot Q-query with
    defaults 5 / 5 / 15 (set shots=1 for 5-way 1-shot). Hierarchies (ImageNet DAG, Omniglot
    alphabets) choose the classes when the ways are variable; fixed ways on a dataset whose
    hierarchy is in use are an error, as in Meta-Dataset's sampling.py ('"use_dag_hierarchy" is
    incompatible with "num_ways"'): set use_dag_hierarchy / use_bilevel_hierarchy False
    (Meta-Dataset's ignore_dag_ontology / ignore_bilevel_ontology) to draw fixed ways uniformly
    over the split, as `SamplerConfig.fixed()` does. An ImageNet DAG node is eligible when
    it spans between `dag_min_leaves` (min_ways, as Meta-Dataset's sampler; `min_leaves` may
    raise it, never lower it) and `max_leaves` eligible leaves.

    FIX-ML (Setlur et al. section 4): with a fixed support pool, `pool_query="all"` draws query
    examples from all of a class's images, pool included, as the paper's Unif(D_c) and the
    authors' code do; "outside_pool" keeps query and pool disjoint. For tau_BN(lambda),
    `base_novel_draw="weighted"` draws classes without replacement with weight lambda/|C_N| per
    novel and (1 - lambda)/|C_B| per base class (the authors' code, section 4.2); "binomial"
    makes each class slot novel with probability lambda (Binomial(ways, lambda) novel classes).
    """

    mode: str = "variable"
    ways: int | None = None
    shots: int | None = None
    query: int | None = None
    min_ways: int = 5
    max_ways: int = 50
    max_support_size: int = 500
    max_support_per_class: int = 100
    max_query_per_class: int = 10
    min_log_weight: float = math.log(0.5)
    max_log_weight: float = math.log(2.0)
    min_examples_in_class: int = 0
    use_dag_hierarchy: bool = True
    use_bilevel_hierarchy: bool = True
    ignore_hierarchy_probability: float = 0.0
    min_leaves: int | None = None
    max_leaves: int = 392
    max_dag_ways: int = 50
    num_unique_descriptions: int = 0
    pool_query: str = "all"
    base_novel_draw: str = "weighted"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SamplerError(f"mode={self.mode!r} is invalid: expected one of {', '.join(MODES)}")
        _check_int("ways", self.ways, 1, allow_none=True)
        _check_int("shots", self.shots, 1, allow_none=True)
        _check_int("query", self.query, 1, allow_none=True)
        for name in (
            "min_ways",
            "max_ways",
            "max_support_size",
            "max_support_per_class",
            "max_query_per_class",
            "max_leaves",
            "max_dag_ways",
        ):
            _check_int(name, getattr(self, name), 1)
        _check_int("min_leaves", self.min_leaves, 1, allow_none=True)
        _check_int("min_examples_in_class", self.min_examples_in_class, 0)
        _check_int("num_unique_descriptions", self.num_unique_descriptions, 0)
        if self.min_ways > self.max_ways:
            raise SamplerError(f"min_ways={self.min_ways} is larger than max_ways={self.max_ways}")
        if self.min_leaves is not None and self.min_leaves < self.min_ways:
            raise SamplerError(
                f"min_leaves={self.min_leaves} is below min_ways={self.min_ways}: DAG nodes that "
                f"small would give episodes of fewer than min_ways classes (leave min_leaves "
                f"unset to use min_ways, as Meta-Dataset does)"
            )
        if self.dag_min_leaves > self.max_leaves:
            raise SamplerError(
                f"min_leaves={self.dag_min_leaves} is larger than max_leaves={self.max_leaves}"
            )
        if self.pool_query not in POOL_QUERY:
            raise SamplerError(
                f"pool_query={self.pool_query!r} is invalid: expected one of {', '.join(POOL_QUERY)}"
            )
        if self.base_novel_draw not in BASE_NOVEL_DRAWS:
            raise SamplerError(
                f"base_novel_draw={self.base_novel_draw!r} is invalid: expected one of "
                f"{', '.join(BASE_NOVEL_DRAWS)}"
            )
        p = self.ignore_hierarchy_probability
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise SamplerError(f"ignore_hierarchy_probability={p!r} is outside [0, 1]")
        lo, hi = self.min_log_weight, self.max_log_weight
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise SamplerError(
                f"min_log_weight={lo!r}, max_log_weight={hi!r}: expected finite numbers, min <= max"
            )
        if self.fixed_shots is None and self.max_support_size < self.largest_ways:
            raise SamplerError(
                f"max_support_size={self.max_support_size} is smaller than the largest possible "
                f"ways ({self.largest_ways}): every class needs at least one support example"
            )

    # -- resolved values ------------------------------------------------------------------

    def _set_or_fixed_default(self, value: int | None, fixed_default: int) -> int | None:
        """`value` when the config sets it, else `fixed_default` in fixed mode (None in
        variable mode): the one rule behind fixed_ways, fixed_shots and fixed_query."""
        if value is not None:
            return value
        return fixed_default if self.mode == "fixed" else None

    @property
    def fixed_ways(self) -> int | None:
        """The ways of every episode, or None when the ways vary."""
        return self._set_or_fixed_default(self.ways, FIXED_DEFAULT_WAYS)

    @property
    def fixed_shots(self) -> int | None:
        """Shots of every class, or None when they follow the paper's formulas."""
        return self._set_or_fixed_default(self.shots, FIXED_DEFAULT_SHOTS)

    @property
    def fixed_query(self) -> int | None:
        """Query examples per class, or None for q = min(10, min_c floor(|Im(c)|/2))."""
        return self._set_or_fixed_default(self.query, FIXED_DEFAULT_QUERY)

    @property
    def dag_min_leaves(self) -> int:
        """Fewest eligible leaves an ImageNet DAG node must span: min_ways (Meta-Dataset's
        sampling.py), or the larger `min_leaves` when set."""
        return self.min_ways if self.min_leaves is None else self.min_leaves

    @property
    def largest_ways(self) -> int:
        """Upper bound on the ways of any episode."""
        return self.fixed_ways if self.fixed_ways is not None else self.max_ways

    def min_images_needed(self, support_fixed: int | None = None) -> int:
        """Smallest class size that can appear in an episode: room for >= 1 query and >= 1
        support example (or the fixed shots/query)."""
        shots = support_fixed if support_fixed is not None else self.fixed_shots
        return (shots or 1) + (self.fixed_query or 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SamplerConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SamplerError(
                f"unknown sampler option(s) {unknown}: expected some of {sorted(known)}"
            )
        return cls(**raw)

    @classmethod
    def fixed(
        cls,
        ways: int = FIXED_DEFAULT_WAYS,
        shots: int = FIXED_DEFAULT_SHOTS,
        query: int = FIXED_DEFAULT_QUERY,
        **options: Any,
    ) -> SamplerConfig:
        """N-way K-shot Q-query episodes (5-way 5-shot 15-query by default), the classes drawn
        uniformly over the split: the hierarchies are off unless `options` turn them on (which
        then fails, fixed ways being incompatible with a hierarchy)."""
        options.setdefault("use_dag_hierarchy", False)
        options.setdefault("use_bilevel_hierarchy", False)
        return cls(mode="fixed", ways=ways, shots=shots, query=query, **options)
