"""Hierarchy-aware class sampling on the real Meta-Dataset specs: ImageNet eligible DAG nodes
(min_ways..392 leaves, subsample to 50) and Omniglot single-alphabet episodes."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from episodes.hierarchy.imagenet_nodes import (
    eligible_nodes,
    smallest_covering_max_leaves,
    uncovered_leaves,
)
from episodes.records.dataset_spec import Split, load_spec
from episodes.sampling.sampler import (
    EpisodeSampler,
    MultiSourceSampler,
    SamplerConfig,
    SamplerError,
)
from tests.fixtures.paths import REFERENCE_DATA

SPECS = REFERENCE_DATA / "dataset_specs"
pytestmark = pytest.mark.skipif(not SPECS.is_dir(), reason="reference specs not available")


@pytest.fixture(scope="module")
def ilsvrc():
    return load_spec(SPECS / "ilsvrc_2012_dataset_spec.json")


@pytest.fixture(scope="module")
def omniglot():
    return load_spec(SPECS / "omniglot_dataset_spec.json")


def test_cap_392_covers_every_train_leaf_and_391_does_not(ilsvrc):
    dag = ilsvrc.hierarchy
    assert len(dag.leaves(Split.TRAIN)) == len(ilsvrc.classes("train"))
    assert uncovered_leaves(dag, Split.TRAIN, 5, 392) == set()
    assert uncovered_leaves(dag, Split.TRAIN, 5, 391)
    assert smallest_covering_max_leaves(dag, Split.TRAIN) == 392


@pytest.mark.parametrize("split", [Split.VALID, Split.TEST])
def test_valid_test_graphs_fully_covered_by_their_root(ilsvrc, split):
    # The valid/test roots span fewer than 392 leaves, so the root itself is eligible and the
    # smallest covering cap is the root's leaf count.
    dag = ilsvrc.hierarchy
    (root,) = dag.roots(split)
    root_span = len(dag.spanned_leaves(split)[root])
    assert root_span < 392
    assert root in eligible_nodes(dag, split)
    assert uncovered_leaves(dag, split) == set()
    assert smallest_covering_max_leaves(dag, split) == root_span


def test_imagenet_episodes_come_from_one_eligible_node(ilsvrc):
    sampler = EpisodeSampler(ilsvrc, "train", SamplerConfig(), seed=0)
    dag = ilsvrc.hierarchy
    nodes = eligible_nodes(dag, Split.TRAIN)
    assert sampler.eligible_node_ids == sorted(nodes)
    spans = [frozenset(ilsvrc.class_id(leaf) for leaf in span) for span in nodes.values()]
    exact = {s for s in spans if len(s) <= 50}
    for d in sampler.descriptions(0, 1000):
        classes = frozenset(d.class_ids)
        assert 5 <= d.ways <= 50
        assert any(classes <= span for span in spans)
        if d.ways < 50:  # a node with at most 50 leaves contributes all of them
            assert classes in exact
        q = min(10, min(ilsvrc.images_per_class[c] // 2 for c in d.class_ids))
        assert all(len(x) == q for x in d.query)


def test_imagenet_node_choice_is_uniform(ilsvrc):
    # Nodes whose leaf sets are all distinct and <= 50 leaves identify the node of an episode.
    sampler = EpisodeSampler(ilsvrc, "train", SamplerConfig(), seed=1)
    spans = {wn: frozenset(sampler.node_classes(wn)) for wn in sampler.eligible_node_ids}
    by_set = Counter(spans.values())
    unique_small = {s: wn for wn, s in spans.items() if len(s) <= 50 and by_set[s] == 1}
    hits = Counter()
    episodes = 4000
    for d in sampler.descriptions(0, episodes):
        wn = unique_small.get(frozenset(d.class_ids))
        if wn is not None:
            hits[wn] += 1
    expected = episodes / len(spans)
    assert len(hits) == len(unique_small)
    for count in hits.values():
        assert abs(count - expected) < 6 * math.sqrt(expected)


def test_ignore_hierarchy_probability(ilsvrc):
    spans = [
        frozenset(ilsvrc.class_id(leaf) for leaf in span)
        for span in eligible_nodes(ilsvrc.hierarchy, Split.TRAIN).values()
    ]

    def fraction_in_one_node(p: float) -> float:
        cfg = SamplerConfig(ignore_hierarchy_probability=p)
        episodes = EpisodeSampler(ilsvrc, "train", cfg, seed=2).descriptions(0, 400)
        return np.mean([any(frozenset(d.class_ids) <= s for s in spans) for d in episodes])

    assert fraction_in_one_node(0.0) == 1.0
    assert fraction_in_one_node(1.0) < 0.2
    assert 0.35 < fraction_in_one_node(0.5) < 0.7
    flat = SamplerConfig(use_dag_hierarchy=False)
    ways = [d.ways for d in EpisodeSampler(ilsvrc, "train", flat, seed=2).descriptions(0, 300)]
    assert min(ways) == 5 and max(ways) == 50


def test_omniglot_one_alphabet_per_episode(omniglot):
    hierarchy = omniglot.hierarchy
    for split in (Split.TRAIN, Split.VALID, Split.TEST):
        sampler = EpisodeSampler(omniglot, split, SamplerConfig(), seed=0)
        assert sampler.hierarchy_kind == "bilevel"
        alphabets = set(hierarchy.superclasses(split))
        chosen = Counter()
        episodes = sampler.descriptions(0, 1500 if split == Split.TRAIN else 300)
        for d in episodes:
            (alphabet,) = {hierarchy.superclass_of[c] for c in d.class_ids}
            assert alphabet in alphabets
            size = len(hierarchy.classes_of(alphabet))
            assert 5 <= d.ways <= min(50, size)
            assert all(len(q) == 10 for q in d.query)  # 20 images per class: q = min(10, 10)
            assert all(1 <= k <= 10 for k in d.shots)
            chosen[alphabet] += 1
        assert set(chosen) == alphabets
        if split == Split.TRAIN:
            expected = len(episodes) / len(alphabets)
            assert all(abs(n - expected) < 6 * math.sqrt(expected) for n in chosen.values())


def test_omniglot_ways_uniform_within_alphabet(omniglot):
    hierarchy = omniglot.hierarchy
    sampler = EpisodeSampler(omniglot, "valid", SamplerConfig(), seed=3)
    # Validation alphabets have 14..20 characters: ways uniform in [5, size].
    ways_by_alphabet: dict[int, Counter] = {}
    for d in sampler.descriptions(0, 2000):
        alphabet = hierarchy.superclass_of[d.class_ids[0]]
        ways_by_alphabet.setdefault(alphabet, Counter())[d.ways] += 1
    for alphabet, ways in ways_by_alphabet.items():
        size = len(hierarchy.classes_of(alphabet))
        assert set(ways) == set(range(5, size + 1))


def test_fixed_constructor_draws_flat(ilsvrc, omniglot):
    # SamplerConfig.fixed() is classic N-way K-shot: its hierarchies are off, explicitly.
    config = SamplerConfig.fixed()
    assert (config.use_dag_hierarchy, config.use_bilevel_hierarchy) == (False, False)
    for spec in (ilsvrc, omniglot):
        sampler = EpisodeSampler(spec, "train", config, seed=0)
        assert sampler.hierarchy_kind == "flat"
        assert all(d.ways == 5 for d in sampler.descriptions(0, 50))


@pytest.mark.parametrize(
    "config",
    [SamplerConfig(ways=5), SamplerConfig(mode="fixed"), SamplerConfig(ways=7, shots=1)],
    ids=["variable-mode-ways", "fixed-mode", "ways-and-shots"],
)
def test_fixed_ways_with_a_hierarchy_raise_as_the_reference(ilsvrc, omniglot, config):
    # Meta-Dataset's sampling.py raises '"use_dag_hierarchy" is incompatible with "num_ways"'
    # (and the same for use_bilevel_hierarchy) rather than dropping the hierarchy.
    cases = (
        (ilsvrc, "use_dag_hierarchy", "ImageNet DAG"),
        (omniglot, "use_bilevel_hierarchy", "alphabets"),
    )
    for spec, option, what in cases:
        with pytest.raises(SamplerError) as raised:
            EpisodeSampler(spec, "train", config, seed=0)
        message = str(raised.value)
        assert "\n" not in message
        assert f"ways={config.fixed_ways}" in message and what in message
        assert f"{option}=False" in message and "--no-" + option.replace("_", "-") in message
        assert f"split train of {spec.name!r}" in message
    # Several sources: the first hierarchical one names itself before any episode is drawn.
    with pytest.raises(SamplerError, match="use_dag_hierarchy=False"):
        MultiSourceSampler([ilsvrc, omniglot], "train", config, seed=0)


def test_fixed_ways_with_the_hierarchies_off_keep_the_flat_draw(ilsvrc, omniglot):
    # The named opt-out (Meta-Dataset's ignore_dag_ontology / ignore_bilevel_ontology) gives
    # what fixed ways silently gave before: uniform classes over the split, same episodes as
    # SamplerConfig.fixed().
    off = {"use_dag_hierarchy": False, "use_bilevel_hierarchy": False}
    for spec in (ilsvrc, omniglot):
        sampler = EpisodeSampler(spec, "train", SamplerConfig(mode="fixed", **off), seed=4)
        classic = EpisodeSampler(spec, "train", SamplerConfig.fixed(), seed=4)
        assert sampler.hierarchy_kind == "flat"
        assert sampler.descriptions(0, 20) == classic.descriptions(0, 20)
    # Only the hierarchy a dataset has matters: ILSVRC with the alphabets still on is fine.
    dag_off = SamplerConfig(ways=5, use_dag_hierarchy=False)
    assert EpisodeSampler(ilsvrc, "train", dag_off, seed=0).hierarchy_kind == "flat"
    with pytest.raises(SamplerError, match="use_bilevel_hierarchy=False"):
        EpisodeSampler(omniglot, "train", dag_off, seed=0)
    # Variable ways keep the hierarchies.
    assert EpisodeSampler(omniglot, "train", SamplerConfig(), seed=0).hierarchy_kind == "bilevel"


def test_dag_node_lower_bound_is_min_ways(ilsvrc):
    # Meta-Dataset's sampling.py: a node is eligible when min_ways <= leaves <= 392, so no
    # episode has fewer than min_ways classes (a fixed bound of 5 gave 5..9-way episodes).
    config = SamplerConfig(min_ways=10)
    assert config.dag_min_leaves == 10
    sampler = EpisodeSampler(ilsvrc, "train", config, seed=0)
    assert sampler.eligible_node_ids == sorted(eligible_nodes(ilsvrc.hierarchy, Split.TRAIN, 10))
    assert sampler.eligible_node_ids != sorted(eligible_nodes(ilsvrc.hierarchy, Split.TRAIN, 5))
    ways = [d.ways for d in sampler.descriptions(0, 500)]
    assert min(ways) >= 10 and max(ways) == 50
    assert any(w < 50 for w in ways)


def test_min_leaves_may_raise_the_dag_bound_never_lower_it(ilsvrc):
    assert SamplerConfig().dag_min_leaves == 5  # the default stream keeps the paper's 5
    assert SamplerConfig(min_leaves=20).dag_min_leaves == 20
    ways = [
        d.ways
        for d in EpisodeSampler(ilsvrc, "train", SamplerConfig(min_leaves=20), seed=0).descriptions(
            0, 300
        )
    ]
    assert min(ways) >= 20
    with pytest.raises(SamplerError, match="--min-leaves 5 is below --min-ways 10"):
        SamplerConfig(min_ways=10, min_leaves=5)


def test_alphabet_below_min_ways_is_an_error_not_dropped(omniglot):
    # Validation alphabets have 14, 14, 16, 17 and 20 characters: min_ways=15 leaves two of
    # them too small. Meta-Dataset raises; dropping them would silently change the task set.
    with pytest.raises(
        SamplerError,
        match=r"has 14 eligible classes, fewer than min_ways=15 "
        r"\(and 1 more\)",
    ):
        EpisodeSampler(omniglot, "valid", SamplerConfig(min_ways=15), seed=0)
    sampler = EpisodeSampler(omniglot, "valid", SamplerConfig(min_ways=14), seed=0)
    assert (
        len(
            {omniglot.hierarchy.superclass_of[d.class_ids[0]] for d in sampler.descriptions(0, 200)}
        )
        == 5
    )
    flat = SamplerConfig(min_ways=15, use_bilevel_hierarchy=False)
    assert all(d.ways >= 15 for d in EpisodeSampler(omniglot, "valid", flat).descriptions(0, 20))
