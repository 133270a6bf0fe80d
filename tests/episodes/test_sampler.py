"""Sampler: Meta-Dataset formulas and bounds (variable mode), fixed N-way K-shot, options,
determinism, multi-source, bad input, statistics helper, draws without replacement."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from episodes.records.dataset_spec import DatasetSpec, SpecError, Split
from episodes.sampling.episode_stats import episode_statistics, format_statistics
from episodes.sampling.sampler import (
    EpisodeSampler,
    MultiSourceSampler,
    SamplerConfig,
    sample_episode,
)
from episodes.sampling.sampler_config import SamplerError
from episodes.sampling.sampler_formulas import (
    SMALL_EPISODE_RECORDS,
    _draw_sparse,
    choose_uniform,
    draw_distinct,
    draw_sparse_groups,
    episode_rng,
    query_per_class,
    shots_per_class,
    stable_hash,
    support_set_size,
)
from tests.fixtures.dataset_specs import varied_spec
from tests.fixtures.paths import REPO


def chi_square_uniform(counts: list[int]) -> tuple[float, int]:
    counts = np.asarray(counts, dtype=float)
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum()), len(counts) - 1


def assert_chi_square_ok(counts: list[int]) -> None:
    """Loose bound: chi^2 below df + 6 sqrt(2 df) (far beyond the 99.9th percentile)."""
    stat, df = chi_square_uniform(counts)
    assert stat < df + 6 * math.sqrt(2 * df), (stat, df, counts)


def check_records(spec: DatasetSpec, d) -> None:
    """Record numbers are in range, unique, support and query disjoint, sorted."""
    for c, s, q in zip(d.class_ids, d.support, d.query):
        both = list(s) + list(q)
        assert len(set(both)) == len(both)
        assert all(0 <= r < spec.images_per_class[c] for r in both)
        assert list(s) == sorted(s) and list(q) == sorted(q)
    assert len(set(d.class_ids)) == len(d.class_ids)


# ----------------------------------------------------------------------------------------------
# Variable ways and shots (Meta-Dataset appendix, step 1 and step 2)


@pytest.fixture(scope="module")
def variable_episodes():
    spec = varied_spec()
    sampler = EpisodeSampler(spec, "train", SamplerConfig(), seed=1)
    return spec, sampler.descriptions(0, 2000)


def test_variable_ways_uniform_in_range(variable_episodes):
    spec, episodes = variable_episodes
    ways = Counter(d.ways for d in episodes)
    assert min(ways) >= 5 and max(ways) <= 50
    assert set(ways) == set(range(5, 51))
    assert_chi_square_ok([ways[w] for w in range(5, 51)])
    train = set(spec.classes("train"))
    assert all(set(d.class_ids) <= train for d in episodes)


def test_variable_query_formula_exact(variable_episodes):
    spec, episodes = variable_episodes
    for d in episodes:
        images = [spec.images_per_class[c] for c in d.class_ids]
        q = min(10, min(i // 2 for i in images))
        assert [len(x) for x in d.query] == [q] * d.ways


def test_variable_support_and_shot_bounds(variable_episodes):
    spec, episodes = variable_episodes
    for d in episodes:
        check_records(spec, d)
        q = len(d.query[0])
        images = np.array([spec.images_per_class[c] for c in d.class_ids])
        shots = np.array(d.shots)
        assert (shots >= 1).all() and (shots <= images - q).all()
        # |S| <= min(500, sum_c min(100, |Im(c)| - q)) since ceil(beta x) <= x; sum k_c <= |S|.
        assert d.ways <= shots.sum() <= min(500, np.minimum(100, images - q).sum())


def test_variable_records_uniform_within_class():
    spec = varied_spec(images=[20] * 30, splits=(30, 0, 0))
    sampler = EpisodeSampler(spec, "train", SamplerConfig(), seed=3)
    support, query = Counter(), Counter()
    for d in sampler.descriptions(0, 1500):
        check_records(spec, d)
        for c, s, q in zip(d.class_ids, d.support, d.query):
            if c == 0:
                support.update(s)
                query.update(q)
    assert_chi_square_ok([support[r] + query[r] for r in range(20)])
    assert_chi_square_ok([query[r] for r in range(20)])


def test_support_size_mean_matches_beta_uniform():
    # 5 classes of 210 images: q = 10, min(100, 200) = 100, so |S| = 5 ceil(100 beta),
    # beta ~ U(0, 1] => |S| / 5 uniform on 1..100 (mean 50.5) and sum k_c in (|S| - 5, |S|].
    spec = varied_spec(images=[210] * 5, splits=(5, 0, 0))
    sampler = EpisodeSampler(spec, "train", SamplerConfig(), seed=4)
    totals = np.array([d.support_size for d in sampler.descriptions(0, 2000)])
    assert totals.min() >= 5 and totals.max() <= 500
    assert abs(totals.mean() - 5 * 50.5) < 5 * 3.0


def test_shots_proportional_to_class_size():
    # R_c is proportional to exp(alpha_c) |Im(c)|: doubling a class doubles its mean shots.
    images = [200, 400, 800, 1600, 3200]
    spec = varied_spec(images=images, splits=(5, 0, 0))
    sampler = EpisodeSampler(spec, "train", SamplerConfig(), seed=5)
    shots = {c: [] for c in range(5)}
    for d in sampler.descriptions(0, 2000):
        for c, k in zip(d.class_ids, d.shots):
            shots[c].append(k)
    means = [np.mean(shots[c]) for c in range(5)]
    assert means == sorted(means)
    assert 1.6 < means[3] / means[2] < 2.3


def test_formula_functions_match_paper():
    images = np.array([20, 7, 300])
    assert query_per_class(images) == 3  # min(10, min(10, 3, 150))
    assert query_per_class(np.array([40, 50])) == 10
    remaining = images - 3
    # ceil(0.5 * min(100, r)) = ceil(8.5) + ceil(2) + ceil(50) = 9 + 2 + 50
    assert support_set_size(remaining, 0.5) == 61
    assert support_set_size(remaining, 1.0, max_total=50) == 50
    weights = np.log(np.array([1.0, 2.0, 0.5]))
    shots = shots_per_class(images, remaining, 61, weights)
    unnorm = np.array([20 * 1.0, 7 * 2.0, 300 * 0.5])
    expected = np.minimum(np.floor(unnorm / unnorm.sum() * (61 - 3)) + 1, remaining)
    assert shots.tolist() == expected.astype(int).tolist()


# ----------------------------------------------------------------------------------------------
# Fixed shapes and options


def test_fixed_five_way_defaults():
    spec = varied_spec(images=[40] * 30, splits=(20, 5, 5))
    cfg = SamplerConfig(mode="fixed")
    assert (cfg.fixed_ways, cfg.fixed_shots, cfg.fixed_query) == (5, 5, 15)
    for shots in (1, 5):
        sampler = EpisodeSampler(spec, "train", SamplerConfig.fixed(shots=shots), seed=0)
        for d in sampler.descriptions(0, 300):
            check_records(spec, d)
            assert d.ways == 5
            assert d.shots == (shots,) * 5
            assert [len(q) for q in d.query] == [15] * 5


def test_fixed_ways_variable_shots():
    spec = varied_spec()
    sampler = EpisodeSampler(spec, "train", SamplerConfig(ways=10), seed=0)
    episodes = sampler.descriptions(0, 300)
    assert all(d.ways == 10 for d in episodes)
    assert len({d.shots for d in episodes}) > 100


def test_fixed_shots_variable_ways():
    spec = varied_spec()
    sampler = EpisodeSampler(spec, "train", SamplerConfig(shots=1), seed=0)
    for d in sampler.descriptions(0, 300):
        images = [spec.images_per_class[c] for c in d.class_ids]
        assert d.shots == (1,) * d.ways
        assert len(d.query[0]) == min(10, min(images) - 1)


def test_max_ways_and_max_support_overrides():
    spec = varied_spec()
    cfg = SamplerConfig(min_ways=3, max_ways=8, max_support_size=40, max_query_per_class=4)
    for d in EpisodeSampler(spec, "train", cfg, seed=0).descriptions(0, 500):
        assert 3 <= d.ways <= 8
        assert d.support_size <= 40
        assert all(len(q) <= 4 for q in d.query)


def test_min_examples_in_class_excludes_small_classes():
    spec = varied_spec()
    cfg = SamplerConfig(min_examples_in_class=100)
    sampler = EpisodeSampler(spec, "train", cfg, seed=0)
    small = {c for c in spec.classes("train") if spec.images_per_class[c] < 100}
    assert small and not small & set(sampler.class_ids)
    for d in sampler.descriptions(0, 300):
        assert not small & set(d.class_ids)


def test_num_unique_descriptions_cycles():
    spec = varied_spec()
    sampler = EpisodeSampler(spec, "train", SamplerConfig(num_unique_descriptions=7), seed=0)
    a, b = sampler.episode(3), sampler.episode(3 + 7 * 5)
    assert (a.class_ids, a.support, a.query) == (b.class_ids, b.support, b.query)
    assert b.episode_index == 38


def test_restrict_limits_records():
    spec = varied_spec(images=[50] * 10, splits=(10, 0, 0))
    allowed = {c: list(range(0, 50, 2)) for c in range(10)}
    for i in range(100):
        d = sample_episode(spec, "train", SamplerConfig(), seed=0, index=i, restrict=allowed)
        for s, q in zip(d.support, d.query):
            assert all(r % 2 == 0 for r in s + q)
            assert len(q) == min(10, 25 // 2)


# ----------------------------------------------------------------------------------------------
# Determinism


def test_same_inputs_same_episode_and_independent_of_order():
    spec = varied_spec()
    a = EpisodeSampler(spec, "train", SamplerConfig(), seed=11)
    b = EpisodeSampler(spec, "train", SamplerConfig(), seed=11)
    forward = a.descriptions(0, 50)
    assert [b.episode(i) for i in reversed(range(50))][::-1] == forward
    assert sample_episode(spec, "train", SamplerConfig(), seed=11, index=42) == forward[42]


def test_different_seeds_and_splits_differ():
    spec = varied_spec()
    a = EpisodeSampler(spec, "train", SamplerConfig(), seed=1).descriptions(0, 50)
    b = EpisodeSampler(spec, "train", SamplerConfig(), seed=2).descriptions(0, 50)
    assert sum(x.class_ids != y.class_ids for x, y in zip(a, b)) >= 45
    valid = EpisodeSampler(spec, "valid", SamplerConfig(min_ways=2, max_ways=10), seed=1)
    assert all(set(d.class_ids) <= set(spec.classes("valid")) for d in valid.descriptions(0, 50))


def test_stable_hash_is_sha256_based():
    digest = hashlib.sha256(b"ilsvrc_2012").digest()[:8]
    assert stable_hash("ilsvrc_2012") == int.from_bytes(digest, "little")


def test_same_episode_in_fresh_process_with_other_hash_seed():
    script = (
        "from tests.fixtures.dataset_specs import varied_spec\n"
        "from episodes.sampling.sampler import EpisodeSampler, SamplerConfig\n"
        "import json\n"
        "d = EpisodeSampler(varied_spec(), 'train', SamplerConfig(), seed=9).episode(123)\n"
        "print(json.dumps(d.to_json()))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    here = EpisodeSampler(varied_spec(), "train", SamplerConfig(), seed=9).episode(123)
    assert json.loads(out) == here.to_json()


# ----------------------------------------------------------------------------------------------
# Multi-source


def test_multi_source_uniform_and_one_source_per_episode():
    specs = [varied_spec(name=f"source{i}", seed=i) for i in range(3)]
    multi = MultiSourceSampler(specs, "train", SamplerConfig(), seed=0)
    episodes = multi.descriptions(0, 3000)
    counts = Counter(d.source for d in episodes)
    assert set(counts) == {"source0", "source1", "source2"}
    assert_chi_square_ok(list(counts.values()))
    single = {s.name: EpisodeSampler(s, "train", SamplerConfig(), seed=0) for s in specs}
    for i, d in enumerate(episodes[:300]):
        assert set(d.class_ids) <= set(single[d.source].spec.classes("train"))
        assert d == single[d.source].episode(i)


# ----------------------------------------------------------------------------------------------
# Bad input: one clear error naming the value


def test_unknown_split_named():
    with pytest.raises(SpecError, match="bogus"):
        EpisodeSampler(varied_spec(), "bogus", SamplerConfig())


def test_too_few_classes_for_ways_named():
    spec = varied_spec()
    with pytest.raises(SamplerError, match="ways=20.*only 10"):
        EpisodeSampler(spec, "valid", SamplerConfig.fixed(ways=20))
    with pytest.raises(SamplerError, match="10 eligible classes, fewer than min_ways=12"):
        EpisodeSampler(spec, "valid", SamplerConfig(min_ways=12))


def test_shots_plus_query_larger_than_class_named():
    spec = varied_spec(images=[40] * 9 + [12], splits=(10, 0, 0))
    with pytest.raises(SamplerError, match=r"class 9 .* has 12 usable images.*shots=5 \+ query=15"):
        EpisodeSampler(spec, "train", SamplerConfig.fixed())
    ok = EpisodeSampler(spec, "train", SamplerConfig.fixed(min_examples_in_class=20))
    assert 9 not in ok.class_ids


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"mode": "sometimes"}, "--mode sometimes: expected one of variable, fixed"),
        ({"ways": 0}, "--ways 0: expected an integer >= 1"),
        ({"shots": -1}, "--shots -1: expected an integer >= 1"),
        ({"ways": 2.5}, "--ways 2.5: expected an integer >= 1"),
        ({"min_ways": 9, "max_ways": 4}, "--min-ways 9 is larger than --max-ways 4"),
        ({"ignore_hierarchy_probability": 1.5}, "--ignore-hierarchy-probability 1.5: expected"),
        ({"max_support_size": 10}, "--max-support-size 10 is smaller"),
        ({"min_examples_in_class": -2}, "--min-examples-in-class -2: expected an integer >= 0"),
        ({"min_log_weight": float("nan")}, "--min-log-weight nan: expected a finite number"),
        ({"use_dag_hierarchy": "no"}, "--use-dag-hierarchy no: expected true or false"),
    ],
)
def test_bad_config_named(options, named):
    with pytest.raises(SamplerError, match=named.replace("(", r"\(")):
        SamplerConfig(**options)


def test_bad_seed_index_restrict_named():
    spec = varied_spec()
    with pytest.raises(SamplerError, match="seed=-1"):
        EpisodeSampler(spec, "train", SamplerConfig(), seed=-1)
    with pytest.raises(SamplerError, match="index -3"):
        EpisodeSampler(spec, "train").episode(-3)
    with pytest.raises(SamplerError, match="record number 9999 of class 0"):
        EpisodeSampler(spec, "train", restrict={0: [1, 9999]})
    nosplit = DatasetSpec(name="flat", class_names=["a", "b"], images_per_class=[5, 5])
    with pytest.raises(SpecError, match="defines no class splits"):
        EpisodeSampler(nosplit, "train")
    with pytest.raises(SamplerError, match="distinct"):
        MultiSourceSampler([spec, spec], "train")


# ----------------------------------------------------------------------------------------------
# Statistics helper


def test_episode_statistics_summaries():
    spec = varied_spec()
    episodes = EpisodeSampler(spec, "train", SamplerConfig(), seed=0).descriptions(0, 200)
    stats = episode_statistics(episodes)
    ways = [d.ways for d in episodes]
    assert stats["episodes"] == 200
    assert stats["ways"]["mean"] == pytest.approx(np.mean(ways))
    assert (stats["ways"]["min"], stats["ways"]["max"]) == (min(ways), max(ways))
    assert stats["ways"]["p50"] == pytest.approx(np.median(ways))
    assert stats["shots"]["count"] == sum(ways)
    assert stats["support_size"]["max"] == max(d.support_size for d in episodes)
    assert stats["sources"] == {"synthetic": 200}
    text = format_statistics(stats)
    assert "ways" in text and "support_size" in text


# ----------------------------------------------------------------------------------------------
# Draws without replacement


@pytest.mark.parametrize(("count", "needed"), [(20, 20), (65, 16), (1300, 110), (100000, 40)])
def test_draw_distinct_uniform(count, needed):
    rng = np.random.default_rng(0)
    freq = np.zeros(count)
    first = np.zeros(count)
    trials = 3000 if count < 1000 else 400
    for _ in range(trials):
        picked = draw_distinct(rng, np.array([count, 7]), np.array([needed, 3]))
        assert len(picked) == needed + 3
        mine = picked[:needed]
        assert len(set(mine.tolist())) == needed and mine.min() >= 0 and mine.max() < count
        assert len(set(picked[needed:].tolist())) == 3 and picked[needed:].max() < 7
        freq[mine] += 1
        first[mine[0]] += 1
    if count <= 1300:
        expected = trials * needed / count
        assert np.abs(freq - expected).max() < 6 * math.sqrt(expected) + 1
    if count <= 65:
        assert_chi_square_ok(first.tolist())


def test_episode_rng_is_default_rng_of_seed_index_and_labels():
    labels = (stable_hash("ilsvrc_2012"), stable_hash("train"), 0, 2**32, 5)
    for seed, index in ((0, 0), (0, 1), (7, 2**32), (3, 2**40 + 5), (2**33, 123456789)):
        expected = np.random.default_rng([seed, index, *labels]).random(8)
        assert np.array_equal(episode_rng(seed, index, labels).random(8), expected)


@pytest.mark.parametrize(
    ("counts", "needed"),
    [([100, 100, 100, 100, 100], [20] * 5), ([1300, 900, 70], [11, 3, 17]), ([30, 26], [25, 26])],
)
def test_python_and_numpy_sparse_draws_agree_exactly(counts, needed):
    """The small-episode path (pure Python) must give the very draws of the vectorised one,
    including the redraws when a group comes up short (forced by the last case)."""
    counts, needed = np.array(counts), np.array(needed)
    for seed in range(300):
        groups = draw_sparse_groups(np.random.default_rng(seed), counts, needed)
        flat = _draw_sparse(np.random.default_rng(seed), counts, needed)
        assert [len(g) for g in groups] == needed.tolist()
        assert np.array_equal(np.concatenate(groups), flat)
        assert all(len(set(g)) == len(g) for g in groups)


def test_small_episode_path_gives_the_same_descriptions_as_the_general_one(monkeypatch):
    spec = DatasetSpec(
        name="flat",
        class_names=[f"c{i}" for i in range(30)],
        images_per_class=[100 + 7 * i for i in range(30)],
        split_classes={Split.TRAIN: list(range(30)), Split.VALID: [], Split.TEST: []},
    )
    config = SamplerConfig.fixed(5, 5, 15)  # 100 records: the small-episode path
    assert 5 * (5 + 15) <= SMALL_EPISODE_RECORDS
    fast = [EpisodeSampler(spec, "train", config, 3).episode(i) for i in range(200)]
    monkeypatch.setattr("episodes.sampling.sampler.SMALL_EPISODE_RECORDS", 0)  # general path only
    general = [EpisodeSampler(spec, "train", config, 3).episode(i) for i in range(200)]
    assert fast == general
    assert all(list(s) == sorted(s) for d in fast for s in d.support + d.query)


def test_choose_uniform_and_draw_errors():
    rng = np.random.default_rng(0)
    counts = Counter()
    for _ in range(2000):
        picked = choose_uniform(rng, 300, 3)
        assert len(set(picked.tolist())) == 3
        counts[int(picked[0])] += 1
    assert_chi_square_ok([counts[i] for i in range(300)])
    with pytest.raises(ValueError, match="cannot draw 5 distinct items out of 4"):
        draw_distinct(rng, np.array([4]), np.array([5]))


def test_config_json_round_trip_and_unknown_option_named():
    cfg = SamplerConfig(mode="fixed", ways=10, shots=1, query=5, min_examples_in_class=6)
    assert SamplerConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    with pytest.raises(SamplerError, match="max_shots"):
        SamplerConfig.from_json({"max_shots": 3})
