"""Semantic class splits from a class hierarchy (ATG paper §5.3; Meta-Dataset §3).

- Superclass splits: every class follows its superclass (Omniglot alphabets, CIFAR-100
  superclasses as in FC100: 12 / 4 / 4 superclasses).  The superclass assignment is given, taken
  in a given order (Meta-Dataset Omniglot: 25 / 5 / 20 alphabets in spec order), or drawn from a
  seed.
- DAG splits: the leaves reachable from the valid roots form valid, those reachable from the
  test roots form test, all other leaves train (Meta-Dataset ILSVRC: 'carnivore' n02075296 and
  'device' n03183080).

Hierarchies are plain structures ({class: superclass}; {node: [parents]}); `--hierarchy` also
takes a converted dataset folder or its `dataset_spec.json`, whose bi-level hierarchy or WordNet
DAG provides them (`spec_superclasses`, `spec_parents`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from episodes.records.dataset_spec import (
    BiLevelHierarchy,
    DagHierarchy,
    DatasetSpec,
    SpecError,
    load_spec,
)
from episodes.records.index_conventions import CIFAR100_SUPERCLASS_OF
from episodes.records.split_file import SPLITS, SplitFile

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


class HierarchyError(ValueError):
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


def _read_hierarchy(path: str) -> DatasetSpec | object:
    """A dataset spec (folder or spec JSON, through load_spec) or a plain hierarchy JSON."""
    try:
        return load_spec(path)
    except SpecError as err:
        if Path(path).is_dir():
            raise HierarchyError(str(err)) from None
        data = _load_json(path)
        if isinstance(data, dict) and ("__class__" in data or "format" in data):
            raise HierarchyError(str(err)) from None  # a spec, but a broken one
        return data


def _load_json(path: str) -> object:
    p = Path(path)
    if not p.is_file():
        raise HierarchyError(f"hierarchy file {p} does not exist")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise HierarchyError(f"{p}: not valid JSON ({err})") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m splits.semantic", description="Write a class split from a hierarchy."
    )
    sub = parser.add_subparsers(dest="kind", required=True)
    sup = sub.add_parser("superclass", help="classes follow their superclass")
    sup.add_argument(
        "--hierarchy",
        required=True,
        help="dataset folder or dataset_spec.json with superclasses, JSON "
        '{"class": "superclass", ...}, or builtin:cifar100',
    )
    group = sup.add_mutually_exclusive_group(required=True)
    group.add_argument("--assignment", help='JSON {"train": [superclass, ...], ...}')
    group.add_argument("--counts", type=int, nargs=3, metavar=("TRAIN", "VALID", "TEST"))
    group.add_argument(
        "--preset",
        choices=["fc100"],
        help="fc100: Oreshkin et al.'s CIFAR-100 superclasses (12/4/4)",
    )
    sup.add_argument("--seed", type=int, help="with --counts: seeded choice of superclasses")
    sup.add_argument(
        "--ordered",
        action="store_true",
        help="with --counts: contiguous blocks in the hierarchy's superclass order",
    )
    dag = sub.add_parser("dag", help="leaves under given roots form valid / test")
    dag.add_argument(
        "--hierarchy",
        required=True,
        help="dataset folder or dataset_spec.json with a WordNet DAG, JSON "
        '{"parents": {node: [parents]}, "leaves": [...]} or a parent map',
    )
    dag.add_argument("--valid-roots", nargs="+", default=ILSVRC_ROOTS["valid"])
    dag.add_argument("--test-roots", nargs="+", default=ILSVRC_ROOTS["test"])
    for p in (sup, dag):
        p.add_argument("--dataset", help="dataset name (default: the spec's, else 'dataset')")
        p.add_argument("--output", required=True)
        p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)
    try:
        if Path(args.output).exists() and not args.overwrite:
            raise HierarchyError(f"{args.output} exists; pass --overwrite to replace it")
        if args.hierarchy == "builtin:cifar100":
            data: object = dict(CIFAR100_SUPERCLASS_OF)
        else:
            data = _read_hierarchy(args.hierarchy)
        spec = data if isinstance(data, DatasetSpec) else None
        if args.dataset is None:
            args.dataset = spec.name if spec is not None else "dataset"
        if args.kind == "superclass":
            if spec is not None:
                mapping = spec_superclasses(spec)
            else:
                mapping = data.get("class_to_superclass", data) if isinstance(data, dict) else None
            if not isinstance(mapping, dict) or not all(
                isinstance(v, str) for v in mapping.values()
            ):
                raise HierarchyError(f"{args.hierarchy}: expected a class -> superclass object")
            if args.preset == "fc100":
                split = superclass_split(
                    mapping, assignment=FC100_SUPERCLASSES, dataset=args.dataset
                )
                split.source = FC100_SOURCE
            elif args.assignment:
                given = _load_json(args.assignment)
                if not isinstance(given, dict):
                    raise HierarchyError(f"{args.assignment}: expected {{split: [superclass]}}")
                split = superclass_split(mapping, assignment=given, dataset=args.dataset)
            else:
                order = list(dict.fromkeys(mapping.values())) if args.ordered else None
                if order is None and args.seed is None:
                    raise HierarchyError("--counts needs --seed or --ordered")
                split = superclass_split(
                    mapping,
                    counts=args.counts,
                    seed=args.seed,
                    superclass_order=order,
                    dataset=args.dataset,
                )
        elif spec is not None:
            parents, leaves = spec_parents(spec)
            split = dag_split(parents, args.valid_roots, args.test_roots, leaves, args.dataset)
        else:
            if not isinstance(data, dict):
                raise HierarchyError(f"{args.hierarchy}: expected a JSON object")
            parents = data.get("parents", data)
            leaves = data.get("leaves") if "parents" in data else None
            split = dag_split(parents, args.valid_roots, args.test_roots, leaves, args.dataset)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    split.save(args.output)
    sizes = split.sizes()
    print(f"semantic split: {sizes['train']}/{sizes['valid']}/{sizes['test']} -> {args.output}")
    return 0


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
