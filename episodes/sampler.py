"""The Meta-Dataset episode sampler: spec + split + config + seed + index -> EpisodeDescription.

Follows Triantafillou et al. (Meta-Dataset), section 3.2 and the appendix "Details of
Meta-Dataset's sampling algorithm": step 1 picks the classes (uniform ways, one eligible node of
the ImageNet DAG, or one Omniglot alphabet), step 2 the query size, support size and shots,
then records uniformly without replacement within each class. Episode i is a pure function of
its inputs: its random stream comes from SeedSequence entropy
[seed, i, sha256(dataset name), sha256(split)], so no episode depends on computing another.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.dataset_spec import BiLevelHierarchy, DagHierarchy, DatasetSpec, Split
from episodes.episode import EpisodeDescription
from episodes.imagenet_nodes import eligible_nodes
from episodes.sampler_config import SamplerConfig, SamplerError
from episodes.sampler_formulas import (
    draw_distinct,
    episode_rng,
    query_per_class,
    shots_per_class,
    stable_hash,
    support_set_size,
    uniform_int,
)

if TYPE_CHECKING:
    from episodes.fixml import FixedSupportPool

__all__ = [
    "EpisodeSampler",
    "MultiSourceSampler",
    "SamplerConfig",
    "SamplerError",
    "sample_episode",
]

RecordMap = Mapping[int, Sequence[int]]


# ----------------------------------------------------------------------------------------------
# Per-split precomputation


@dataclass
class ClassTable:
    """The classes an episode may use, with their usable records, as numpy arrays.

    `images[p]` is |Im(c)| in the paper's formulas (usable records of class_ids[p]); records are
    drawn from `flat_records[offsets[p] : offsets[p] + counts[p]]`, or from range(counts[p])
    when `flat_records` is None. With a FIX-ML pool, `pool_support[p]` is the fixed support and
    `counts` / `flat_records` cover the class's other records only."""

    class_ids: np.ndarray
    images: np.ndarray
    counts: np.ndarray
    flat_records: np.ndarray | None
    offsets: np.ndarray
    pool_support: list[tuple[int, ...]] | None = None
    pool_k: int | None = None

    def __len__(self) -> int:
        return len(self.class_ids)

    def position_of(self) -> dict[int, int]:
        return {int(c): p for p, c in enumerate(self.class_ids)}


def _records_of(value: Any, name: str) -> dict[int, Sequence[int]]:
    if value is None:
        return {}
    records = getattr(value, "records", value)
    if not isinstance(records, Mapping):
        raise SamplerError(
            f"{name} must map class ids to record numbers, got {type(value).__name__}"
        )
    return {int(c): r for c, r in records.items()}


def _checked_records(spec: DatasetSpec, class_id: int, records: Sequence[int], name: str):
    arr = np.asarray(list(records), dtype=np.int64)
    total = spec.images_per_class[class_id]
    if arr.size and (arr.min() < 0 or arr.max() >= total):
        bad = int(arr[(arr < 0) | (arr >= total)][0])
        raise SamplerError(
            f"{name}: record number {bad} of class {class_id} is outside [0, {total})"
        )
    if len(np.unique(arr)) != len(arr):
        raise SamplerError(f"{name}: class {class_id} lists a record number twice")
    return arr


