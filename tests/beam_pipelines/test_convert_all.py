"""`convert --all`: every source found under RAW_ROOT in one pipeline, wrong layouts skipped
with their reason, outputs identical to single-source runs and readable by the multi-source
episode reader, nothing written when an output is refused."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.convert_all import candidate_sources, source_folder
from beam_pipelines.sources import SOURCES
from beam_pipelines.sources.dtd import DTDSource
from episodes.records.dataset_spec import load_spec
from tests.fixtures.meta_dataset_checks import convert_source, digest
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.raw.traffic_sign import write_traffic_sign_fixture
from tests.fixtures.raw.vgg_flower import write_vgg_flower_fixture

VGG_SUBSET = ["001.pink primrose", "002.hard-leaved pocket orchid", "003.canterbury bells"]


@pytest.fixture(scope="module")
def raw_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("raw")
    write_dtd_fixture(root, images_per_class=2)
    write_traffic_sign_fixture(root, images_per_class=2)
    (root / "omniglot").mkdir()
    write_omniglot_fixture(root / "omniglot", drawers=2)
    write_vgg_flower_fixture(root, classes=VGG_SUBSET)  # needs its own split file
    (root / "CUB_200_2011" / "attributes").mkdir(parents=True)  # present, wrong layout
    splits = tmp_path_factory.mktemp("splits")
    (splits / "vgg_flower_splits.json").write_text(
        '{"train": ["003.canterbury bells"], "valid": ["001.pink primrose"], '
        '"test": ["002.hard-leaved pocket orchid"]}'
    )
    return root, splits


@pytest.fixture(scope="module")
def converted(raw_root, tmp_path_factory):
    root, splits = raw_root
    out = tmp_path_factory.mktemp("out")
    printed = io.StringIO()
    with redirect_stdout(printed):
        rc = convert_cli.main(
            ["--all", "--input", str(root), "--output", str(out), "--splits-dir", str(splits)]
        )
    return rc, out, printed.getvalue()


def test_found_converted_and_skipped(converted):
    rc, out, printed = converted
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "dtd",
        "omniglot",
        "traffic_sign",
        "vgg_flower",
    ]
    lines = {line.split()[0]: line for line in printed.splitlines() if line.strip()}
    for name in ("dtd", "omniglot", "traffic_sign", "vgg_flower"):
        assert " converted " in lines[name]
    assert " skipped " in lines["cu_birds"] and "not a CUB-200-2011 layout" in lines["cu_birds"]
    assert " not found " in lines["aircraft"] and " not found " in lines["mscoco"]
    assert "found 5, converted 4, skipped 1" in printed
    assert [len(load_spec(out / "dtd").classes(s)) for s in ("train", "valid", "test")] == [
        33,
        7,
        7,
    ]
    assert load_spec(out / "traffic_sign").total_images == 43 * 2
    vgg = load_spec(out / "vgg_flower")
    assert vgg.class_names == [
        "003.canterbury bells",
        "001.pink primrose",
        "002.hard-leaved pocket orchid",
    ]
    assert vgg.provenance["split_origin"].endswith("vgg_flower_splits.json")


def test_outputs_equal_single_source_runs(raw_root, converted, tmp_path):
    root, _ = raw_root
    _, out, _ = converted
    alone = convert_source(DTDSource, root / "dtd", tmp_path / "dtd")
    assert digest(alone.output) == digest(out / "dtd")


def test_multi_source_reader_takes_the_folders(converted):
    from episodes.reading.reader import EpisodeReader
    from episodes.sampling.sampler_config import SamplerConfig

    _, out, _ = converted
    config = SamplerConfig.fixed(ways=3, shots=1, query=1)
    with EpisodeReader(
        [out / "dtd", out / "traffic_sign"], "test", config, seed=0, image_size=8, num_threads=0
    ) as reader:
        episodes = list(reader.episodes(0, 8))
    assert {e.source for e in episodes} == {"dtd", "traffic_sign"}
    for episode in episodes:
        spec = load_spec(out / episode.source)
        assert episode.support_images.shape == (3, 8, 8, 3)
        assert set(episode.support_class_ids) <= set(spec.classes("test"))


def test_refused_output_and_nothing_found(raw_root, tmp_path, capsys):
    root, _ = raw_root
    out = tmp_path / "out"
    (out / "traffic_sign").mkdir(parents=True)
    (out / "traffic_sign" / "keep.txt").write_text("user data")
    rc = convert_cli.main(
        ["--all", "--input", str(root), "--output", str(out), "--sources", "dtd,traffic_sign"]
    )
    assert rc == 2 and "pass --overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["traffic_sign"]  # no dtd, no temp folders
    empty = tmp_path / "empty"
    empty.mkdir()
    assert convert_cli.main(["--all", "--input", str(empty), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no source to convert" in err and "aircraft: fgvc-aircraft-2013b" in err
    with pytest.raises(SystemExit):
        convert_cli.main(
            ["--all", "--input", str(root), "--output", str(out), "--split-file", "x.json"]
        )
    assert (
        convert_cli.main(["--all", "--input", str(root), "--output", str(out), "--sources", "nope"])
        == 2
    )


def test_folder_table(tmp_path):
    assert SOURCES["aircraft"].raw_folder_names() == ("fgvc-aircraft-2013b", "aircraft")
    assert SOURCES["mscoco"].raw_folder_names() == ("mscoco",)  # by default its name
    assert "tfds" not in candidate_sources()
    assert candidate_sources() == sorted(set(SOURCES) - {"tfds"})
    (tmp_path / "GTSRB").mkdir()
    assert source_folder(tmp_path, "traffic_sign") == tmp_path / "GTSRB"
    assert source_folder(tmp_path, "mscoco") is None
    listed = {line.split()[0]: line for line in convert_cli.list_sources().splitlines()}
    assert listed["aircraft"].endswith("[--all: fgvc-aircraft-2013b or aircraft]")
    assert listed["mscoco"].endswith("[--all: mscoco]") and "--all" not in listed["tfds"]
