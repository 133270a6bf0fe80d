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
from typing import Any

import numpy as np

from episodes.hierarchy.imagenet_nodes import eligible_nodes
from episodes.records.dataset_spec import BiLevelHierarchy, DagHierarchy, DatasetSpec, Split
from episodes.sampling.episode import EpisodeDescription
from episodes.sampling.fixml_records import FixedSupportPool
from episodes.sampling.sampler_config import SamplerConfig, SamplerError
from episodes.sampling.sampler_formulas import (
    SMALL_EPISODE_RECORDS,
    choose_uniform,
    dense_groups,
    draw_groups,
    draw_sparse_groups,
    episode_rng,
    query_per_class,
    shots_per_class,
    stable_hash,
    support_set_size,
    uniform_int,
)

__all__ = [
    "ClassTable",
    "EpisodeSampler",
    "EpisodeStream",
    "MultiSourceSampler",
    "SamplerConfig",
    "SamplerError",
    "build_class_table",
    "check_index",
    "check_record_set_owner",
    "check_seed",
    "fill_episode",
    "fixed_ways_with_hierarchy_message",
    "sample_episode",
    "usable_hierarchy",
]

RecordMap = Mapping[int, Sequence[int]]


# ----------------------------------------------------------------------------------------------
# Per-split precomputation


