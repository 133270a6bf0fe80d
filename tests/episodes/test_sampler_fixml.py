"""FIX-ML: fixed support pools, held-out base examples, base/novel mixing tau_BN(lambda)."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from episodes.records.dataset_spec import Split
from episodes.sampling.fixml import (
    BaseHoldout,
    FixedSupportPool,
    MixedSampler,
    make_base_holdout,
    make_fixed_support_pool,
)
from episodes.sampling.sampler import EpisodeSampler, SamplerConfig
from episodes.sampling.sampler_config import SamplerError
from tests.fixtures.dataset_specs import mini_spec

# ----------------------------------------------------------------------------------------------
# Fixed support pools


def test_pool_draw_is_seeded_and_round_trips(tmp_path):
    spec = mini_spec()
    pool = make_fixed_support_pool(spec, "train", k=5, seed=3)
    assert set(pool.records) == set(spec.classes("train"))
    for c, recs in pool.records.items():
        assert len(set(recs)) == 5 and all(0 <= r < spec.images_per_class[c] for r in recs)
    assert make_fixed_support_pool(spec, "train", k=5, seed=3) == pool
    assert make_fixed_support_pool(spec, "train", k=5, seed=4) != pool
    path = tmp_path / "pool.json"
    pool.save(path)
    raw = json.loads(path.read_text())
    assert (raw["dataset"], raw["split"], raw["k"], raw["seed"]) == ("mini", "train", 5, 3)
    assert FixedSupportPool.load(path) == pool


def test_pool_support_reused_in_every_episode_and_query_from_all_images():
    # FIX-ML section 4: "every time we need q query examples from class c, we still sample
    # from Unif[D_c]" -- all of the class's examples, the pool's included.
    spec = mini_spec()
    pool = make_fixed_support_pool(spec, "train", k=5, seed=0)
    sampler = EpisodeSampler(spec, "train", SamplerConfig.fixed(shots=5), seed=0, pool=pool)
    query_seen: dict[int, set] = {c: set() for c in pool.records}
    overlaps = 0
    for d in sampler.descriptions(0, 600):
        assert d.ways == 5
        for c, s, q in zip(d.class_ids, d.support, d.query):
            assert s == pool.records[c]
            assert len(q) == 15 and len(set(q)) == 15
            overlaps += bool(set(q) & set(s))
            query_seen[c].update(q)
    for c, seen in query_seen.items():
        assert seen == set(range(spec.images_per_class[c]))  # pool records are queried too
    # P(query of 15 out of ~70 misses all 5 pool records) is about 0.28: most classes overlap.
    assert overlaps > 0.5 * 600 * 5


def test_pool_query_outside_pool_option():
    spec = mini_spec()
    pool = make_fixed_support_pool(spec, "train", k=5, seed=0)
    config = SamplerConfig.fixed(shots=5, pool_query="outside_pool")
    sampler = EpisodeSampler(spec, "train", config, seed=0, pool=pool)
    query_seen: dict[int, set] = {c: set() for c in pool.records}
    for d in sampler.descriptions(0, 600):
        for c, s, q in zip(d.class_ids, d.support, d.query):
            assert s == pool.records[c]
            assert len(q) == 15 and not set(q) & set(s)
            query_seen[c].update(q)
    for c, seen in query_seen.items():
        others = set(range(spec.images_per_class[c])) - set(pool.records[c])
        assert seen <= others
        assert len(seen) > 0.9 * len(others)  # query still ranges over all other examples
    with pytest.raises(
        SamplerError, match="--pool-query inside: expected one of all, outside_pool"
    ):
        SamplerConfig(pool_query="inside")


def test_pool_variable_mode_query_formula():
    spec = mini_spec()
    pool = make_fixed_support_pool(spec, "train", k=1, seed=0)
    for where, extra in (("all", 0), ("outside_pool", 1)):
        config = SamplerConfig(min_ways=3, max_ways=10, pool_query=where)
        sampler = EpisodeSampler(spec, "train", config, seed=0, pool=pool)
        for d in sampler.descriptions(0, 200):
            images = [spec.images_per_class[c] for c in d.class_ids]
            q = min(10, min(i // 2 for i in images), min(i - extra for i in images))
            assert d.shots == (1,) * d.ways
            assert all(len(x) == q for x in d.query)


def test_pool_mismatches_are_named():
    spec = mini_spec()
    pool = make_fixed_support_pool(spec, "train", k=2, seed=0)
    with pytest.raises(SamplerError, match="shots=5 but the fixed support pool has k=2"):
        EpisodeSampler(spec, "train", SamplerConfig(shots=5), pool=pool)
    with pytest.raises(SamplerError, match="mini/train, not mini/valid"):
        EpisodeSampler(spec, "valid", SamplerConfig(min_ways=2), pool=pool)
    with pytest.raises(SamplerError, match="k=0"):
        make_fixed_support_pool(spec, "train", k=0, seed=0)
    with pytest.raises(SamplerError, match=r"class 0 .* a pool of k=100"):
        make_fixed_support_pool(spec, "train", k=100, seed=0)


# ----------------------------------------------------------------------------------------------
# Held-out base examples


def test_holdout_never_in_training_episodes(tmp_path):
    spec = mini_spec()
    holdout = make_base_holdout(spec, "train", fraction=1 / 6, seed=0)
    for c, held in holdout.records.items():
        assert len(held) == round(spec.images_per_class[c] / 6)
    path = tmp_path / "holdout.json"
    holdout.save(path)
    assert BaseHoldout.load(path) == holdout
    pool = make_fixed_support_pool(spec, "train", k=5, seed=0, holdout=holdout)
    for c, recs in pool.records.items():
        assert not set(recs) & set(holdout.records[c])
    for sampler in (
        EpisodeSampler(spec, "train", SamplerConfig(), seed=0, holdout=holdout),
        EpisodeSampler(spec, "train", SamplerConfig.fixed(), seed=0, holdout=holdout, pool=pool),
    ):
        for d in sampler.descriptions(0, 300):
            for c, s, q in zip(d.class_ids, d.support, d.query):
                assert not (set(s) | set(q)) & set(holdout.records[c])
    training = holdout.training_records(spec)
    for c in holdout.records:
        assert sorted(training[c] + holdout.records[c]) == list(range(spec.images_per_class[c]))


def test_base_evaluation_uses_held_out_records_only():
    spec = mini_spec(images=120)
    holdout = make_base_holdout(spec, "train", fraction=0.25, seed=1)
    evaluation = EpisodeSampler(
        spec, "train", SamplerConfig.fixed(), seed=0, restrict=holdout.records
    )
    mixed = MixedSampler(spec, "train", "test", 0.0, SamplerConfig.fixed(), seed=0, holdout=holdout)
    for sampler in (evaluation, mixed):
        for d in sampler.descriptions(0, 200):
            for c, s, q in zip(d.class_ids, d.support, d.query):
                assert set(s) | set(q) <= set(holdout.records[c])


def test_holdout_fraction_named():
    with pytest.raises(SamplerError, match="fraction=1.5"):
        make_base_holdout(mini_spec(), "train", fraction=1.5, seed=0)


# The exact bytes the record-set files had before their JSON code was shared (issue: duplicates).
HOLDOUT_BYTES = (
    b'{"format": "fewshot-tasksets.base_holdout/1", "dataset": "mini", "split": "train", '
    b'"fraction": 0.25, "seed": 3, "classes": {"0": [4], "2": [1, 0]}}\n'
)
POOL_BYTES = (
    b'{"format": "fewshot-tasksets.fixed_support_pool/1", "dataset": "mini", "split": "train", '
    b'"k": 2, "seed": 7, "classes": {"1": [5, 3], "4": [0, 9]}}\n'
)


def test_record_set_files_are_byte_identical(tmp_path):
    holdout = BaseHoldout("mini", "train", 0.25, 3, {2: (1, 0), 0: (4,)})
    pool = FixedSupportPool("mini", "train", 2, 7, {4: (0, 9), 1: (5, 3)})
    for record_set, expected in ((holdout, HOLDOUT_BYTES), (pool, POOL_BYTES)):
        path = tmp_path / f"{type(record_set).__name__}.json"
        record_set.save(path)
        assert path.read_bytes() == expected
        assert type(record_set).load(path) == record_set


def test_record_set_file_faults_are_named(tmp_path):
    path = tmp_path / "pool.json"
    with pytest.raises(SamplerError, match="pool.json: no such file"):
        FixedSupportPool.load(path)
    path.write_text("{not json")
    with pytest.raises(SamplerError, match="pool.json: not valid JSON"):
        FixedSupportPool.load(path)
    for text in ("[1, 2]", HOLDOUT_BYTES.decode()):
        path.write_text(text)
        with pytest.raises(SamplerError, match="pool.json: not a .*fixed_support_pool/1 file"):
            FixedSupportPool.load(path)
    path.write_bytes(POOL_BYTES.replace(b"[0, 9]", b"[0]"))
    with pytest.raises(SamplerError, match="pool.json: class 4 does not list k=2 records"):
        FixedSupportPool.load(path)


# ----------------------------------------------------------------------------------------------
# Base / novel mixing


def test_lambda_zero_is_base_and_one_is_novel():
    spec = mini_spec()
    base, novel = set(spec.classes("train")), set(spec.classes("test"))
    for lam, allowed, split in ((0.0, base, Split.TRAIN), (1.0, novel, Split.TEST)):
        sampler = MixedSampler(spec, "train", "test", lam, SamplerConfig.fixed(), seed=0)
        for d in sampler.descriptions(0, 300):
            assert set(d.class_ids) <= allowed and d.split == split
            assert d.shots == (5,) * 5 and all(len(q) == 15 for q in d.query)


def successive_novel_counts(ways: int, base: int, novel: int, lam: float) -> list[float]:
    """P(k novel classes) when `ways` classes are drawn one by one without replacement, each
    remaining class with weight lam/novel (novel) or (1 - lam)/base (base)."""
    probs = {(0, 0): 1.0}  # (novel drawn, base drawn) -> probability
    for _ in range(ways):
        nxt: dict[tuple[int, int], float] = {}
        for (n, b), p in probs.items():
            wn, wb = lam / novel * (novel - n), (1 - lam) / base * (base - b)
            for key, w in (((n + 1, b), wn), ((n, b + 1), wb)):
                if w > 0:
                    nxt[key] = nxt.get(key, 0.0) + p * w / (wn + wb)
        probs = nxt
    out = [0.0] * (ways + 1)
    for (n, _), p in probs.items():
        out[n] += p
    return out


def novel_count_histogram(sampler, novel, episodes):
    per_episode = Counter()
    for d in sampler.descriptions(0, episodes):
        assert len(set(d.class_ids)) == d.ways
        per_episode[sum(c in novel for c in d.class_ids)] += 1
    return per_episode


def chi_square(observed, probs, episodes):
    return sum(
        (observed[k] - episodes * p) ** 2 / (episodes * p) for k, p in enumerate(probs) if p > 0
    )


@pytest.mark.parametrize("lam", [0.25, 10 / 26, 0.6])
def test_weighted_draw_follows_the_reference_without_replacement(lam):
    # 16 base and 10 novel classes: weights lam/10 per novel, (1 - lam)/16 per base class.
    spec = mini_spec()
    novel = set(spec.classes("test"))
    sampler = MixedSampler(spec, "train", "test", lam, SamplerConfig.fixed(), seed=0)
    episodes = 4000
    observed = novel_count_histogram(sampler, novel, episodes)
    expected = successive_novel_counts(5, 16, 10, lam)
    binomial = [math.comb(5, k) * lam**k * (1 - lam) ** (5 - k) for k in range(6)]
    # 5 degrees of freedom: P(chi2 > 25) < 2e-4. Binomial(5, lam) is rejected.
    assert chi_square(observed, expected, episodes) < 25, (observed, expected)
    assert chi_square(observed, binomial, episodes) > 40, (observed, binomial)


def test_weighted_draw_at_the_union_fraction_is_uniform_over_all_classes():
    # FIX-ML section 4.2: lambda = |C_N| / (|C_N| + |C_B|) gives tau(C_B u C_N).
    spec = mini_spec()
    base, novel = spec.classes("train"), spec.classes("test")
    union = len(base) + len(novel)
    lam = len(novel) / union
    sampler = MixedSampler(spec, "train", "test", lam, SamplerConfig.fixed(), seed=1)
    episodes = 6000
    first, hits, novel_counts = Counter(), Counter(), Counter()
    for d in sampler.descriptions(0, episodes):
        first[d.class_ids[0]] += 1
        hits.update(d.class_ids)
        novel_counts[sum(c in set(novel) for c in d.class_ids)] += 1
    hypergeometric = [
        math.comb(len(novel), k) * math.comb(len(base), 5 - k) / math.comb(union, 5)
        for k in range(6)
    ]
    assert chi_square(novel_counts, hypergeometric, episodes) < 25
    expected = episodes * 5 / union
    assert set(hits) == set(base) | set(novel)
    assert all(abs(n - expected) < 5 * math.sqrt(expected) for n in hits.values())
    expected_first = episodes / union  # every class equally likely to get label 0
    assert all(abs(n - expected_first) < 5 * math.sqrt(expected_first) for n in first.values())


@pytest.mark.parametrize("lam", [0.25, 0.6])
def test_binomial_option_novel_count_is_binomial(lam):
    spec = mini_spec()
    novel = set(spec.classes("test"))
    config = SamplerConfig.fixed(base_novel_draw="binomial")
    sampler = MixedSampler(spec, "train", "test", lam, config, seed=0)
    episodes = 4000
    observed = novel_count_histogram(sampler, novel, episodes)
    binomial = [math.comb(5, k) * lam**k * (1 - lam) ** (5 - k) for k in range(6)]
    assert chi_square(observed, binomial, episodes) < 25, (observed, binomial)
    assert chi_square(observed, successive_novel_counts(5, 16, 10, lam), episodes) > 40


def test_mixed_variable_ways_bounded_by_capacity():
    spec = mini_spec()
    weighted = MixedSampler(spec, "train", "test", 0.5, SamplerConfig(), seed=0)
    ways = [d.ways for d in weighted.descriptions(0, 600)]
    assert min(ways) == 5 and max(ways) == 26  # min(50, 16 base + 10 novel)
    only_novel = MixedSampler(spec, "train", "test", 1.0, SamplerConfig(), seed=0)
    assert max(d.ways for d in only_novel.descriptions(0, 300)) == 10
    config = SamplerConfig(base_novel_draw="binomial")
    binomial = MixedSampler(spec, "train", "test", 0.5, config, seed=0)
    ways = [d.ways for d in binomial.descriptions(0, 300)]
    assert min(ways) == 5 and max(ways) == 10  # min(50, 16 base, 10 novel)


def test_mixed_episodes_are_pure_functions_of_the_index():
    spec = mini_spec()
    for draw in ("weighted", "binomial"):
        config = SamplerConfig.fixed(base_novel_draw=draw)
        a = MixedSampler(spec, "train", "test", 0.4, config, seed=5)
        b = MixedSampler(spec, "train", "test", 0.4, config, seed=5)
        assert [a.episode(i) for i in (7, 3, 0)] == [b.episode(i) for i in (0, 3, 7)][::-1]
    with pytest.raises(SamplerError, match="--base-novel-draw uniform: expected one of"):
        SamplerConfig(base_novel_draw="uniform")


@pytest.mark.parametrize("lam", [1.5, -0.1, float("nan")])
def test_lambda_outside_unit_interval_named(lam):
    with pytest.raises(SamplerError, match=f"lambda={lam!r}"):
        MixedSampler(mini_spec(), "train", "test", lam)


def test_mixed_ways_larger_than_splits_named():
    with pytest.raises(SamplerError, match="ways=27"):
        MixedSampler(mini_spec(), "train", "test", 0.5, SamplerConfig.fixed(ways=27))
    with pytest.raises(SamplerError, match="ways=12"):
        MixedSampler(mini_spec(), "train", "test", 1.0, SamplerConfig.fixed(ways=12))
    binomial = SamplerConfig.fixed(ways=12, base_novel_draw="binomial")
    with pytest.raises(SamplerError, match="ways=12"):
        MixedSampler(mini_spec(), "train", "test", 0.5, binomial)


def test_cli_writes_pool_and_holdout(tmp_path, capsys):
    from episodes.fixml import main

    spec = mini_spec()
    dataset = tmp_path / "dataset"  # outputs never go inside an input (issue 30)
    dataset.mkdir()
    spec.save(dataset / "dataset_spec.json")
    holdout_file, pool_file = tmp_path / "holdout.json", tmp_path / "pool.json"
    main(["holdout", "--dataset", str(dataset), "--fraction", "0.2", "--seed", "1",
          "--output", str(holdout_file)])  # fmt: skip
    main(["pool", "--dataset", str(dataset), "--k", "3", "--holdout", str(holdout_file),
          "--output", str(pool_file)])  # fmt: skip
    holdout = BaseHoldout.load(holdout_file)
    pool = FixedSupportPool.load(pool_file)
    assert holdout == make_base_holdout(spec, "train", 0.2, 1)
    assert pool == make_fixed_support_pool(spec, "train", 3, 0, holdout=holdout)
    captured = capsys.readouterr()
    assert "wrote" in captured.out and captured.err == ""
    written = pool_file.read_bytes()
    # an existing file is replaced only with --overwrite
    assert main(["pool", "--dataset", str(dataset), "--k", "2", "--output", str(pool_file)]) == 2
    assert f"--output {pool_file}: exists (add --overwrite" in capsys.readouterr().err
    assert pool_file.read_bytes() == written
    main(["pool", "--dataset", str(dataset), "--k", "2", "--output", str(pool_file), "--overwrite"])
    assert FixedSupportPool.load(pool_file) == make_fixed_support_pool(spec, "train", 2, 0)
    capsys.readouterr()
    assert main(["holdout", "--dataset", str(dataset), "--fraction", "0",
                 "--output", str(tmp_path / "x.json")]) == 2  # fmt: skip
    assert "fraction=0.0" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
    assert main(["pool", "--dataset", str(dataset), "--dataset", str(dataset), "--k", "3",
                 "--output", str(tmp_path / "x.json")]) == 2  # fmt: skip
    assert "--dataset given 2 times" in capsys.readouterr().err


def test_cli_old_form_still_works_with_notes(tmp_path, capsys):
    """`pool SPEC --out FILE` (before the one CLI style) writes the same file, with a note for
    the positional and one for --out."""
    from episodes.fixml import main

    dataset = tmp_path / "dataset"
    dataset.mkdir()
    mini_spec().save(dataset / "dataset_spec.json")
    main(["pool", "--dataset", str(dataset), "--k", "3", "--output", str(tmp_path / "new.json")])
    capsys.readouterr()
    main(["pool", str(dataset), "--k", "3", "--out", str(tmp_path / "old.json")])
    assert (tmp_path / "old.json").read_bytes() == (tmp_path / "new.json").read_bytes()
    assert capsys.readouterr().err.splitlines() == [
        "note: the positional SPEC is now --dataset SPEC; the old form goes in version 0.3.0",
        "note: --out is now --output; the old spelling goes in version 0.3.0",
    ]


@pytest.mark.parametrize("where", ["all", "outside_pool"])
def test_class_table_maps_positions_to_usable_records(where):
    from episodes.sampling.sampler import build_class_table

    spec = mini_spec()
    holdout = make_base_holdout(spec, "train", fraction=0.3, seed=2)
    pool = make_fixed_support_pool(spec, "train", k=4, seed=2, holdout=holdout)
    restrict = {
        0: sorted(set(range(0, 60, 3)) | set(pool.records[0])),
        5: sorted(set(range(40)) | set(pool.records[5])),
    }
    config = SamplerConfig(min_ways=2, pool_query=where)
    table = build_class_table(
        spec, spec.classes("train"), config, restrict=restrict, exclude=holdout, pool=pool
    )
    chosen = np.arange(len(table))
    counts = table.counts
    records = table.records(chosen, counts, np.concatenate([np.arange(n) for n in counts]))
    start = 0
    for p, c in enumerate(table.class_ids.tolist()):
        mine = records[start : start + counts[p]].tolist()
        start += counts[p]
        usable = set(restrict.get(c, range(spec.images_per_class[c])))
        usable -= set(holdout.records[c])
        if where == "outside_pool":
            usable -= set(pool.records[c])
        assert mine == sorted(usable)
        assert table.images[p] == counts[p] + (4 if where == "outside_pool" else 0)
