"""Conversions on a real `dask.distributed` cluster (2 worker processes on 127.0.0.1) through
Beam's Dask runner (beam_pipelines.runners.dask_runner): every output file byte-identical to the
DirectRunner's, `--all` converting every source (each branch a leaf of one pipeline), and the
runner named by its short name."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.runners.options import make_runner
from episodes.records.dataset_spec import load_spec
from tests.fixtures.portable_runner_input import write_runner_check_input
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.raw.traffic_sign import write_traffic_sign_fixture

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes and a scheduler on 127.0.0.1 (no dashboard)."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as local:
        yield local.scheduler_address


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _dask_flags(address: str) -> list[str]:
    return ["--runner", "DaskRunner", f"--dask_client_address={address}"]


@pytest.mark.slow
@pytest.mark.parametrize("source", ["omniglot", "emnist"])
def test_conversion_is_byte_identical_on_a_dask_cluster(source, cluster, tmp_path, capsys):
    common = write_runner_check_input(source, tmp_path / "raw")
    assert convert_cli.main([*common, "--output", str(tmp_path / "direct")]) == 0
    dask_out = tmp_path / "dask"
    assert convert_cli.main([*common, "--output", str(dask_out), *_dask_flags(cluster)]) == 0
    assert f"DaskRunner ({cluster})" in capsys.readouterr().out
    direct, on_dask = _files(tmp_path / "direct"), _files(dask_out)
    assert sorted(direct) == sorted(on_dask)
    assert [n for n in direct if direct[n] != on_dask[n]] == []
    spec = load_spec(dask_out)
    assert spec.total_images > 0 and spec.provenance["rejected_count"] >= 1
    # each rejected input once: the rejected branch did not see the encoded records
    paths = [r["path"] for r in spec.provenance["rejected"]]
    assert len(paths) == len(set(paths)) == spec.provenance["rejected_count"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.slow
def test_all_sources_convert_on_a_dask_cluster(cluster, tmp_path, capsys):
    raw = tmp_path / "raw"
    (raw / "omniglot").mkdir(parents=True)
    write_omniglot_fixture(raw / "omniglot", drawers=2)
    write_traffic_sign_fixture(raw, images_per_class=2)
    common = ["--all", "--input", str(raw), "--sources", "omniglot,traffic_sign"]
    assert convert_cli.main([*common, "--output", str(tmp_path / "direct")]) == 0
    dask_out = str(tmp_path / "dask")
    assert convert_cli.main([*common, "--output", dask_out, *_dask_flags(cluster)]) == 0
    for name in ("omniglot", "traffic_sign"):
        assert _files(tmp_path / "direct" / name) == _files(tmp_path / "dask" / name)


@pytest.mark.parametrize("name", ["DaskRunner", "dask", "daskrunner"])
def test_dask_runner_accepted_by_its_short_name(name):
    choice = make_runner(argparse.Namespace(runner=name, direct_num_workers=1), [])
    assert type(choice.runner).__name__ == "ProjectDaskRunner"
    assert choice.description == "DaskRunner (a local dask cluster)"
    chosen = make_runner(
        argparse.Namespace(runner=name, direct_num_workers=1), ["--dask_npartitions=3"]
    )
    assert chosen.options.get_all_options()["npartitions"] == 3
    assert chosen.options.get_all_options()["partition_size"] is None
    assert choice.options.get_all_options()["npartitions"] is None  # the cluster's threads


def test_partitions_follow_the_clusters_threads(cluster):
    from beam_pipelines.runners.dask_runner import PARTITIONS_PER_THREAD, cluster_partitions

    with distributed.Client(cluster) as client:  # two workers of one thread each
        assert cluster_partitions(client) == PARTITIONS_PER_THREAD * 2 == 4


@pytest.mark.slow
def test_embeddings_are_byte_identical_on_a_dask_cluster(cluster, tmp_path, capsys):
    """The class-embedding job (splits.embed) on Dask: the same npz as the DirectRunner, and the
    one unreadable record reported once (the skipped records and the class sums travel in one
    collection of (kind, value) elements, not as a tagged output every consumer would see)."""
    from splits import embed as embed_cli
    from tests.fixtures.embedding_inputs import write_random_checkpoint, write_tiny_dataset

    spec = write_tiny_dataset(tmp_path / "tiny", corrupt=(2, 1))
    checkpoint = write_random_checkpoint(tmp_path / "run" / "last.pt")
    common = ["--dataset", str(spec.root), "--model", str(checkpoint), "--device", "cpu"]
    common += ["--batch-size", "3", "--chunk-size", "4", "--no-progress"]
    assert embed_cli.main([*common, "--output", str(tmp_path / "direct.npz")]) == 0
    direct_out = capsys.readouterr().out
    on_dask = tmp_path / "dask.npz"
    assert embed_cli.main([*common, "--output", str(on_dask), *_dask_flags(cluster)]) == 0
    out = capsys.readouterr().out
    assert f"DaskRunner ({cluster})" in out
    assert on_dask.read_bytes() == (tmp_path / "direct.npz").read_bytes()
    assert "skipped 1 unreadable records" in direct_out and "skipped 1 unreadable records" in out
    assert "2.tfrecords record 1" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dask.npz", "direct.npz", "run", "tiny"]