@dataclass
class ClassTable:
    """The classes an episode may use, with their usable records, as numpy arrays.

    `images[p]` is |Im(c)| in the paper's formulas: the usable records of class_ids[p]. Step 2
    draws positions in range(counts[p]) and `records` maps them to record numbers: the
    identity for an unrestricted class, the p-th listed record for a class given as an
    explicit list (restrict), or the p-th record not skipped for a class with skipped records
    (held out, or, with pool_query="outside_pool", a FIX-ML pool's support, which is
    `pool_support[p]`)."""

    class_ids: np.ndarray
    images: np.ndarray
    counts: np.ndarray
    record_bound: int = 1
    skip_key: np.ndarray | None = None  # per skipping class: sorted (skipped_j - j) + p * stride
    skip_start: np.ndarray | None = None
    listed: np.ndarray | None = None  # per position: uses an explicit list
    list_flat: np.ndarray | None = None
    list_offsets: np.ndarray | None = None
    pool_support: list[tuple[int, ...]] | None = None
    pool_k: int | None = None

    def __len__(self) -> int:
        return len(self.class_ids)

    def position_of(self) -> dict[int, int]:
        return {int(c): p for p, c in enumerate(self.class_ids)}

    def records(self, chosen: np.ndarray, needed: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Record numbers of drawn positions (`needed[i]` positions of class chosen[i], in
        order)."""
        if self.skip_key is None and self.listed is None:
            return positions
        owner = chosen.repeat(needed)
        out = positions
        if self.skip_key is not None:
            # The p-th record not skipped is p + #{j : skipped_j - j <= p}.
            stride = self.record_bound + 1
            found = np.searchsorted(self.skip_key, positions + owner * stride, side="right")
            out = positions + found - self.skip_start[owner]
        if self.listed is not None:
            listed = self.listed[owner]
            if listed.any():
                out = out.copy()
                out[listed] = self.list_flat[self.list_offsets[owner[listed]] + positions[listed]]
        return out


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
    return np.sort(arr)


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
    """Usable records of each class (restrict, else all, minus exclude), classes below
    config.min_examples_in_class dropped, and a clear error for a class too small for the
    episode shape. Only explicit lists and skipped records are stored, never whole classes."""
    restrict_map = _records_of(restrict, "restrict")
    exclude_map = _records_of(exclude, "holdout")
    pool_map = _records_of(pool, "pool")
    pool_k = None if pool is None else int(pool.k)
    if pool is not None and config.shots is not None and config.shots != pool_k:
        raise SamplerError(
            f"shots={config.shots} but the fixed support pool has k={pool_k} examples per class"
        )
    needed = config.min_images_needed(support_fixed=pool_k)
    query_outside_pool = pool is not None and config.pool_query == "outside_pool"
    if pool is not None and not query_outside_pool:
        needed = max(pool_k, config.fixed_query or 1)  # query drawn from all, pool included
    empty = np.zeros(0, dtype=np.int64)
    ids, images, counts, supports = [], [], [], []
    lists: list[np.ndarray | None] = []  # explicit usable records
    skips: list[np.ndarray] = []  # sorted skipped records of classes without a list
    for c in class_ids:
        c = int(c)
        total = int(spec.images_per_class[c])
        listed = (
            _checked_records(spec, c, restrict_map[c], "restrict") if (c in restrict_map) else None
        )
        skipped = (
            _checked_records(spec, c, exclude_map[c], "holdout") if (c in exclude_map) else empty
        )
        if listed is not None:
            listed = listed[~np.isin(listed, skipped)]
            skipped = empty
        usable = len(listed) if listed is not None else total - len(skipped)
        if usable < config.min_examples_in_class:
            continue
        if pool is not None:
            if c not in pool_map:
                raise SamplerError(
                    f"fixed support pool ({pool.dataset}/{pool.split}) has no records for class "
                    f"{c} ({spec.class_names[c]!r}){context}"
                )
            fixed = _checked_records(spec, c, pool_map[c], "pool")
            inside = np.isin(fixed, listed) if listed is not None else ~np.isin(fixed, skipped)
            if len(fixed) != pool_k or not inside.all():
                raise SamplerError(
                    f"fixed support pool: class {c} must list {pool_k} usable records (not "
                    f"held out, within restrict), got {fixed.tolist()}"
                )
            supports.append(tuple(fixed.tolist()))
            if query_outside_pool and listed is not None:
                listed = listed[~np.isin(listed, fixed)]
            elif query_outside_pool:
                skipped = np.union1d(skipped, fixed)
        if usable < needed:
            raise SamplerError(
                f"class {c} ({spec.class_names[c]!r}){context} has {usable} usable images "
                f"but {_shape_words(config, pool_k)} needs at least {needed}; lower shots/query "
                f"or set min_examples_in_class={needed} to skip such classes"
            )
        ids.append(c)
        images.append(usable)
        counts.append(len(listed) if listed is not None else total - len(skipped))
        lists.append(listed)
        skips.append(skipped)
    bound = max([int(spec.images_per_class[c]) for c in ids], default=1)
    table = ClassTable(
        class_ids=np.asarray(ids, dtype=np.int64),
        images=np.asarray(images, dtype=np.int64),
        counts=np.asarray(counts, dtype=np.int64),
        record_bound=bound,
        pool_support=supports if pool is not None else None,
        pool_k=pool_k,
    )
    if any(len(s) for s in skips):
        stride = bound + 1
        keys = [s - np.arange(len(s)) + p * stride for p, s in enumerate(skips)]
        table.skip_key = np.concatenate(keys)
        table.skip_start = np.concatenate([[0], np.cumsum([len(s) for s in skips])[:-1]])
        table.skip_start = table.skip_start.astype(np.int64)
    if any(x is not None for x in lists):
        table.listed = np.array([x is not None for x in lists])
        sizes = [0 if x is None else len(x) for x in lists]
        table.list_offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        table.list_flat = np.concatenate([x for x in lists if x is not None])
    return table


def _shape_words(config: SamplerConfig, pool_k: int | None) -> str:
    shots = pool_k if pool_k is not None else config.fixed_shots
    query = config.fixed_query
    parts = [
        f"shots={shots}" if shots is not None else "variable shots (>= 1)",
        f"query={query}" if query is not None else "variable query (>= 1)",
    ]
    return " + ".join(parts)


# ----------------------------------------------------------------------------------------------
# Step 2: query size, support size, shots, records


def fill_episode(
    table: ClassTable, chosen: np.ndarray, rng: np.random.Generator, config: SamplerConfig
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """Step 2 for the chosen table positions: query size, support size and shots, then the
    records, uniformly without replacement within each class. Returns (support, query) record
    numbers per class, each sorted."""
    images = table.images[chosen]
    counts = table.counts[chosen]
    n = len(chosen)
    fixed_query = config.fixed_query
    if table.pool_support is not None:
        # FIX-ML: support is the pool; query as without a pool, from all usable records
        # (pool_query="all") or bounded by the records outside the pool ("outside_pool").
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
            q = min(config.max_query_per_class, int(images.min()) - fixed_shots)
        else:
            q = query_per_class(images, config.max_query_per_class)
        if fixed_shots is not None:
            shots = np.full(n, fixed_shots, dtype=np.int64)
        else:
            remaining = images - q
            beta = 1.0 - rng.random()  # uniform in (0, 1]
            size = support_set_size(
                remaining, beta, config.max_support_per_class, config.max_support_size
            )
            lo, hi = config.min_log_weight, config.max_log_weight
            log_weights = rng.random(n) * (hi - lo) + lo  # alpha_c uniform in [lo, hi)
            shots = shots_per_class(images, remaining, size, log_weights)
    needed = shots + q
    plain = table.skip_key is None and table.listed is None and table.pool_support is None
    if plain and needed.sum() <= SMALL_EPISODE_RECORDS and not dense_groups(counts, needed).any():
        # Small episodes (5-way 5-shot 15-query...) whose positions are record numbers: the
        # same draws as below, split and sorted per class in Python, faster at this size.
        groups = draw_sparse_groups(rng, counts, needed)
        cuts = shots.tolist()
        support = tuple([tuple(sorted(g[:k])) for g, k in zip(groups, cuts)])
        query = tuple([tuple(sorted(g[k:])) for g, k in zip(groups, cuts)])
        return support, query
    positions = draw_groups(rng, counts, needed)
    records = table.records(chosen, needed, positions)
    # Sort within each (class, support | query) segment: segment * bound + record.
    lengths = np.empty(2 * n, dtype=np.int64)
    lengths[0::2] = shots
    lengths[1::2] = q
    segment = (np.arange(2 * n, dtype=np.int64) * table.record_bound).repeat(lengths)
    keyed = segment + records
    keyed.sort()
    flat = (keyed - segment).tolist()
    ends = lengths.cumsum().tolist()
    parts = [tuple(flat[a:b]) for a, b in zip([0, *ends[:-1]], ends)]
    query = tuple(parts[1::2])
    if table.pool_support is not None:
        support = tuple([table.pool_support[p] for p in chosen.tolist()])
    else:
        support = tuple(parts[0::2])
    return support, query


# ----------------------------------------------------------------------------------------------
# Samplers


class EpisodeStream:
    """An endless stream of episodes addressed by index; subclasses define `episode(i)`."""

    def episode(self, index: int) -> EpisodeDescription:
        raise NotImplementedError

    def descriptions(self, start: int, stop: int) -> list[EpisodeDescription]:
        """Episodes start..stop-1."""
        return [self.episode(i) for i in range(start, stop)]

    def __iter__(self) -> Iterator[EpisodeDescription]:
        """Episodes 0, 1, 2, ... without end (a training stream)."""
        index = 0
        while True:
            yield self.episode(index)
            index += 1


class EpisodeSampler(EpisodeStream):
    """Episodes of one dataset split. Validates everything once, then `.episode(i)` is cheap.

    pool: a FIX-ML FixedSupportPool (support of every class is its pool; query drawn from all
    of the class's records, or from the others with config.pool_query="outside_pool"). holdout: per class record numbers never used (a BaseHoldout or a
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
        check_seed(seed)
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
        check_record_set_owner(holdout, spec, self.split, "holdout")
        split_classes = spec.classes(self.split)
        if not split_classes:
            raise SamplerError(f"split {self.split.value} of {spec.name!r} has no classes")
        self.table = build_class_table(
            spec,
            split_classes,
            config,
            restrict=restrict,
            exclude=holdout,
            pool=pool,
            context=where,
        )
        n = len(self.table)
        self._labels = (stable_hash(spec.name), stable_hash(self.split.value))
        self._dag_nodes: list[np.ndarray] = []
        self._dag_node_ids: list[str] = []
        self._alphabets: list[np.ndarray] = []
        self._alphabet_ids: list[int] = []
        # A split file may leave the hierarchy out of some splits (DatasetSpec.with_splits).
        hierarchy = usable_hierarchy(spec, config, self.split)
        if hierarchy is not None and config.fixed_ways is not None:
            raise SamplerError(fixed_ways_with_hierarchy_message(config, hierarchy, where))
        if hierarchy == "dag":
            self._init_dag(spec.hierarchy, where)
        elif hierarchy == "bilevel":
            self._init_bilevel(spec.hierarchy, where)
        self.hierarchy_kind = "dag" if self._dag_nodes else "bilevel" if self._alphabets else "flat"
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
        nodes = eligible_nodes(
            hierarchy, self.split, cfg.dag_min_leaves, cfg.max_leaves, leaves=set(names)
        )
        for wn_id, span in nodes.items():
            self._dag_node_ids.append(wn_id)
            self._dag_nodes.append(np.array(sorted(names[leaf] for leaf in span), dtype=np.int64))
        if not self._dag_nodes:
            raise SamplerError(
                f"no internal node of the ImageNet DAG{where} spans between "
                f"{cfg.dag_min_leaves} (min_ways) and max_leaves={cfg.max_leaves} eligible leaves"
            )

    def _init_bilevel(self, hierarchy: BiLevelHierarchy, where: str) -> None:
        """One group per superclass of the split. Like Meta-Dataset's sampler, a superclass
        with fewer than min_ways classes is an error, never silently left out."""
        groups: dict[int, list[int]] = {s: [] for s in hierarchy.superclasses(self.split)}
        for p, c in enumerate(self.table.class_ids.tolist()):
            groups.setdefault(hierarchy.superclass_of[c], []).append(p)
        small = [(s, len(m)) for s, m in sorted(groups.items()) if len(m) < self.config.min_ways]
        if small:
            s, size = small[0]
            more = f" (and {len(small) - 1} more)" if len(small) > 1 else ""
            raise SamplerError(
                f"superclass {hierarchy.superclass_names[s]!r}{where} has {size} eligible "
                f"classes, fewer than min_ways={self.config.min_ways}{more}: lower min_ways or "
                f"set use_bilevel_hierarchy=False"
            )
        for superclass, members in sorted(groups.items()):
            self._alphabet_ids.append(superclass)
            self._alphabets.append(np.array(members, dtype=np.int64))

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
        check_index(index)
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

    def _choose_classes(self, rng: np.random.Generator) -> np.ndarray:
        cfg = self.config
        kind = self.hierarchy_kind
        if kind != "flat" and cfg.ignore_hierarchy_probability > 0:
            if rng.random() < cfg.ignore_hierarchy_probability:
                kind = "flat"
        if kind == "dag":
            node = self._dag_nodes[
                min(len(self._dag_nodes) - 1, int(rng.random() * len(self._dag_nodes)))
            ]
            ways = min(len(node), cfg.max_dag_ways, cfg.max_ways)
            return node[choose_uniform(rng, len(node), ways)]
        if kind == "bilevel":
            group = self._alphabets[
                min(len(self._alphabets) - 1, int(rng.random() * len(self._alphabets)))
            ]
            ways = uniform_int(rng.random(), cfg.min_ways, min(cfg.max_ways, len(group)))
            return group[choose_uniform(rng, len(group), ways)]
        n = len(self.table)
        ways = cfg.fixed_ways
        if ways is None:
            ways = uniform_int(rng.random(), cfg.min_ways, min(cfg.max_ways, n))
        return choose_uniform(rng, n, ways)


def usable_hierarchy(spec: DatasetSpec, config: SamplerConfig, split: str) -> str | None:
    """ "dag" or "bilevel" when the spec has that class hierarchy for `split` and the config uses
    it (its use_dag_hierarchy / use_bilevel_hierarchy), else None."""
    hierarchy = spec.hierarchy
    if (
        config.use_dag_hierarchy
        and isinstance(hierarchy, DagHierarchy)
        and split in hierarchy.split_nodes
    ):
        return "dag"
    if (
        config.use_bilevel_hierarchy
        and isinstance(hierarchy, BiLevelHierarchy)
        and split in (hierarchy.superclass_splits or {})
    ):
        return "bilevel"
    return None


def fixed_ways_with_hierarchy_message(config: SamplerConfig, hierarchy: str, where: str) -> str:
    """The error for fixed ways asked of a dataset whose class hierarchy is in use. Meta-Dataset's
    EpisodeDescriptionSampler (data/sampling.py) raises '"use_dag_hierarchy" is incompatible with
    "num_ways"' (and the same for use_bilevel_hierarchy) instead of dropping the hierarchy; its
    fixed-ways setups set ignore_dag_ontology / ignore_bilevel_ontology, the options named here."""
    option, what = {
        "dag": ("use_dag_hierarchy", "the ImageNet DAG"),
        "bilevel": ("use_bilevel_hierarchy", "the superclasses (alphabets)"),
    }[hierarchy]
    fixed = f"ways={config.fixed_ways}" + (" (mode fixed)" if config.ways is None else "")
    flag = "--no-" + option.replace("_", "-")
    return (
        f"{fixed} cannot be drawn with {what}{where}: fixed ways and a class hierarchy are "
        f"incompatible, as in Meta-Dataset's sampler; pass {option}=False ({flag}) to draw "
        f"the classes uniformly over the split, or leave the ways variable to use the hierarchy"
    )


def check_record_set_owner(value: Any, spec: DatasetSpec, split: Split, name: str) -> None:
    """A BaseHoldout (or anything with dataset/split attributes) must be for this split."""
    dataset, owner_split = getattr(value, "dataset", None), getattr(value, "split", None)
    if dataset is None or owner_split is None:
        return
    if dataset != spec.name or Split.parse(owner_split) != split:
        raise SamplerError(
            f"{name} is for {dataset}/{Split.parse(owner_split).value}, "
            f"not {spec.name}/{split.value}"
        )


def check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise SamplerError(f"seed={seed!r} is invalid: expected an integer >= 0")


def check_index(index: Any) -> None:
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
        raise SamplerError(f"episode index {index!r} is invalid: expected an integer >= 0")


# ----------------------------------------------------------------------------------------------
# Several sources


class MultiSourceSampler(EpisodeStream):
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
        check_seed(seed)
        self.split = Split.parse(split)
        self.samplers = [EpisodeSampler(s, self.split, config, seed) for s in specs]
        self.seed = seed
        self._labels = (
            stable_hash("multi-source"),
            *(stable_hash(n) for n in names),
            stable_hash(self.split.value),
        )

    @property
    def sources(self) -> list[str]:
        return [s.spec.name for s in self.samplers]

    def source_of(self, index: int) -> int:
        """Position in `sources` of episode `index`'s dataset."""
        check_index(index)
        u = episode_rng(self.seed, index, self._labels).random()
        return min(len(self.samplers) - 1, int(u * len(self.samplers)))

    def episode(self, index: int) -> EpisodeDescription:
        return self.samplers[self.source_of(index)].episode(index)


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
