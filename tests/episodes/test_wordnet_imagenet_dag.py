"""The ImageNet DAG from WordNet 3.0 against the reference ILSVRC-2012 spec, and its rules."""

from __future__ import annotations

import pytest

from episodes.hierarchy.imagenet_dag import (
    ENTITY,
    TEST_ROOT,
    VALID_ROOT,
    assign_splits,
    build_imagenet_hierarchy,
    classes_in_id_order,
    collapse_single_children,
    edges,
    ilsvrc_2012_wnids,
    split_graph,
)
from episodes.hierarchy.wordnet import (
    WordNet,
    WordNetError,
    read_imagenet_is_a,
    read_wordnet,
    write_imagenet_is_a,
)
from episodes.records.dataset_spec import ALL_SPLITS, DagHierarchy, Split, load_spec


@pytest.fixture(scope="module")
def reference(reference_data):
    return load_spec(reference_data / "dataset_specs" / "ilsvrc_2012_dataset_spec.json")


@pytest.fixture(scope="module")
def ours() -> DagHierarchy:
    return build_imagenet_hierarchy(read_wordnet(), ilsvrc_2012_wnids())


def test_tfds_class_ids_are_the_reference_classes(reference):
    wnids = ilsvrc_2012_wnids()
    assert len(wnids) == len(set(wnids)) == 1000
    assert set(wnids) == set(reference.class_names)


def test_split_counts_match_paper_and_reference(ours, reference):
    # Meta-Dataset section 3.1: 712 / 158 / 130 classes.
    expected = {Split.TRAIN: (1011, 712), Split.VALID: (200, 158), Split.TEST: (180, 130)}
    for split in ALL_SPLITS:
        ref = reference.hierarchy
        assert (len(ref.nodes(split)), len(ref.leaves(split))) == expected[split]
        assert (len(ours.nodes(split)), len(ours.leaves(split))) == expected[split]


def test_node_edge_and_word_sets_equal_reference(ours, reference):
    ref = reference.hierarchy
    for split in ALL_SPLITS:
        assert set(ours.nodes(split)) == set(ref.nodes(split)), split
        assert edges(ours, split) == edges(ref, split), split
        assert ours.leaves(split) == ref.leaves(split)
        words = {n: node.words for n, node in ours.nodes(split).items()}
        assert words == {n: node.words for n, node in ref.nodes(split).items()}, split


def test_class_ids_match_reference(ours, reference):
    order = classes_in_id_order(ours)
    assert [wnid for wnid, _ in order] == reference.class_names
    for split in ALL_SPLITS:
        ids = [i for i, (_, s) in enumerate(order) if s == split]
        assert ids == reference.classes(split)


def test_split_dag_structure(ours):
    assert ours.roots(Split.TRAIN) == [ENTITY]
    assert ours.roots(Split.VALID) == [VALID_ROOT]
    assert ours.roots(Split.TEST) == [TEST_ROOT]
    node_sets = [set(ours.nodes(s)) for s in ALL_SPLITS]
    assert not (
        node_sets[0] & node_sets[1] or node_sets[0] & node_sets[2] or node_sets[1] & node_sets[2]
    )
    for split in ALL_SPLITS:
        nodes = ours.nodes(split)
        # Collapsed: no internal node has a single child (it could not make an episode).
        assert all(len(n.children) != 1 for n in nodes.values())
        for node in nodes.values():
            assert all(node.wn_id in nodes[c].parents for c in node.children)
        spans = ours.spanned_leaves(split)
        assert all(spans[r] == frozenset(ours.leaves(split)) for r in ours.roots(split))


def test_imagenet_is_a_files_give_the_same_dag(tmp_path, ours):
    wordnet = read_wordnet()
    is_a, words = tmp_path / "wordnet.is_a.txt", tmp_path / "words.txt"
    write_imagenet_is_a(wordnet, is_a, words)
    from_files = build_imagenet_hierarchy(read_imagenet_is_a(is_a, words), ilsvrc_2012_wnids())
    for split in ALL_SPLITS:
        assert from_files.nodes(split) == ours.nodes(split)


def test_collapse_removes_single_child_chains():
    # r -> a -> b -> {x, y};  r -> z ; a and the chain collapse, r keeps {b, z}.
    children = {"r": {"a", "z"}, "a": {"b"}, "b": {"x", "y"}, "x": set(), "y": set(), "z": set()}
    assert collapse_single_children(children) == {
        "r": {"b", "z"},
        "b": {"x", "y"},
        "x": set(),
        "y": set(),
        "z": set(),
    }
    # A node whose two links lead to the same child after collapsing is collapsed too.
    diamond = {"r": {"a", "c"}, "a": {"c"}, "c": {"x", "y"}, "x": set(), "y": set()}
    assert collapse_single_children(diamond) == {"c": {"x", "y"}, "x": set(), "y": set()}


def test_split_graph_restricted_to_root():
    graph = {"r": {"p", "q"}, "p": {"x", "y"}, "q": {"y", "z"}, "x": set(), "y": set(), "z": set()}
    # Ancestors outside the allowed set (r, q) are dropped.
    assert split_graph(graph, ["x", "y"], allowed={"p", "x", "y"}) == {
        "p": {"x", "y"},
        "x": set(),
        "y": set(),
    }
    # p keeps only y and collapses: y hangs from r directly (no transitive reduction, as the
    # reference).
    assert split_graph(graph, ["y", "z"]) == {
        "r": {"q", "y"},
        "q": {"y", "z"},
        "y": set(),
        "z": set(),
    }


def test_subset_of_classes_keeps_the_split_rule():
    wordnet = read_wordnet()
    subset = ["n01440764", "n01443537", "n02085620", "n02123045", "n03180011", "n04090263"]
    dag = build_imagenet_hierarchy(wordnet, subset)
    assert dag.leaves(Split.TRAIN) == ["n01440764", "n01443537"]
    assert dag.leaves(Split.VALID) == ["n02085620", "n02123045"]
    assert dag.leaves(Split.TEST) == ["n03180011", "n04090263"]
    assert dag.roots(Split.VALID) == [VALID_ROOT]
    splits = assign_splits(wordnet, subset)
    assert [len(splits[s]) for s in ALL_SPLITS] == [2, 2, 2]


def test_bad_class_ids_are_named():
    wordnet = read_wordnet()
    with pytest.raises(WordNetError, match=r"1 class ids are not synsets .*n99999999"):
        build_imagenet_hierarchy(wordnet, ["n01440764", "n99999999"])
    # A class that is an ancestor of another class cannot be a leaf.
    with pytest.raises(WordNetError, match="ancestors of other classes.*n02084071"):
        build_imagenet_hierarchy(wordnet, ["n02084071", "n02085620"])
    tiny = WordNet(words={"n00000001": "a"}, parents={})
    with pytest.raises(WordNetError, match=f"split root {VALID_ROOT} is not a synset"):
        assign_splits(tiny, ["n00000001"])
