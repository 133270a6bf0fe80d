"""Eligible internal nodes of a split's ImageNet DAG (Meta-Dataset appendix, step 1).

An internal node is eligible when it spans at least min_ways (5 by default; the bound of
Meta-Dataset's sampling.py) and at most 392 leaves of the split's graph; an episode's classes are the leaves of one eligible node, subsampled to 50. The paper
states 392 is the smallest cap for which the eligible nodes together span every leaf;
`smallest_covering_max_leaves` recomputes that number for any split.
"""

from __future__ import annotations

from collections.abc import Collection

from episodes.records.dataset_spec import DagHierarchy, Split

__all__ = ["eligible_nodes", "internal_spans", "smallest_covering_max_leaves", "uncovered_leaves"]


def internal_spans(
    hierarchy: DagHierarchy, split: Split | str, leaves: Collection[str] | None = None
) -> dict[str, frozenset[str]]:
    """Leaves spanned by each internal (non-leaf) node of the split's DAG, optionally
    intersected with `leaves` (e.g. the classes that have enough examples)."""
    split = Split.parse(split)
    nodes = hierarchy.nodes(split)
    spans = hierarchy.spanned_leaves(split)
    keep = None if leaves is None else frozenset(leaves)
    return {
        wn_id: span if keep is None else span & keep
        for wn_id, span in spans.items()
        if not nodes[wn_id].is_leaf
    }


def eligible_nodes(
    hierarchy: DagHierarchy,
    split: Split | str,
    min_leaves: int = 5,
    max_leaves: int = 392,
    leaves: Collection[str] | None = None,
) -> dict[str, frozenset[str]]:
    """Internal nodes spanning between min_leaves and max_leaves leaves, with their leaves,
    sorted by WordNet id."""
    spans = internal_spans(hierarchy, split, leaves)
    return {
        wn_id: span
        for wn_id, span in sorted(spans.items())
        if min_leaves <= len(span) <= max_leaves
    }


def uncovered_leaves(
    hierarchy: DagHierarchy,
    split: Split | str,
    min_leaves: int = 5,
    max_leaves: int = 392,
    leaves: Collection[str] | None = None,
) -> set[str]:
    """Leaves of the split that no eligible node spans (they can never be sampled)."""
    all_leaves = set(hierarchy.leaves(split)) if leaves is None else set(leaves)
    covered: set[str] = set()
    for span in eligible_nodes(hierarchy, split, min_leaves, max_leaves, leaves).values():
        covered |= span
    return all_leaves - covered


def smallest_covering_max_leaves(
    hierarchy: DagHierarchy, split: Split | str, min_leaves: int = 5
) -> int | None:
    """Smallest max_leaves for which the eligible nodes together span every leaf of the split
    (392 for Meta-Dataset's ImageNet train graph), or None if no cap does."""
    spans = internal_spans(hierarchy, split)
    smallest: dict[str, int] = {}
    for span in spans.values():
        if len(span) < min_leaves:
            continue
        for leaf in span:
            if len(span) < smallest.get(leaf, len(span) + 1):
                smallest[leaf] = len(span)
    if len(smallest) < len(hierarchy.leaves(split)):
        return None
    return max(smallest.values()) if smallest else None
