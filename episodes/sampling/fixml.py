"""FIX-ML fixed support pools, held-out base examples and base/novel mixed episodes.

Setlur, Li & Smith, section 4: before meta-training, k examples D_c^0 are drawn once per base
class and used as that class's whole support in every training episode, while query examples
are still drawn from all of the class's examples, Unif(D_c). Section 4.2: part of each base class's
examples is reserved (never used in training) so that fresh tasks from the base distribution
tau(C_B) can be evaluated, and tau_BN(lambda) draws the classes of an episode one by one
without replacement, from the novel classes with total probability lambda and from the base
classes otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.sampling.episode import EpisodeDescription
from episodes.sampling.fixml_records import BaseHoldout, FixedSupportPool
from episodes.sampling.sampler import (
    EpisodeStream,
    build_class_table,
    check_index,
    check_record_set_owner,
    check_seed,
    fill_episode,
)
from episodes.sampling.sampler_config import SamplerConfig, SamplerError
from episodes.sampling.sampler_formulas import (
    choose_uniform,
    draw_distinct,
    episode_rng,
    stable_hash,
    uniform_int,
)

__all__ = ["MixedSampler", "check_lambda", "make_base_holdout", "make_fixed_support_pool"]


def _class_rng(seed: int, class_id: int, *labels: str) -> np.random.Generator:
    return episode_rng(seed, class_id, tuple(stable_hash(label) for label in labels))


# ----------------------------------------------------------------------------------------------
# Held-out base examples (the BaseHoldout type and file: episodes.sampling.fixml_records)


def make_base_holdout(
    spec: DatasetSpec, base_split: Split | str, fraction: float, seed: int
) -> BaseHoldout:
    """Hold out round(fraction * |Im(c)|) records of every base class (at least 1, at most
    |Im(c)| - 1), drawn uniformly from a seed (FIX-ML section 4.2: e.g. 100 of 600)."""
    split = Split.parse(base_split)
    check_seed(seed)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not (0.0 < fraction < 1.0)
    ):
        raise SamplerError(f"holdout fraction={fraction!r} is outside (0, 1)")
    records = {}
    for c in spec.classes(split):
        total = int(spec.images_per_class[c])
        if total < 2:
            raise SamplerError(
                f"class {c} ({spec.class_names[c]!r}) has {total} image(s): cannot hold out a "
                f"part of it"
            )
        held = min(total - 1, max(1, int(round(fraction * total))))
        rng = _class_rng(seed, c, spec.name, "base-holdout", split.value)
        picked = draw_distinct(rng, np.array([total]), np.array([held]))
        records[c] = tuple(sorted(picked.tolist()))
    return BaseHoldout(
        dataset=spec.name, split=split.value, fraction=float(fraction), seed=seed, records=records
    )


# ----------------------------------------------------------------------------------------------
# Fixed support pools (the FixedSupportPool type and file: episodes.sampling.fixml_records)


def make_fixed_support_pool(
    spec: DatasetSpec,
    split: Split | str,
    k: int,
    seed: int,
    holdout: BaseHoldout | Mapping[int, Sequence[int]] | None = None,
) -> FixedSupportPool:
    """Draw k records per class of the split, once, uniformly without replacement (FIX-ML
    section 4). Records of `holdout` are never chosen. Each class keeps at least one other
    record for its query examples."""
    split = Split.parse(split)
    check_seed(seed)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SamplerError(f"pool k={k!r} is invalid: expected an integer >= 1")
    check_record_set_owner(holdout, spec, split, "holdout")
    held_map = getattr(holdout, "records", holdout) or {}
    records = {}
    for c in spec.classes(split):
        usable = np.arange(int(spec.images_per_class[c]), dtype=np.int64)
        if c in held_map:
            usable = usable[~np.isin(usable, np.asarray(list(held_map[c]), dtype=np.int64))]
        if len(usable) <= k:
            raise SamplerError(
                f"class {c} ({spec.class_names[c]!r}) has {len(usable)} usable images: a pool of "
                f"k={k} needs at least {k + 1} (k support plus query examples)"
            )
        rng = _class_rng(seed, c, spec.name, "fixml-pool", split.value)
        picked = usable[draw_distinct(rng, np.array([len(usable)]), np.array([k]))]
        records[c] = tuple(sorted(picked.tolist()))
    return FixedSupportPool(dataset=spec.name, split=split.value, k=k, seed=seed, records=records)


# ----------------------------------------------------------------------------------------------
# Base / novel mixing


def check_lambda(lam: Any) -> float:
    if (
        isinstance(lam, bool)
        or not isinstance(lam, int | float)
        or not (math.isfinite(lam) and 0.0 <= lam <= 1.0)
    ):
        raise SamplerError(f"lambda={lam!r} is outside [0, 1]")
    return float(lam)


class MixedSampler(EpisodeStream):
    """Episodes from tau_BN(lambda) (FIX-ML section 4.2).

    config.base_novel_draw "weighted" (default, the paper's "sequentially sampled
    non-repeatedly ... with total probability lambda" and its reference code): the episode's
    classes are drawn one after another without replacement, each remaining class with weight
    lambda/|C_N| if novel and (1 - lambda)/|C_B| if base, so lambda = |C_N|/(|C_N| + |C_B|) is
    exactly a uniform draw from C_B u C_N. "binomial": each of the `ways` class slots is
    independently novel with probability lambda (Binomial(ways, lambda) novel classes), filled
    uniformly from the novel or base classes. The draw order is the label order. lambda=0 gives
    tau(C_B), lambda=1 tau(C_N). Steps 2-3 (shots, query, records) follow the config as for any
    episode. With `holdout`, base classes use only their held-out records (fresh base tasks,
    "BaseGen"). Classes are drawn flat (no hierarchy). The description's split is the novel
    split when any class is novel, else the base split.
    """

    def __init__(
        self,
        spec: DatasetSpec,
        base_split: Split | str,
        novel_split: Split | str,
        lam: float,
        config: SamplerConfig = SamplerConfig.fixed(),
        seed: int = 0,
        holdout: BaseHoldout | Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        self.lam = check_lambda(lam)
        check_seed(seed)
        self.spec, self.config, self.seed = spec, config, seed
        self.base_split, self.novel_split = Split.parse(base_split), Split.parse(novel_split)
        if self.base_split == self.novel_split:
            raise SamplerError(
                f"base and novel split are both {self.base_split.value}: expected two splits"
            )
        check_record_set_owner(holdout, spec, self.base_split, "holdout")
        base, novel = spec.classes(self.base_split), spec.classes(self.novel_split)
        restrict = getattr(holdout, "records", holdout)
        base_table = build_class_table(
            spec, base, config, restrict=restrict, context=f" in base split {self.base_split.value}"
        )
        novel_table = build_class_table(
            spec, novel, config, context=f" in novel split {self.novel_split.value}"
        )
        self.table = build_class_table(
            spec,
            [*base_table.class_ids.tolist(), *novel_table.class_ids.tolist()],
            config,
            restrict=restrict,
        )
        self.num_base, self.num_novel = len(base_table), len(novel_table)
        self.weighted = config.base_novel_draw == "weighted"
        if self.weighted:
            # Race of exponential clocks E_i / w_i: the order in which they ring is a sequential
            # draw without replacement with probabilities proportional to w.
            weights = np.concatenate(
                [
                    np.full(self.num_base, (1.0 - self.lam) / max(self.num_base, 1)),
                    np.full(self.num_novel, self.lam / max(self.num_novel, 1)),
                ]
            )
            with np.errstate(divide="ignore"):
                self._inverse_weights = np.where(weights > 0, 1.0 / weights, np.inf)
            self.capacity = int((weights > 0).sum())
        else:
            limits = []
            if self.lam < 1.0:
                limits.append(self.num_base)
            if self.lam > 0.0:
                limits.append(self.num_novel)
            self.capacity = min(limits)
        words = (
            f"{self.num_base} base ({self.base_split.value}) and {self.num_novel} novel "
            f"({self.novel_split.value}) classes with lambda={self.lam} "
            f"({config.base_novel_draw} draw)"
        )
        if config.fixed_ways is not None and config.fixed_ways > self.capacity:
            raise SamplerError(
                f"ways={config.fixed_ways} is more than {words} allow ({self.capacity})"
            )
        if config.fixed_ways is None and config.min_ways > self.capacity:
            raise SamplerError(
                f"min_ways={config.min_ways} is more than {words} allow ({self.capacity})"
            )
        self._labels = (
            stable_hash(spec.name),
            stable_hash("mixed"),
            stable_hash(self.base_split.value),
            stable_hash(self.novel_split.value),
            stable_hash(repr(self.lam)),
        )

    def _choose_weighted(self, rng: np.random.Generator, ways: int) -> np.ndarray:
        """`ways` table positions, drawn in order without replacement by weight."""
        clocks = -np.log1p(-rng.random(len(self._inverse_weights))) * self._inverse_weights
        return np.argsort(clocks, kind="stable")[:ways]

    def _choose_binomial(self, rng: np.random.Generator, ways: int) -> np.ndarray:
        """Each slot novel with probability lambda; slots filled uniformly per side."""
        novel = rng.random(ways) < self.lam
        n_novel = int(novel.sum())
        chosen = np.empty(ways, dtype=np.int64)
        chosen[~novel] = choose_uniform(rng, self.num_base, ways - n_novel)
        chosen[novel] = self.num_base + choose_uniform(rng, self.num_novel, n_novel)
        return chosen

    def episode(self, index: int) -> EpisodeDescription:
        check_index(index)
        cfg = self.config
        rng = episode_rng(self.seed, index, self._labels)
        ways = cfg.fixed_ways
        if ways is None:
            ways = uniform_int(rng.random(), cfg.min_ways, min(cfg.max_ways, self.capacity))
        if self.weighted:
            chosen = self._choose_weighted(rng, ways)
        else:
            chosen = self._choose_binomial(rng, ways)
        support, query = fill_episode(self.table, chosen, rng, cfg)
        any_novel = bool((chosen >= self.num_base).any())
        return EpisodeDescription(
            source=self.spec.name,
            split=self.novel_split if any_novel else self.base_split,
            episode_index=index,
            class_ids=tuple(self.table.class_ids[chosen].tolist()),
            support=support,
            query=query,
        )
