"""Semantic class splits from a class hierarchy (ATG paper §5.3; Meta-Dataset §3).

- Superclass splits: every class follows its superclass (Omniglot alphabets, CIFAR-100
  superclasses as in FC100: 12 / 4 / 4 superclasses).  The superclass assignment is given, taken
  in a given order (Meta-Dataset Omniglot: 25 / 5 / 20 alphabets in spec order), or drawn from a
  seed.
- DAG splits: the leaves reachable from the valid roots form valid, those reachable from the
  test roots form test, all other leaves train (Meta-Dataset ILSVRC: 'carnivore' n02075296 and
  'device' n03183080).

Hierarchies are plain structures ({class: superclass}; {node: [parents]}), or a converted
dataset's bi-level hierarchy or WordNet DAG (`spec_superclasses`, `spec_parents`).
`python -m splits make --method semantic --kind superclass|dag` writes them
(`splits.methods.semantic.method`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from episodes.records.dataset_spec import (
    BiLevelHierarchy,
    DagHierarchy,
    DatasetSpec,
)
from episodes.records.split_file import SPLITS, SplitFile
from episodes.util.cli_errors import UserError

__all__ = [
    "FC100_SOURCE",
    "FC100_SUPERCLASSES",
    "HierarchyError",
    "ILSVRC_ROOTS",
    "OMNIGLOT_COUNTS",
    "dag_split",
    "descendants",
    "leaves_of",
    "spec_parents",
    "spec_superclasses",
    "superclass_split",
]

FC100_SUPERCLASSES = {
    # Oreshkin et al. 2018 (TADAM), CIFAR-100 coarse label indices 1-6, 9, 10, 15, 17-19 /
    # 8, 11, 13, 16 / 0, 7, 12, 14.
    "train": [
        "fish",
        "flowers",
        "food_containers",
        "fruit_and_vegetables",
        "household_electrical_devices",
        "household_furniture",
        "large_man-made_outdoor_things",
        "large_natural_outdoor_scenes",
        "reptiles",
        "trees",
        "vehicles_1",
        "vehicles_2",
    ],
    "valid": [
        "large_carnivores",
        "large_omnivores_and_herbivores",
        "non-insect_invertebrates",
        "small_mammals",
    ],
    "test": ["aquatic_mammals", "insects", "medium_mammals", "people"],
}
FC100_SOURCE = (
    "FC100 (Oreshkin et al. 2018, TADAM): CIFAR-100 superclasses 12 / 4 / 4, "
    "class_split train {1-6, 9, 10, 15, 17-19}, val {8, 11, 13, 16}, "
    "test {0, 7, 12, 14}"
)
ILSVRC_ROOTS = {"valid": ["n02075296"], "test": ["n03183080"]}  # carnivore, device
OMNIGLOT_COUNTS = (25, 5, 20)  # Meta-Dataset: background alphabets minus the 5 smallest / eval


class HierarchyError(UserError, ValueError):
    """A hierarchy or superclass assignment is inconsistent."""


def superclass_split(
    class_to_superclass: Mapping[str, str],
    assignment: Mapping[str, Sequence[str]] | None = None,
    counts: Sequence[int] | None = None,
    seed: int | None = None,
    superclass_order: Sequence[str] | None = None,
    dataset: str = "dataset",
) -> SplitFile:
    """Split classes by superclass.

    Exactly one of: `assignment` ({split: [superclass, ...]}, covering every superclass once);
    `counts` with `seed` (superclasses shuffled from the seed, sorted by name first); `counts`
    with `superclass_order` (contiguous blocks in that order).  Classes keep the mapping's order.
    """
    supers = list(dict.fromkeys(class_to_superclass.values()))
    if assignment is not None:
        chosen = {s: list(assignment.get(s, [])) for s in SPLITS}
        extra = set(assignment) - set(SPLITS)
        if extra:
            raise HierarchyError(f"assignment has unknown splits {sorted(extra)}")
        how = {"assignment": "given"}
    elif counts is not None:
        counts = [int(c) for c in counts]
        if len(counts) != 3 or any(c < 0 for c in counts):
            raise HierarchyError(f"counts must be three non-negative integers, got {counts}")
        if sum(counts) != len(supers):
            raise HierarchyError(
                f"counts {counts} sum to {sum(counts)} but there are {len(supers)} superclasses"
            )
        if superclass_order is not None:
            order = list(superclass_order)
            if sorted(order) != sorted(supers):
                raise HierarchyError("superclass_order must list every superclass exactly once")
            how = {"assignment": "ordered", "counts": counts}
        elif seed is not None:
            ranked = sorted(supers)
            order = [ranked[i] for i in np.random.default_rng(seed).permutation(len(ranked))]
            how = {"assignment": "seeded", "counts": counts, "seed": int(seed)}
        else:
            raise HierarchyError("counts need either a seed or a superclass_order")
        cut = np.cumsum([0, *counts])
        chosen = {s: order[cut[i] : cut[i + 1]] for i, s in enumerate(SPLITS)}
    else:
        raise HierarchyError("give an assignment, or counts with a seed or an order")
    placed = [s for split in SPLITS for s in chosen[split]]
    unknown = sorted(set(placed) - set(supers))
    if unknown:
        raise HierarchyError(f"assignment names unknown superclasses {unknown[:5]}")
    twice = sorted({s for s in placed if placed.count(s) > 1})
    if twice:
        raise HierarchyError(f"superclasses assigned to more than one split: {twice[:5]}")
    missing = [s for s in supers if s not in set(placed)]
    if missing:
        raise HierarchyError(f"superclasses not assigned to any split: {missing[:5]}")
    split_of = {s: split for split in SPLITS for s in chosen[split]}
    lists: dict[str, list[str]] = {s: [] for s in SPLITS}
    for cls, sup in class_to_superclass.items():
        lists[split_of[sup]].append(cls)
    return SplitFile(
        dataset=dataset,
        method="semantic",
        **lists,
        parameters={"hierarchy": "superclass", **how, "superclasses": chosen},
    )


def leaves_of(parents: Mapping[str, Sequence[str]]) -> list[str]:
    """Nodes that are nobody's parent, in first-seen order."""
    nodes = list(dict.fromkeys([*parents, *(p for ps in parents.values() for p in ps)]))
    has_child = {p for ps in parents.values() for p in ps}
    return [n for n in nodes if n not in has_child]


