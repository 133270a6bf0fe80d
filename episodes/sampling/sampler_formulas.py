"""Meta-Dataset's episode-size formulas and vectorised draws without replacement.

Formulas: Triantafillou et al., appendix "Details of Meta-Dataset's sampling algorithm", step 2
(a) query size, (b) support size, (c) shots per class. All randomness enters as explicit
arguments or through `numpy.random.Generator.random`, whose stream numpy keeps stable across
platforms, so an episode is the same on every machine.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

__all__ = [
    "DENSE_MAX_COUNT",
    "DENSE_MAX_RATIO",
    "SMALL_EPISODE_RECORDS",
    "choose_uniform",
    "dense_groups",
    "draw_distinct",
    "draw_groups",
    "draw_sparse_groups",
    "episode_rng",
    "query_per_class",
    "ragged_arange",
    "shots_per_class",
    "stable_hash",
    "support_set_size",
    "uint32_words",
    "uniform_int",
]

# A class is drawn densely (random keys over all its records) when it is small or when the
# episode needs a large fraction of it; otherwise by rejection of repeated uniform draws.
DENSE_MAX_COUNT = 64
DENSE_MAX_RATIO = 4
# Episodes needing at most this many records in all are drawn in Python (draw_sparse_groups):
# below it, numpy's per-call overhead costs more than the loop.
SMALL_EPISODE_RECORDS = 128


def stable_hash(label: str) -> int:
    """64-bit hash of a string, identical on every machine and Python run (unlike hash())."""
    return int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "little")


def uint32_words(value: int) -> list[int]:
    """A non-negative int as SeedSequence reads it: little-endian 32-bit words (0 is [0])."""
    return [(value >> (32 * k)) & 0xFFFFFFFF for k in range(max(1, -(-value.bit_length() // 32)))]


@functools.lru_cache(maxsize=256)
def _label_words(labels: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(word for label in labels for word in uint32_words(label))


def episode_rng(seed: int, index: int, labels: tuple[int, ...]) -> np.random.Generator:
    """Generator of one episode from SeedSequence entropy [seed, index, *labels].

    SeedSequence turns a sequence of ints into the concatenation of their 32-bit words, so the
    words are handed over as one uint32 array (the labels' words computed once): the same
    generator as `default_rng([seed, index, *labels])`, without converting every int anew."""
    words = [*uint32_words(int(seed)), *uint32_words(int(index)), *_label_words(labels)]
    return np.random.default_rng(np.array(words, dtype=np.uint32))


def query_per_class(images: np.ndarray, max_query: int = 10) -> int:
    """Step 2a: q = min{max_query, min_c floor(0.5 |Im(c)|)}."""
    return min(max_query, int(np.asarray(images).min()) // 2)


def support_set_size(
    remaining: np.ndarray, beta: float, max_per_class: int = 100, max_total: int = 500
) -> int:
    """Step 2b: |S| = min{max_total, sum_c ceil(beta * min{max_per_class, |Im(c)| - q})}.

    `remaining` is |Im(c)| - q per class and beta lies in (0, 1]."""
    contributions = np.ceil(beta * np.minimum(max_per_class, remaining))
    return min(max_total, int(contributions.sum()))


def shots_per_class(
    images: np.ndarray, remaining: np.ndarray, support_size: int, log_weights: np.ndarray
) -> np.ndarray:
    """Step 2c: R_c = exp(alpha_c)|Im(c)| / sum_c' exp(alpha_c')|Im(c')|,
    k_c = min{floor(R_c (|S| - |C|)) + 1, |Im(c)| - q}."""
    weighted = np.exp(log_weights) * images
    proportions = weighted / weighted.sum()
    desired = np.floor(proportions * (support_size - len(weighted))).astype(np.int64) + 1
    return np.minimum(desired, remaining)


def uniform_int(u: float, low: int, high: int) -> int:
    """An integer uniform in [low, high] from one uniform u in [0, 1)."""
    return min(high, low + int(u * (high - low + 1)))


def ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + n) for each (s, n)."""
    ends = lengths.cumsum()
    return np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) + (
        starts - ends + lengths
    ).repeat(lengths)


