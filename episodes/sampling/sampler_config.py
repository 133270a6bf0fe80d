"""Configuration of the episode sampler: which episode shapes to draw and the paper's bounds.

Defaults are Meta-Dataset's (Triantafillou et al., section 3.2 and appendix "Details of
Meta-Dataset's sampling algorithm"); `mode="fixed"` gives classic N-way K-shot Q-query episodes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from episodes.util.cli_errors import UserError
from episodes.util.config_flags import check_fields, config_field

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

    Each field's help, choices and bounds are declared beside it (`config_field`): they are the
    `--option` flags of every command that samples (`episodes.sampling.episode_cli`), and a
    value off them is refused in one line naming the flag (SamplerError).
    """

    mode: str = config_field(
        "variable",
        choices=MODES,
        help="episode shape: variable (Meta-Dataset's formulas for ways, shots and query) or "
        "fixed (N-way K-shot Q-query, 5/5/15 unless --ways, --shots, --query say otherwise)",
    )
    ways: int | None = config_field(
        None,
        minimum=1,
        help="classes per episode (default: drawn in --min-ways..--max-ways; 5 in fixed mode); "
        "with a hierarchy in use, fixed ways need --no-use-dag-hierarchy / "
        "--no-use-bilevel-hierarchy",
    )
    shots: int | None = config_field(
        None,
        minimum=1,
        help="support examples per class (default: Meta-Dataset's formula; 5 in fixed mode)",
    )
    query: int | None = config_field(
        None,
        minimum=1,
        help="query examples per class (default: min(10, half the smallest class's images); 15 "
        "in fixed mode)",
    )
    min_ways: int = config_field(5, minimum=1, help="fewest classes of an episode whose ways vary")
    max_ways: int = config_field(50, minimum=1, help="most classes of an episode whose ways vary")
    max_support_size: int = config_field(
        500,
        minimum=1,
        help="largest support set when the shots vary (at least the ways)",
    )
    max_support_per_class: int = config_field(
        100, minimum=1, help="most support examples of one class"
    )
    max_query_per_class: int = config_field(10, minimum=1, help="most query examples of one class")
    min_log_weight: float = config_field(
        math.log(0.5),
        help="lowest log weight alpha_c that skews a class's share of the support set "
        "(default log 0.5)",
    )
    max_log_weight: float = config_field(
        math.log(2.0),
        help="highest log weight alpha_c (default log 2; at least --min-log-weight)",
    )
    min_examples_in_class: int = config_field(
        0, minimum=0, help="leave out the classes with fewer images (0: none left out)"
    )
    use_dag_hierarchy: bool = config_field(
        True,
        help="when the ways vary, draw the classes of an ImageNet episode under one node of "
        "its WordNet DAG (Meta-Dataset's sampling)",
    )
    use_bilevel_hierarchy: bool = config_field(
        True,
        help="when the ways vary, draw the classes of an Omniglot episode from one alphabet "
        "(Meta-Dataset's sampling)",
    )
    ignore_hierarchy_probability: float = config_field(
        0.0,
        minimum=0.0,
        maximum=1.0,
        help="probability that an episode ignores the hierarchy and draws its classes "
        "uniformly over the split",
    )
    min_leaves: int | None = config_field(
        None,
        minimum=1,
        help="fewest eligible leaves of an ImageNet DAG node an episode is drawn under "
        "(default: --min-ways, as Meta-Dataset; may raise it, never lower it)",
    )
    max_leaves: int = config_field(
        392,
        minimum=1,
        help="most eligible leaves of an ImageNet DAG node an episode is drawn under",
    )
    max_dag_ways: int = config_field(
        50, minimum=1, help="most classes of an episode drawn under a DAG node"
    )
    num_unique_descriptions: int = config_field(
        0,
        minimum=0,
        help="repeat a cycle of N episode descriptions (episode i is description i mod N; 0: "
        "every episode new)",
    )
    pool_query: str = config_field(
        "all",
        choices=POOL_QUERY,
        help="with a fixed support pool (FIX-ML): query examples from all of a class's images, "
        "pool included (all: the paper's Unif(D_c)), or only from outside the pool",
    )
    base_novel_draw: str = config_field(
        "weighted",
        choices=BASE_NOVEL_DRAWS,
        help="FIX-ML's --lambda mixing: classes drawn with weight lambda/|C_N| per novel and "
        "(1 - lambda)/|C_B| per base class (weighted, the authors' code), or each class slot "
        "novel with probability lambda (binomial)",
    )

    def __post_init__(self) -> None:
        check_fields(self, SamplerError)  # each option's type, choices and bounds
        if self.min_ways > self.max_ways:
            raise SamplerError(
                f"--min-ways {self.min_ways} is larger than --max-ways {self.max_ways}"
            )
        if self.min_leaves is not None and self.min_leaves < self.min_ways:
            raise SamplerError(
                f"--min-leaves {self.min_leaves} is below --min-ways {self.min_ways}: DAG nodes "
                "that small would give episodes of fewer than min-ways classes (leave "
                "--min-leaves unset to use --min-ways, as Meta-Dataset does)"
            )
        if self.dag_min_leaves > self.max_leaves:
            raise SamplerError(
                f"--min-leaves {self.dag_min_leaves} is larger than --max-leaves {self.max_leaves}"
            )
        lo, hi = self.min_log_weight, self.max_log_weight
        if lo > hi:
            raise SamplerError(f"--min-log-weight {lo!r} is larger than --max-log-weight {hi!r}")
        if self.fixed_shots is None and self.max_support_size < self.largest_ways:
            raise SamplerError(
                f"--max-support-size {self.max_support_size} is smaller than the largest "
                f"possible ways ({self.largest_ways}): every class needs a support example"
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
