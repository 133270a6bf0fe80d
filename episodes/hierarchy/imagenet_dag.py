"""The ImageNet class DAG and its train / valid / test sub-DAGs (Meta-Dataset section 3.1).

Construction, as the paper and the reference converter describe it:
1. The sampling graph: the ILSVRC-2012 classes (the leaves) and all their WordNet ancestors,
   linked only among themselves; then every node with a single child is removed, its child
   attached to its parents, until no node has one child (such a node could not make an
   episode: it spans the same leaves as its child).
2. Classes: leaves under 'carnivore' (n02075296) are valid, leaves under 'device'
   (n03183080) are test, all other leaves train. (A leaf under both would be alternated
   valid/test in id order; none of the 1,000 is.)
3. Each split's DAG: its leaves and their ancestors in the sampling graph (for valid and test
   only the root and its descendants), linked only among themselves, collapsed again.
The three DAGs share no node. Class ids follow the reference: per split, leaves sorted by
WordNet id, with train < valid < test.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path

from episodes.hierarchy.wordnet import WordNet, WordNetError
from episodes.records.dataset_spec import ALL_SPLITS, DagHierarchy, DagNode, Split

__all__ = [
    "ENTITY",
    "NUM_ILSVRC_2012_CLASSES",
    "TEST_ROOT",
    "VALID_ROOT",
    "ancestor_graph",
    "assign_splits",
    "build_imagenet_hierarchy",
    "classes_in_id_order",
    "collapse_single_children",
    "edges",
    "ilsvrc_2012_wnids",
    "restrict",
    "sampling_graph",
    "split_graph",
    "to_dag_nodes",
    "under_root",
]

ENTITY = "n00001740"
VALID_ROOT = "n02075296"  # carnivore
TEST_ROOT = "n03183080"  # device
NUM_ILSVRC_2012_CLASSES = 1000
_TFDS_LABEL_FILES = (
    "datasets/imagenet2012/labels.txt",
    "image_classification/imagenet2012_labels.txt",
)

Children = dict[str, set[str]]


def ilsvrc_2012_wnids() -> list[str]:
    """The 1,000 ILSVRC-2012 class ids, from tensorflow-datasets' package data (found
    without importing TensorFlow)."""
    spec = importlib.util.find_spec("tensorflow_datasets")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for relative in _TFDS_LABEL_FILES:
            path = Path(root) / relative
            if path.is_file():
                wnids = [line.strip() for line in path.read_text().splitlines() if line.strip()]
                if len(wnids) != NUM_ILSVRC_2012_CLASSES or len(set(wnids)) != len(wnids):
                    raise WordNetError(
                        f"{path}: {len(set(wnids))} distinct ids; expected the "
                        f"{NUM_ILSVRC_2012_CLASSES} ILSVRC-2012 class ids"
                    )
                return wnids
    raise WordNetError(
        "tensorflow-datasets is not installed (or ships no imagenet2012 labels.txt); "
        "it provides the 1,000 ILSVRC-2012 class ids"
    )


def ancestor_graph(wordnet: WordNet, leaves: Iterable[str]) -> Children:
    """Children map of the leaves plus all their WordNet ancestors, links kept inside."""
    leaves = sorted(set(leaves))
    unknown = wordnet.unknown(leaves)
    if unknown:
        raise WordNetError(
            f"{len(unknown)} class ids are not synsets of {wordnet.source or 'WordNet'}, "
            f"e.g. {unknown[:5]}"
        )
    nodes = set(leaves) | wordnet.ancestors(leaves)
    children: Children = {n: set() for n in nodes}
    for node in nodes:
        for parent in wordnet.parents.get(node, ()):
            if parent in nodes:
                children[parent].add(node)
    inner = sorted(leaf for leaf in leaves if children[leaf])
    if inner:
        raise WordNetError(
            f"{len(inner)} classes are ancestors of other classes, e.g. {inner[:3]}; "
            "every class must be a leaf of the DAG"
        )
    return children


def restrict(children: Mapping[str, Iterable[str]], keep: Iterable[str]) -> Children:
    """The sub-graph on `keep`, with links to nodes outside it dropped."""
    keep = set(keep)
    return {n: {c for c in children[n] if c in keep} for n in keep}


def collapse_single_children(children: Mapping[str, Iterable[str]]) -> Children:
    """Remove every node with exactly one child, attaching the child to its parents, until
    none is left (the reference's `collapse`)."""
    children = {n: set(c) for n, c in children.items()}
    parents: Children = {n: set() for n in children}
    for node, kids in children.items():
        for kid in kids:
            parents[kid].add(node)
    changed = True
    while changed:
        changed = False
        for node in sorted(children):
            if node not in children or len(children[node]) != 1:
                continue
            (child,) = children.pop(node)
            above = parents.pop(node)
            for parent in above:
                children[parent].discard(node)
                children[parent].add(child)
            parents[child].discard(node)
            parents[child] |= above
            changed = True
    return children


def sampling_graph(wordnet: WordNet, leaves: Iterable[str]) -> Children:
    """Step 1: the collapsed graph of the classes and their ancestors."""
    return collapse_single_children(ancestor_graph(wordnet, leaves))


def assign_splits(
    wordnet: WordNet,
    leaves: Iterable[str],
    valid_root: str = VALID_ROOT,
    test_root: str = TEST_ROOT,
) -> dict[Split, list[str]]:
    """Step 2: leaves under `valid_root` are valid, under `test_root` test, the rest train."""
    for root in (valid_root, test_root):
        if root not in wordnet:
            raise WordNetError(
                f"split root {root} is not a synset of {wordnet.source or 'WordNet'}"
            )
    if valid_root == test_root:
        raise WordNetError(f"valid and test roots are both {valid_root}")
    split: dict[Split, list[str]] = {s: [] for s in ALL_SPLITS}
    alternate = Split.VALID
    for leaf in sorted(set(leaves)):
        above = wordnet.ancestors([leaf]) | {leaf}
        in_valid, in_test = valid_root in above, test_root in above
        if in_valid and in_test:
            split[alternate].append(leaf)
            alternate = Split.TEST if alternate == Split.VALID else Split.VALID
        else:
            split[Split.VALID if in_valid else Split.TEST if in_test else Split.TRAIN].append(leaf)
    return split


def split_graph(
    graph: Children, leaves: Iterable[str], allowed: Iterable[str] | None = None
) -> Children:
    """Step 3: one split's DAG from the sampling graph: its leaves and their ancestors
    (only those in `allowed`, e.g. a root and its descendants, when given), collapsed again."""
    leaves = set(leaves)
    parents: Children = {n: set() for n in graph}
    for node, kids in graph.items():
        for kid in kids:
            parents[kid].add(node)
    keep: set[str] = set()
    stack = [p for leaf in leaves for p in parents[leaf]]
    while stack:
        node = stack.pop()
        if node not in keep:
            keep.add(node)
            stack.extend(parents[node])
    if allowed is not None:
        keep &= set(allowed)
    return collapse_single_children(restrict(graph, keep | leaves))


def to_dag_nodes(children: Mapping[str, Iterable[str]], wordnet: WordNet) -> dict[str, DagNode]:
    """DagNodes (children and parents sorted by id) of a children map."""
    parents: dict[str, list[str]] = {n: [] for n in children}
    for node, kids in children.items():
        for kid in kids:
            parents[kid].append(node)
    return {
        n: DagNode(
            n, wordnet.words.get(n, ""), tuple(sorted(children[n])), tuple(sorted(parents[n]))
        )
        for n in sorted(children)
    }


def build_imagenet_hierarchy(
    wordnet: WordNet,
    class_wnids: Iterable[str],
    valid_root: str = VALID_ROOT,
    test_root: str = TEST_ROOT,
) -> DagHierarchy:
    """The per-split DAGs of Meta-Dataset's ImageNet hierarchy over `class_wnids`."""
    class_wnids = sorted(set(class_wnids))
    graph = sampling_graph(wordnet, class_wnids)
    splits = assign_splits(wordnet, class_wnids, valid_root, test_root)
    roots = {Split.TRAIN: None, Split.VALID: valid_root, Split.TEST: test_root}
    split_nodes = {}
    for split in ALL_SPLITS:
        if not splits[split]:
            continue
        allowed = None if roots[split] is None else under_root(graph, wordnet, roots[split])
        split_nodes[split] = to_dag_nodes(split_graph(graph, splits[split], allowed), wordnet)
    return DagHierarchy(split_nodes)


def under_root(graph: Children, wordnet: WordNet, root: str) -> set[str]:
    """Nodes of the sampling graph that are `root` or below it. Judged in WordNet, which
    gives the same answer as the graph when the root survived collapsing and still works
    for a class subset whose graph collapsed the root away."""
    return {n for n in graph if n == root or root in wordnet.ancestors([n])}


def classes_in_id_order(hierarchy: DagHierarchy) -> list[tuple[str, Split]]:
    """(wnid, split) of every class in id order: per split, leaves sorted by WordNet id,
    train < valid < test (the reference spec's class ids)."""
    return [(leaf, split) for split in ALL_SPLITS for leaf in hierarchy.leaves(split)]


def edges(hierarchy: DagHierarchy, split: Split | str) -> set[tuple[str, str]]:
    """(parent, child) links of one split's DAG."""
    return {(n.wn_id, c) for n in hierarchy.nodes(split).values() for c in n.children}