def build_class_table(
    spec: DatasetSpec,
    class_ids: Sequence[int],
    config: SamplerConfig,
    *,
    restrict: RecordMap | None = None,
    exclude: RecordMap | None = None,
    pool: FixedSupportPool | None = None,
    context: str = "",
) -> ClassTable:
    """Usable records of each class (restrict minus exclude), classes below
    config.min_examples_in_class dropped, and a clear error for a class too small for the
    episode shape."""
    restrict_map = _records_of(restrict, "restrict")
    exclude_map = _records_of(exclude, "holdout")
    pool_map = _records_of(pool, "pool")
    pool_k = None if pool is None else int(pool.k)
    if pool is not None and config.shots is not None and config.shots != pool_k:
        raise SamplerError(
            f"shots={config.shots} but the fixed support pool has k={pool_k} examples per class"
        )
    needed = config.min_images_needed(support_fixed=pool_k)
    ids, images, counts, chunks, supports = [], [], [], [], []
    restricted = bool(restrict_map or exclude_map or pool_map)
    for c in class_ids:
        c = int(c)
        total = int(spec.images_per_class[c])
        if c in restrict_map:
            usable = _checked_records(spec, c, restrict_map[c], "restrict")
        else:
            usable = np.arange(total, dtype=np.int64)
        if c in exclude_map:
            held = _checked_records(spec, c, exclude_map[c], "holdout")
            usable = usable[~np.isin(usable, held)]
        if len(usable) < config.min_examples_in_class:
            continue
        support: tuple[int, ...] | None = None
        if pool is not None:
            if c not in pool_map:
                raise SamplerError(
                    f"fixed support pool ({pool.dataset}/{pool.split}) has no records for class "
                    f"{c} ({spec.class_names[c]!r}){context}"
                )
            fixed = _checked_records(spec, c, pool_map[c], "pool")
            if len(fixed) != pool_k or not np.isin(fixed, usable).all():
                raise SamplerError(
                    f"fixed support pool: class {c} must list {pool_k} usable records (not "
                    f"held out, within restrict), got {sorted(fixed.tolist())}"
                )
            support = tuple(sorted(fixed.tolist()))
        if len(usable) < needed:
            raise SamplerError(
                f"class {c} ({spec.class_names[c]!r}){context} has {len(usable)} usable images "
                f"but {_shape_words(config, pool_k)} needs at least {needed}; lower shots/query "
                f"or set min_examples_in_class={needed} to skip such classes"
            )
        ids.append(c)
        images.append(len(usable))
        if pool is not None:
            usable = usable[~np.isin(usable, fixed)]
            supports.append(support)
        counts.append(len(usable))
        chunks.append(usable)
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=offsets[1:])
    return ClassTable(
        class_ids=np.asarray(ids, dtype=np.int64),
        images=np.asarray(images, dtype=np.int64),
        counts=np.asarray(counts, dtype=np.int64),
        flat_records=np.concatenate(chunks) if restricted and chunks else None,
        offsets=offsets,
        pool_support=supports if pool is not None else None,
        pool_k=pool_k,
    )


def _shape_words(config: SamplerConfig, pool_k: int | None) -> str:
    shots = pool_k if pool_k is not None else config.fixed_shots
    query = config.fixed_query
    parts = [f"shots={shots}" if shots is not None else "variable shots (>= 1)",
             f"query={query}" if query is not None else "variable query (>= 1)"]
    return " + ".join(parts)


# ----------------------------------------------------------------------------------------------
# Step 2: query size, support size, shots, records