def descendants(parents: Mapping[str, Sequence[str]], roots: Sequence[str]) -> set[str]:
    """All nodes reachable downwards from `roots` (roots included)."""
    children: dict[str, list[str]] = {}
    for node, ps in parents.items():
        for p in ps:
            children.setdefault(p, []).append(node)
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(children.get(node, []))
    return seen


def dag_split(
    parents: Mapping[str, Sequence[str]],
    valid_roots: Sequence[str] = ILSVRC_ROOTS["valid"],
    test_roots: Sequence[str] = ILSVRC_ROOTS["test"],
    leaves: Sequence[str] | None = None,
    dataset: str = "dataset",
) -> SplitFile:
    """Leaves under `valid_roots` -> valid, under `test_roots` -> test, the rest -> train."""
    nodes = set(parents) | {p for ps in parents.values() for p in ps}
    for root in [*valid_roots, *test_roots]:
        if root not in nodes:
            raise HierarchyError(f"root {root!r} is not a node of the hierarchy")
    leaf_list = list(leaves) if leaves is not None else leaves_of(parents)
    unknown = [leaf for leaf in leaf_list if leaf not in nodes]
    if unknown:
        raise HierarchyError(f"leaves not in the hierarchy: {unknown[:5]}")
    under_valid = descendants(parents, valid_roots)
    under_test = descendants(parents, test_roots)
    both = [leaf for leaf in leaf_list if leaf in under_valid and leaf in under_test]
    if both:
        raise HierarchyError(f"leaves under both a valid and a test root: {both[:5]}")
    lists = {
        "train": [x for x in leaf_list if x not in under_valid and x not in under_test],
        "valid": [x for x in leaf_list if x in under_valid],
        "test": [x for x in leaf_list if x in under_test],
    }
    return SplitFile(
        dataset=dataset,
        method="semantic",
        **lists,
        parameters={
            "hierarchy": "dag",
            "valid_roots": list(valid_roots),
            "test_roots": list(test_roots),
        },
    )


def spec_superclasses(spec: DatasetSpec) -> dict[str, str]:
    """{class name: superclass name} in class-id order, from a spec's bi-level hierarchy."""
    hierarchy = spec.hierarchy
    if not isinstance(hierarchy, BiLevelHierarchy):
        raise HierarchyError(
            f"dataset {spec.name!r} has no superclasses (its spec holds "
            f"{type(hierarchy).__name__ if hierarchy else 'no hierarchy'})"
        )
    return {
        name: hierarchy.superclass_names[hierarchy.superclass_of[c]]
        for c, name in enumerate(spec.class_names)
    }


def spec_parents(spec: DatasetSpec) -> tuple[dict[str, list[str]], list[str]]:
    """({node: [parents]}, leaves) of a spec's WordNet DAG: the union of its per-split graphs,
    with the spec's classes as leaves (in class-id order)."""
    hierarchy = spec.hierarchy
    if not isinstance(hierarchy, DagHierarchy):
        raise HierarchyError(
            f"dataset {spec.name!r} has no class DAG (its spec holds "
            f"{type(hierarchy).__name__ if hierarchy else 'no hierarchy'})"
        )
    parents: dict[str, list[str]] = {}
    for nodes in hierarchy.split_nodes.values():
        for wn_id, node in sorted(nodes.items()):
            known = parents.setdefault(wn_id, [])
            known.extend(p for p in node.parents if p not in known)
    return parents, list(spec.class_names)