def draw_distinct(rng: np.random.Generator, counts: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """For each group g, needed[g] distinct positions drawn uniformly from range(counts[g]),
    in random order; returned concatenated group by group.

    Small groups are drawn by sorting random keys (a uniform random permutation); large ones by
    uniform draws with repeats rejected, which yields the same distribution as drawing without
    replacement, in a few vectorised numpy calls for all groups at once."""
    counts = np.asarray(counts, dtype=np.int64)
    needed = np.asarray(needed, dtype=np.int64)
    if (needed > counts).any() or (needed < 0).any():
        bad = int(np.flatnonzero((needed > counts) | (needed < 0))[0])
        raise ValueError(f"cannot draw {int(needed[bad])} distinct items out of {int(counts[bad])}")
    return draw_groups(rng, counts, needed)


def dense_groups(counts: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """Which groups are drawn densely (random keys over all items) rather than sparsely."""
    return (counts <= DENSE_MAX_COUNT) | (counts <= DENSE_MAX_RATIO * needed)


def draw_groups(rng: np.random.Generator, counts: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """draw_distinct without input checks (int64 arrays, 0 <= needed <= counts)."""
    dense = dense_groups(counts, needed)
    if dense.all():
        return _draw_dense(rng, counts, needed)
    if not dense.any():
        return _draw_sparse(rng, counts, needed)
    out = np.empty(int(needed.sum()), dtype=np.int64)
    starts = needed.cumsum() - needed
    for mask, draw in ((dense, _draw_dense), (~dense, _draw_sparse)):
        out[ragged_arange(starts[mask], needed[mask])] = draw(rng, counts[mask], needed[mask])
    return out


def choose_uniform(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    """m distinct positions out of range(n), uniformly, in random order."""
    if n <= DENSE_MAX_COUNT or n <= DENSE_MAX_RATIO * m:
        return rng.random(n).argsort()[:m]
    extra = 2 * m * m // n + 4
    while True:
        drawn = dict.fromkeys((rng.random(m + extra) * n).astype(np.int64).tolist())
        if len(drawn) >= m:
            return np.fromiter(drawn, dtype=np.int64, count=m)
        extra = 2 * extra + m


def _draw_dense(rng: np.random.Generator, counts: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """Random keys for every item, sorted within each group: a random permutation per group."""
    keys = rng.random(int(counts.sum()))
    keys += np.arange(len(counts), dtype=np.float64).repeat(counts)
    order = keys.argsort()
    starts = counts.cumsum() - counts
    return order[ragged_arange(starts, needed)] - starts.repeat(needed)


def draw_sparse_groups(
    rng: np.random.Generator, counts: np.ndarray, needed: np.ndarray
) -> list[list[int]]:
    """Per group g, the first needed[g] distinct values of uniform draws from range(counts[g]),
    in draw order: drawing without replacement by rejecting repeats.

    Expected repeats among n draws from N values are about n^2 / (2N): each group draws four
    times that plus a constant more than it needs; in the rare case a group is left short,
    everything is redrawn with more. One `Generator.random` call per attempt for all groups;
    repeats are dropped by `dict.fromkeys`, which keeps first occurrences in order. The same
    draws and result as `_draw_sparse` (vectorised, faster beyond ~150 values in all)."""
    extra = (2 * needed * needed) // counts + 4
    needed_list = needed.tolist()
    while True:
        draws = needed + extra
        # floor(u * n) < n for every double u < 1, so values stay in range(n).
        values = (rng.random(int(draws.sum())) * counts.repeat(draws)).astype(np.int64).tolist()
        groups: list[list[int]] = []
        start = 0
        for count, want in zip(draws.tolist(), needed_list):
            distinct = list(dict.fromkeys(values[start : start + count]))
            if len(distinct) < want:
                break
            groups.append(distinct[:want])
            start += count
        else:
            return groups
        extra = 2 * extra + needed


def _draw_sparse(rng: np.random.Generator, counts: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """Uniform draws with replacement, keeping the first `needed` distinct values per group."""
    # Expected repeats among n draws from N values are about n^2 / (2N): draw four times that
    # plus a constant; in the rare case a group is left short, redraw everything with more.
    extra = (2 * needed * needed) // counts + 4
    value_base = counts.cumsum() - counts
    while True:
        draws = needed + extra
        total = int(draws.sum())
        # floor(u * n) < n for every double u < 1, so values stay in range(n).
        values = (rng.random(total) * counts.repeat(draws)).astype(np.int64)
        values += value_base.repeat(draws)  # disjoint value ranges per group
        order = values.argsort(kind="stable")
        ordered = values[order]
        is_new = np.empty(total, dtype=bool)
        is_new[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=is_new[1:])
        first = np.empty(total, dtype=bool)
        first[order] = is_new  # first occurrence of its value, in draw order
        seen = first.cumsum()
        at_end = seen[draws.cumsum() - 1]
        before = np.empty_like(at_end)
        before[0] = 0
        before[1:] = at_end[:-1]
        if (at_end - before >= needed).all():
            break
        extra = 2 * extra + needed
    keep = first & (seen <= (before + needed).repeat(draws))
    return values[keep] - value_base.repeat(needed)