def fill_episode(
    table: ClassTable, chosen: np.ndarray, rng: np.random.Generator, config: SamplerConfig
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """Support and query record numbers (each sorted) of the chosen table positions."""
    images = table.images[chosen]
    counts = table.counts[chosen]
    n = len(chosen)
    fixed_query = config.fixed_query
    if table.pool_support is not None:
        # FIX-ML: support is the pool; query as without a pool, bounded by the other records.
        if fixed_query is not None:
            q = fixed_query
        else:
            q = min(query_per_class(images, config.max_query_per_class), int(counts.min()))
        shots = np.zeros(n, dtype=np.int64)
    else:
        fixed_shots = config.fixed_shots
        if fixed_query is not None:
            q = fixed_query
        elif fixed_shots is not None:
            q = int(min(config.max_query_per_class, int((images - fixed_shots).min())))
        else:
            q = query_per_class(images, config.max_query_per_class)
        if fixed_shots is not None:
            shots = np.full(n, fixed_shots, dtype=np.int64)
        else:
            remaining = images - q
            beta = 1.0 - rng.random()  # uniform in (0, 1]
            size = support_set_size(remaining, beta, config.max_support_per_class,
                                    config.max_support_size)
            lo, hi = config.min_log_weight, config.max_log_weight
            log_weights = lo + (hi - lo) * rng.random(n)
            shots = shots_per_class(images, remaining, size, log_weights)
    needed = shots + q
    positions = draw_distinct(rng, counts, needed)
    if table.flat_records is not None:
        records = table.flat_records[positions + np.repeat(table.offsets[chosen], needed)]
    else:
        records = positions
    # Sort within each (class, support|query) segment: segment id * bound + record.
    lengths = np.empty(2 * n, dtype=np.int64)
    lengths[0::2] = shots
    lengths[1::2] = q
    bound = int(records.max()) + 1 if len(records) else 1
    segment = np.repeat(np.arange(2 * n, dtype=np.int64) * bound, lengths)
    keyed = np.sort(segment + records)
    flat = (keyed - segment).tolist()
    ends = np.cumsum(lengths).tolist()
    start = 0
    parts = []
    for end in ends:
        parts.append(tuple(flat[start:end]))
        start = end
    query = tuple(parts[1::2])
    if table.pool_support is not None:
        support = tuple(table.pool_support[p] for p in chosen.tolist())
    else:
        support = tuple(parts[0::2])
    return support, query


# ----------------------------------------------------------------------------------------------
# Step 1: classes


def choose_uniform(rng: np.random.Generator, n: int, ways: int) -> np.ndarray:
    """`ways` distinct positions out of n, uniformly, in random order (episode labels)."""
    return draw_distinct(rng, np.array([n]), np.array([ways]))


class EpisodeSampler:
    """Episodes of one dataset split. Validates everything once, then `.episode(i)` is cheap.

    pool: a FIX-ML FixedSupportPool (support of every class is its pool, query drawn from the
    class's other records). holdout: per class record numbers never used (a BaseHoldout or a
    mapping). restrict: per class the only record numbers that may be used (classes not listed
    are unrestricted), e.g. a holdout's records to evaluate the base distribution.
    """

    def __init__(
        self,
        spec: DatasetSpec,
        split: Split | str,
        config: SamplerConfig = SamplerConfig(),
        seed: int = 0,
        *,
        pool: FixedSupportPool | None = None,
        holdout: Any = None,
        restrict: RecordMap | None = None,
    ) -> None:
        if not isinstance(config, SamplerConfig):
            raise SamplerError(f"config must be a SamplerConfig, got {type(config).__name__}")
        _check_seed(seed)
        self.spec = spec
        self.split = Split.parse(split)
        self.config = config
        self.seed = seed
        where = f" in split {self.split.value} of {spec.name!r}"
        if pool is not None:
            if pool.dataset != spec.name or Split.parse(pool.split) != self.split:
                raise SamplerError(
                    f"fixed support pool is for {pool.dataset}/{Split.parse(pool.split).value}, "
                    f"not {spec.name}/{self.split.value}"
                )
        split_classes = spec.classes(self.split)
        if not split_classes:
            raise SamplerError(f"split {self.split.value} of {spec.name!r} has no classes")
        self.table = build_class_table(
            spec, split_classes, config, restrict=restrict, exclude=holdout, pool=pool,
            context=where,
        )
        n = len(self.table)
        self._labels = (stable_hash(spec.name), stable_hash(self.split.value))
        self._dag_nodes: list[np.ndarray] = []
        self._dag_node_ids: list[str] = []
        self._alphabets: list[np.ndarray] = []
        self._alphabet_ids: list[int] = []
        hierarchical = config.fixed_ways is None
        if hierarchical and config.use_dag_hierarchy and isinstance(spec.hierarchy, DagHierarchy):
            self._init_dag(spec.hierarchy, where)
        elif (hierarchical and config.use_bilevel_hierarchy
              and isinstance(spec.hierarchy, BiLevelHierarchy)
              and spec.hierarchy.superclass_splits is not None):
            self._init_bilevel(spec.hierarchy, where)
        self.hierarchy_kind = ("dag" if self._dag_nodes else
                               "bilevel" if self._alphabets else "flat")
        needs_flat = self.hierarchy_kind == "flat" or config.ignore_hierarchy_probability > 0
        if needs_flat:
            if config.fixed_ways is not None and config.fixed_ways > n:
                raise SamplerError(
                    f"ways={config.fixed_ways} but split {self.split.value} of {spec.name!r} has "
                    f"only {n} eligible classes"
                )
            if config.fixed_ways is None and config.min_ways > n:
                raise SamplerError(
                    f"split {self.split.value} of {spec.name!r} has {n} eligible classes, fewer "
                    f"than min_ways={config.min_ways}"
                )

    def _init_dag(self, hierarchy: DagHierarchy, where: str) -> None:
        cfg = self.config
        position = self.table.position_of()
        names = {self.spec.class_names[int(c)]: p for c, p in position.items()}
        nodes = eligible_nodes(hierarchy, self.split, cfg.min_leaves, cfg.max_leaves,
                               leaves=set(names))
        for wn_id, span in nodes.items():
            self._dag_node_ids.append(wn_id)
            self._dag_nodes.append(np.array(sorted(names[leaf] for leaf in span), dtype=np.int64))
        if not self._dag_nodes:
            raise SamplerError(
                f"no internal node of the ImageNet DAG{where} spans between "
                f"min_leaves={cfg.min_leaves} and max_leaves={cfg.max_leaves} eligible leaves"
            )

    def _init_bilevel(self, hierarchy: BiLevelHierarchy, where: str) -> None:
        groups: dict[int, list[int]] = {}
        for p, c in enumerate(self.table.class_ids.tolist()):
            groups.setdefault(hierarchy.superclass_of[c], []).append(p)
        for superclass, members in sorted(groups.items()):
            if len(members) >= self.config.min_ways:
                self._alphabet_ids.append(superclass)
                self._alphabets.append(np.array(members, dtype=np.int64))
        if not self._alphabets:
            raise SamplerError(
                f"no superclass{where} has at least min_ways={self.config.min_ways} eligible "
                f"classes"
            )

    # -- public --------------------------------------------------------------------------

    @property
    def class_ids(self) -> list[int]:
        """Eligible classes of the split (after min_examples_in_class)."""
        return self.table.class_ids.tolist()

    @property
    def eligible_node_ids(self) -> list[str]:
        """WordNet ids of the eligible ImageNet nodes (empty without DAG sampling)."""
        return list(self._dag_node_ids)

    def node_classes(self, wn_id: str) -> list[int]:
        """Class ids under one eligible node."""
        i = self._dag_node_ids.index(wn_id)
        return self.table.class_ids[self._dag_nodes[i]].tolist()

    def episode(self, index: int) -> EpisodeDescription:
        """Episode `index`, computed from (spec, split, config, seed, index) alone."""
        _check_index(index)
        cfg = self.config
        stream_index = index % cfg.num_unique_descriptions if cfg.num_unique_descriptions else index
        rng = episode_rng(self.seed, stream_index, self._labels)
        chosen = self._choose_classes(rng)
        support, query = fill_episode(self.table, chosen, rng, cfg)
        return EpisodeDescription(
            source=self.spec.name,
            split=self.split,
            episode_index=index,
            class_ids=tuple(self.table.class_ids[chosen].tolist()),
            support=support,
            query=query,
        )

    def descriptions(self, start: int, stop: int) -> list[EpisodeDescription]:
        """Episodes start..stop-1."""
        return [self.episode(i) for i in range(start, stop)]

    def __iter__(self) -> Iterator[EpisodeDescription]:
        """Episodes 0, 1, 2, ... without end (a training stream)."""
        index = 0
        while True:
            yield self.episode(index)
            index += 1

    def _choose_classes(self, rng: np.random.Generator) -> np.ndarray:
        cfg = self.config
        kind = self.hierarchy_kind
        if kind != "flat" and cfg.ignore_hierarchy_probability > 0:
            if rng.random() < cfg.ignore_hierarchy_probability:
                kind = "flat"
        if kind == "dag":
            node = self._dag_nodes[min(len(self._dag_nodes) - 1,
                                       int(rng.random() * len(self._dag_nodes)))]
            ways = min(len(node), cfg.max_dag_ways, cfg.max_ways)
            return node[choose_uniform(rng, len(node), ways)]
        if kind == "bilevel":
            group = self._alphabets[min(len(self._alphabets) - 1,
                                        int(rng.random() * len(self._alphabets)))]
            ways = uniform_int(rng.random(), cfg.min_ways, min(cfg.max_ways, len(group)))
            return group[choose_uniform(rng, len(group), ways)]
        n = len(self.table)
        ways = cfg.fixed_ways
        if ways is None:
            ways = uniform_int(rng.random(), cfg.min_ways, min(cfg.max_ways, n))
        return choose_uniform(rng, n, ways)


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise SamplerError(f"seed={seed!r} is invalid: expected an integer >= 0")


def _check_index(index: Any) -> None:
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
        raise SamplerError(f"episode index {index!r} is invalid: expected an integer >= 0")


# ----------------------------------------------------------------------------------------------
# Several sources


class MultiSourceSampler:
    """Episodes from several datasets; each episode's source is chosen uniformly (Meta-Dataset
    section 5, "the choice of the dataset from which to sample the next episode was random
    uniform"), then the episode is that source's episode with the same index."""

    def __init__(
        self,
        specs: Sequence[DatasetSpec],
        split: Split | str,
        config: SamplerConfig = SamplerConfig(),
        seed: int = 0,
    ) -> None:
        if not specs:
            raise SamplerError("multi-source sampling needs at least one dataset spec")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise SamplerError(f"dataset names must be distinct, got {names}")
        _check_seed(seed)
        self.split = Split.parse(split)
        self.samplers = [EpisodeSampler(s, self.split, config, seed) for s in specs]
        self.seed = seed
        self._labels = (stable_hash("multi-source"), *(stable_hash(n) for n in names),
                        stable_hash(self.split.value))

    @property
    def sources(self) -> list[str]:
        return [s.spec.name for s in self.samplers]

    def source_of(self, index: int) -> int:
        """Position in `sources` of episode `index`'s dataset."""
        _check_index(index)
        u = episode_rng(self.seed, index, self._labels).random()
        return min(len(self.samplers) - 1, int(u * len(self.samplers)))

    def episode(self, index: int) -> EpisodeDescription:
        return self.samplers[self.source_of(index)].episode(index)

    def descriptions(self, start: int, stop: int) -> list[EpisodeDescription]:
        return [self.episode(i) for i in range(start, stop)]

    def __iter__(self) -> Iterator[EpisodeDescription]:
        index = 0
        while True:
            yield self.episode(index)
            index += 1


# ----------------------------------------------------------------------------------------------
# Functional entry point

_CACHE: dict[tuple, tuple[DatasetSpec, EpisodeSampler]] = {}
_CACHE_SIZE = 32


def sample_episode(
    spec: DatasetSpec,
    split: Split | str,
    config: SamplerConfig = SamplerConfig(),
    seed: int = 0,
    index: int = 0,
    restrict: RecordMap | None = None,
) -> EpisodeDescription:
    """Episode `index` of (spec, split, config, seed); the same as
    EpisodeSampler(spec, split, config, seed, restrict=restrict).episode(index).

    Without `restrict`, the per-split precomputation is cached per spec object (do not mutate a
    spec after sampling from it)."""
    if restrict is not None:
        return EpisodeSampler(spec, split, config, seed, restrict=restrict).episode(index)
    key = (id(spec), Split.parse(split), config, seed)
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not spec:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        hit = (spec, EpisodeSampler(spec, split, config, seed))
        _CACHE[key] = hit
    return hit[1].episode(index)
