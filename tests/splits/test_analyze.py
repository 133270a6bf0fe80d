"""Analyses: PCA picture, divergence/accuracy correlation, hop distance, split summary."""

import json

import numpy as np
import pytest

from splits import analyze
from splits.analyze import (
    divergence_accuracy_correlation,
    hop_distance,
    leaf_hop_distances,
    split_summary,
    task_divergence,
    ward_tree_parents,
)
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.methods.atg.algorithm import atg_split_file, normalise_rows
from splits.methods.atg.config import ATGConfig


def _embeddings(n=24, d=6, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d))
    x = centres[np.arange(n) % 3] + 0.3 * rng.normal(size=(n, d))
    return EmbeddingsFile([f"c{i:02d}" for i in range(n)], x.astype(np.float32), "toy", "w")


@pytest.fixture(scope="module")
def atg_split():
    return atg_split_file(_embeddings(), ATGConfig(0.3, iterations=300), "toy")


def test_pca_png_is_written(tmp_path, atg_split):
    emb = _embeddings()
    split_path = atg_split.save(tmp_path / "s.json")
    emb_path = emb.save(tmp_path / "e.npz")
    out = tmp_path / "fig" / "pca.png"
    assert (
        analyze.main(
            [
                "pca",
                "--embeddings",
                str(emb_path),
                "--split-file",
                str(split_path),
                str(split_path),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_correlation_recovers_a_planted_relation():
    rng = np.random.default_rng(1)
    train = normalise_rows(rng.normal(size=(40, 5)))
    tasks = [normalise_rows(rng.normal(loc=shift, size=(5, 5))) for shift in np.linspace(0, 2, 12)]
    truth = np.array([task_divergence(train, t, "symmetric_kl") for t in tasks])
    accuracies = 0.9 - 0.01 * truth
    result = divergence_accuracy_correlation(train, tasks, accuracies)
    assert set(result) == {"symmetric_kl", "kl", "euclidean", "wasserstein2"}
    assert result["symmetric_kl"]["pearson_r"] == pytest.approx(-1.0)
    assert -1 <= result["euclidean"]["pearson_r"] <= 1
    multi = divergence_accuracy_correlation(train, tasks, accuracies, family="multinomial")
    assert all(np.isfinite(v["pearson_r"]) for v in multi.values())
    with pytest.raises(ValueError, match="12 tasks but 3 accuracies"):
        divergence_accuracy_correlation(train, tasks, [0.1, 0.2, 0.3])


def test_gaussian_euclidean_is_distance_between_means():
    train = np.array([[0.0, 0.0], [2.0, 0.0]])
    task = np.array([[1.0, 3.0], [1.0, 5.0]])
    assert task_divergence(train, task, "euclidean") == pytest.approx(4.0)


def test_ward_tree_and_hop_distances():
    emb = _embeddings(n=8)
    parents = ward_tree_parents(normalise_rows(emb.embeddings), emb.class_names)
    assert len(parents) == 2 * 8 - 1
    roots = [n for n, ps in parents.items() if not ps]
    assert len(roots) == 1
    assert all(len(ps) == 1 for n, ps in parents.items() if n not in roots)
    assert hop_distance(parents, parents, emb.class_names) == 0.0


def test_hop_distance_by_hand():
    # Tree A: ((a,b),(c,d)); tree B: a flat star under one root.
    tree = {"a": ["x"], "b": ["x"], "c": ["y"], "d": ["y"], "x": ["r"], "y": ["r"]}
    star = {"a": ["r"], "b": ["r"], "c": ["r"], "d": ["r"]}
    da = leaf_hop_distances(tree, list("abcd"))
    assert da[0, 1] == 2 and da[0, 2] == 4
    # pairs: ab, cd differ by 0 (2 vs 2); the four cross pairs differ by 2 (4 vs 2).
    assert hop_distance(tree, star, list("abcd")) == pytest.approx(8 / 6)
    with pytest.raises(ValueError, match="not nodes of the hierarchy"):
        hop_distance(tree, star, ["a", "zz"])


def test_hop_cli_with_a_parent_map(tmp_path, capsys):
    emb = _embeddings(n=6)
    path = emb.save(tmp_path / "e.npz")
    dag = {name: ["root"] for name in emb.class_names}
    (tmp_path / "dag.json").write_text(json.dumps(dag))
    assert (
        analyze.main(["hop", "--embeddings", str(path), "--parents", str(tmp_path / "dag.json")])
        == 0
    )
    assert "hop distance:" in capsys.readouterr().out


def test_summary_sizes_and_distances(atg_split):
    emb = _embeddings()
    summary = split_summary(atg_split, emb)
    assert summary["sizes"] == {"train": 16, "valid": 4, "test": 4}
    assert summary["achieved_divergence"] == atg_split.achieved_divergence
    assert set(summary["between_splits"]) == {"train-valid", "train-test", "valid-test"}
    assert "warning" not in summary
    for row in summary["between_splits"].values():
        assert row["mean_class_distance"] > 0
    other = _embeddings(seed=9)
    assert "warning" in split_summary(atg_split, other)


def test_summary_command_prints_a_table_or_json(tmp_path, capsys, atg_split):
    """`summary` prints a line of sizes and one row per split pair (`make demo` runs it per
    split file); `--json` the whole summary, as split_summary returns it."""
    emb = _embeddings()
    split_path, emb_path = tmp_path / "split.json", tmp_path / "emb.npz"
    atg_split.save(split_path)
    emb.save(emb_path)
    args = ["summary", "--split-file", str(split_path), "--embeddings", str(emb_path)]
    assert analyze.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("toy (atg): train 16, valid 4, test 4; R ")
    assert [line.split()[0] for line in lines[2:]] == ["train-valid", "train-test", "valid-test"]
    expected = split_summary(atg_split, emb)["between_splits"]["train-test"]
    assert lines[3].split()[1:] == [
        f"{expected[key]:.4f}"
        for key in (
            "mean_class_distance",
            "distance_between_means",
            "symmetric_kl_of_mean_centroids",
        )
    ]
    assert analyze.main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(
        json.dumps(split_summary(atg_split, emb))
    )
