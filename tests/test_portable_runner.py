"""The conversion and shard jobs through Beam's PortableRunner (embedded job service, LOOPBACK
workers): the submission path of Flink, Spark and Dataflow Runner v2, run locally. Every output
file must be byte-identical to the DirectRunner's."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.episodes import main as shards_main
from beam_pipelines.runner_options import make_runner
from episodes.records.dataset_spec import load_spec
from tests.raw_fixtures.emnist import write_emnist_fixture
from tests.raw_fixtures.omniglot import write_omniglot_fixture
from tests.test_reader_fixtures import write_dataset

PORTABLE = [
    "--runner",
    "PortableRunner",
    "--job_endpoint",
    "embed",
    "--environment_type",
    "LOOPBACK",
]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _assert_same_folders(direct: Path, portable: Path) -> None:
    a, b = _files(direct), _files(portable)
    assert sorted(a) == sorted(b)
    different = [name for name in a if a[name] != b[name]]
    assert not different, f"files differ between DirectRunner and PortableRunner: {different}"


def write_runner_check_input(source: str, raw: Path) -> list[str]:
    """Write the raw fixture of `source` ("omniglot" or "emnist") into `raw`; the convert flags
    that read it. EMNIST byclass: row-range units, a truncated file (rejected rows), no class
    split."""
    raw.mkdir()
    if source == "omniglot":
        write_omniglot_fixture(raw)
        return ["--source", source, "--input", str(raw)]
    write_emnist_fixture(raw)
    return ["--source", source, "--input", str(raw), "--emnist-rows-per-unit", "40"]


@pytest.mark.parametrize("source", ["omniglot", "emnist"])
def test_conversion_is_byte_identical_on_the_portable_runner(source, tmp_path, capsys):
    common = write_runner_check_input(source, tmp_path / "raw")
    assert convert_cli.main([*common, "--output", str(tmp_path / "direct")]) == 0
    assert convert_cli.main([*common, "--output", str(tmp_path / "portable"), *PORTABLE]) == 0
    assert "PortableRunner" in capsys.readouterr().out
    _assert_same_folders(tmp_path / "direct", tmp_path / "portable")
    spec = load_spec(tmp_path / "portable")
    assert spec.total_images > 0 and spec.provenance["rejected_count"] >= 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_episode_shards_are_byte_identical_on_the_portable_runner(tmp_path):
    toy = write_dataset(tmp_path / "toy")
    common = [
        "--dataset",
        str(toy.root),
        "--split",
        "test",
        "--episodes",
        "9",
        "--seed",
        "5",
        "--num-shards",
        "4",
        "--mode",
        "fixed",
        "--ways",
        "3",
        "--shots",
        "2",
        "--query",
        "2",
    ]
    assert shards_main([*common, "--output", str(tmp_path / "direct")]) == 0
    assert shards_main([*common, "--output", str(tmp_path / "portable"), *PORTABLE]) == 0
    _assert_same_folders(tmp_path / "direct", tmp_path / "portable")
    assert len(list((tmp_path / "portable").glob("episodes-*.tfrecords"))) == 4


def test_direct_num_workers_refused_for_the_portable_runner():
    """Its SDK workers are set by its own flags: a DirectRunner worker count is refused in one
    line, not silently ignored (one SDK worker ran whatever it said)."""
    with pytest.raises(ValueError, match="--direct_num_workers 2 applies to the DirectRunner"):
        make_runner(argparse.Namespace(runner="PortableRunner", direct_num_workers=2), [])
