"""Object storage for real: a local S3-compatible server (moto) on 127.0.0.1 and Beam's S3 file
system. Conversion s3 -> s3 gives the same bytes as a local one, a failed run publishes no spec,
shards and embeddings go to s3, `episodes.fetch` brings a dataset back, and unfinished or remote
folders get one clear line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines import verify as verify_cli
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.sources import get_source_class
from beam_pipelines.sources.dtd import DTDSource
from beam_pipelines.sources.ilsvrc import TRAIN_TAR, IlsvrcSource
from beam_pipelines.sources.omniglot import OmniglotSource
from beam_pipelines.sources.tfds_source import TfdsSource
from beam_pipelines.sources.traffic_sign import TrafficSignSource
from episodes import fetch as fetch_cli
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import SpecError
from episodes.sampling.sampler_config import SamplerConfig
from tests.fixtures.local_runner import make_local_runner
from tests.fixtures.object_store import (
    KEY,
    SHARD_ARGS,
    S3Server,
    embed_here_and_from,
    files_of,
    run_cli,
    same_dataset,
    shards_read_where_they_lie,
    some_classes,
    spec_without_paths,
)
from tests.fixtures.ports import free_port
from tests.fixtures.raw.aircraft import write_aircraft_fixture
from tests.fixtures.raw.cifar100 import write_cifar100_fixture
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.raw.emnist import write_emnist_fixture
from tests.fixtures.raw.fungi import write_fungi_fixture
from tests.fixtures.raw.ilsvrc import write_ilsvrc_fixture
from tests.fixtures.raw.lfw import write_lfw_fixture
from tests.fixtures.raw.mscoco import write_mscoco_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.raw.quickdraw import write_quickdraw_fixture
from tests.fixtures.raw.traffic_sign import write_traffic_sign_fixture
from tests.fixtures.raw.vgg_flower import write_vgg_flower_fixture


@pytest.fixture(scope="module")
def omniglot(s3, tmp_path_factory):
    """The Omniglot fixture (folders and zips) uploaded, and its local conversion."""
    raw = tmp_path_factory.mktemp("raw")
    fixture = write_omniglot_fixture(raw / "folders", drawers=2)
    (raw / "zipped").mkdir()
    write_omniglot_fixture(raw / "zipped", drawers=2, zipped=True)
    s3.upload(raw / "folders", "s3://raw/omniglot")
    s3.upload(raw / "zipped", "s3://raw/omniglot_zipped")
    local = tmp_path_factory.mktemp("local") / "omniglot"
    convert(OmniglotSource(), fixture.root, local, make_local_runner(1))
    return fixture, local


def _no_staging_left(s3: S3Server) -> None:
    """No hidden staging prefix (`.NAME.tmp-...`) is left anywhere in the output bucket."""
    keys = list(s3.objects("s3://out"))
    assert keys and not [k for k in keys if any(p.startswith(".") for p in k.split("/"))]


@pytest.mark.slow
def test_omniglot_s3_to_s3_is_byte_identical_to_local(s3, omniglot, capsys):
    _, local = omniglot
    argv = ["--source", "omniglot", "--input", "s3://raw/omniglot", "--output", "s3://out/omniglot"]
    assert convert_cli.main(argv + s3.flags) == 0
    assert "Converted omniglot -> s3://out/omniglot" in capsys.readouterr().out
    same_dataset(s3.objects("s3://out/omniglot"), local, "s3://raw/omniglot")
    _no_staging_left(s3)
    # A second run is refused without --overwrite, naming the prefix.
    assert convert_cli.main(argv + s3.flags) == 2
    err = capsys.readouterr().err
    assert (
        "s3://out/omniglot" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    )


@pytest.mark.slow
def test_zipped_omniglot_from_s3_to_a_local_folder(s3, omniglot, tmp_path):
    _, local = omniglot
    out = tmp_path / "omniglot"
    convert(OmniglotSource(), "s3://raw/omniglot_zipped", out, s3.runner())
    remote_input = "s3://raw/omniglot_zipped"
    spec = spec_without_paths((out / "dataset_spec.json").read_bytes(), remote_input)
    assert spec["provenance"]["rejected"][0]["path"].startswith("/images_background.zip:")
    files = files_of(out)
    assert {n: d for n, d in files.items() if n != "dataset_spec.json"} == {
        n: d for n, d in files_of(local).items() if n != "dataset_spec.json"
    }


class CorruptedMidRunOmniglot(OmniglotSource):
    """Omniglot whose zip archive is overwritten with garbage once the workers start reading:
    a real input that plans fine and then fails inside the pipeline."""

    endpoint = ""

    def read_unit(self, unit):
        import boto3

        _, kind, path, _ = unit.payload
        bucket, _, key = path[len("s3://") :].partition("/")
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
            region_name="us-east-1",
        )
        client.put_object(Bucket=bucket, Key=key, Body=b"not a zip archive any more")
        return super().read_unit(unit)


@pytest.mark.slow
def test_failed_run_publishes_no_spec_and_keeps_the_old_output(s3, omniglot, tmp_path):
    fixture, local = omniglot
    source_zips = tmp_path / "zips"
    source_zips.mkdir()
    write_omniglot_fixture(source_zips, drawers=2, zipped=True)
    s3.upload(source_zips, "s3://raw/doomed")
    source = CorruptedMidRunOmniglot()
    source.endpoint = s3.endpoint
    # A fresh prefix: nothing at all is published, no staging objects are left.
    with pytest.raises(Exception, match="zip|Zip"):
        convert(source, "s3://raw/doomed", "s3://out/fresh/omniglot", s3.runner())
    assert s3.objects("s3://out/fresh") == {}
    # Over a finished output (with --overwrite): the old dataset stays as it was.
    s3.upload(source_zips, "s3://raw/doomed")
    convert(OmniglotSource(), fixture.root, tmp_path / "ok", make_local_runner(1))
    s3.upload(tmp_path / "ok", "s3://out/kept/omniglot")
    before = s3.objects("s3://out/kept")
    with pytest.raises(Exception, match="zip|Zip"):
        convert(source, "s3://raw/doomed", "s3://out/kept/omniglot", s3.runner(), overwrite=True)
    assert s3.objects("s3://out/kept") == before
    assert "omniglot/dataset_spec.json" in before


def test_bad_remote_input_fails_before_the_pipeline(s3, capsys):
    argv = [
        "--source",
        "omniglot",
        "--input",
        "s3://raw/nothing_here",
        "--output",
        "s3://out/never",
    ]
    assert convert_cli.main(argv + s3.flags) == 2
    err = capsys.readouterr().err.strip()
    assert "s3://raw/nothing_here" in err and "not found" in err and "\n" not in err
    assert s3.objects("s3://out/never") == {}


class LocalOnlySource(OmniglotSource):
    """A source (an extension's) that has not said it reads object storage."""

    name = "local_only"
    remote_input = False


def test_a_source_without_remote_input_refuses_urls_up_front(tmp_path):
    runner = make_local_runner(1)
    with pytest.raises(ValueError, match="the local_only source reads local files only") as exc:
        convert(LocalOnlySource(), "s3://raw/anything", tmp_path / "out", runner)
    assert "cifar100" in str(exc.value) and "tfds" in str(exc.value)  # what does read URLs
    assert not (tmp_path / "out").exists()


def _archive_source_fixture(name: str, raw: Path):
    """(fixture root, configured source) of the sources read from archives and data dirs."""
    if name == "tfds":
        tfds_fixture = pytest.importorskip("tests.fixtures.raw.tfds")
        return tfds_fixture.write_tfds_fixture(raw).root, TfdsSource(tfds_name=tfds_fixture.NAME)
    write = {
        "cifar100": (write_cifar100_fixture, {"cifar100_rows_per_unit": 64}),
        "emnist": (write_emnist_fixture, {"emnist_rows_per_unit": 40}),
        "lfw": (write_lfw_fixture, {"lfw_images_per_unit": 15}),
        "lfw_folders": (partial(write_lfw_fixture, extracted=True), {}),
    }
    writer, options = write[name]
    fixture = writer(raw)
    return fixture.root, get_source_class(name.split("_")[0])(**options)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cifar100", "emnist", "lfw", "lfw_folders", "tfds"])
def test_archive_and_data_dir_sources_read_s3_input(s3, tmp_path, name):
    """CIFAR-100 (tar.gz), EMNIST (zip of gzip IDX files), LFW (tgz, or person folders) and a
    prepared TFDS data dir (TFRecord shards) read where they lie in a bucket: the same records
    and spec as from the local files, the input's location aside."""
    raw = tmp_path / "raw"
    root, source = _archive_source_fixture(name, raw)
    remote_root = _remote_root(s3, raw, root, f"s3://raw/{name}-input")
    local, remote = tmp_path / "local", tmp_path / "remote"
    convert(source, root, local, make_local_runner(1))
    report = convert(source, remote_root, remote, s3.runner())
    assert report.images > 0
    expected, found = files_of(local), files_of(remote)
    assert sorted(found) == sorted(expected)
    for file, data in expected.items():
        if file != "dataset_spec.json":
            assert found[file] == data, file
    local_spec = expected["dataset_spec.json"].decode().replace(str(raw.resolve()), remote_root)
    local_spec = local_spec.replace(str(root.resolve()), remote_root)
    assert json.loads(found["dataset_spec.json"]) == json.loads(local_spec)


def _remote_root(s3: S3Server, raw: Path, fixture_root: Path, url: str) -> str:
    """Upload the raw folder `raw` to `url`; the URL of the fixture's input folder there."""
    s3.upload(raw, url)
    relative = fixture_root.relative_to(raw).as_posix()
    return url if relative == "." else f"{url}/{relative}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, write",
    [
        ("mscoco", write_mscoco_fixture),
        ("fungi", write_fungi_fixture),
        ("aircraft", write_aircraft_fixture),
        ("vgg_flower", write_vgg_flower_fixture),
    ],
)
def test_annotated_sources_read_s3_input(s3, tmp_path, name, write):
    """Annotation files (COCO JSON, variant lists, a MATLAB file) and images read from s3."""
    from beam_pipelines.sources import get_source_class

    fixture = write(tmp_path / "raw", classes=some_classes(name), images_per_class=1)
    remote_root = _remote_root(s3, tmp_path / "raw", fixture.root, f"s3://raw/{name}")
    source = get_source_class(name)(random_split=True)
    local, remote = tmp_path / "local", tmp_path / "remote"
    convert(source, fixture.root, local, make_local_runner(1))
    convert(source, remote_root, remote, s3.runner())
    same_dataset(files_of(remote), local, remote_root)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["tar", "tars"])
def test_imagenet_archives_s3_to_s3_are_byte_identical_to_local(s3, tmp_path, layout, capsys):
    """The training tar of per-synset tars (or the folder of synset tars) in a bucket: planned
    from tar headers read in place, each class streamed by a worker, nothing downloaded."""
    fixture = write_ilsvrc_fixture(tmp_path / "raw", layout=layout)
    remote_root = _remote_root(s3, tmp_path / "raw", fixture.root, f"s3://raw/imagenet_{layout}")
    options = ["--source", "ilsvrc_2012", "--ilsvrc-allow-missing-classes"]
    local = tmp_path / "local"
    assert convert_cli.main([*options, "--input", str(fixture.root), "--output", str(local)]) == 0
    out = f"s3://out/imagenet_{layout}"
    workers = ["--direct_num_workers", "2"] if layout == "tar" else []
    argv = [*options, "--input", remote_root, "--output", out, *workers]
    assert convert_cli.main(argv + s3.flags) == 0
    assert f"Converted ilsvrc_2012 -> {out}" in capsys.readouterr().out
    same_dataset(s3.objects(out), local, remote_root)
    _no_staging_left(s3)
    assert _open_uploads(s3) == []


def test_imagenet_training_tar_named_by_its_object_url(s3, tmp_path):
    from episodes.storage.paths import use_options

    use_options(s3.runner().options)  # as a command does before it plans: no earlier test's
    fixture = write_ilsvrc_fixture(tmp_path / "raw", layout="tar")
    url = _remote_root(s3, tmp_path / "raw", fixture.root, "s3://raw/imagenet_object")
    plan = IlsvrcSource(ilsvrc_allow_missing_classes=True).plan(f"{url}/{TRAIN_TAR}")
    local = IlsvrcSource(ilsvrc_allow_missing_classes=True).plan(fixture.root / TRAIN_TAR)
    assert [c.name for c in plan.classes] == [c.name for c in local.classes]
    assert [u.expected_items for u in plan.units] == [u.expected_items for u in local.units]
    assert plan.units[0].payload[1:3] == ("member", f"{url}/{TRAIN_TAR}")


@pytest.mark.slow
def test_quickdraw_s3_to_s3_is_byte_identical_to_local(s3, tmp_path):
    """Rows read with one ranged read per unit; the truncated file is reported as locally."""
    classes = some_classes("quickdraw")
    fixture = write_quickdraw_fixture(tmp_path / "raw", classes=classes, images_per_class=5)
    remote_root = _remote_root(s3, tmp_path / "raw", fixture.root, "s3://raw/quickdraw")
    options = ["--source", "quickdraw", "--quickdraw-chunk-rows", "2", "--random-split"]
    local = tmp_path / "local"
    assert convert_cli.main([*options, "--input", str(fixture.root), "--output", str(local)]) == 0
    argv = [*options, "--input", remote_root, "--output", "s3://out/quickdraw"]
    assert convert_cli.main(argv + s3.flags) == 0
    same_dataset(s3.objects("s3://out/quickdraw"), local, remote_root)


@pytest.mark.slow
@pytest.mark.parametrize(
    "source_cls, write",
    [(DTDSource, write_dtd_fixture), (TrafficSignSource, write_traffic_sign_fixture)],
    ids=["dtd", "traffic_sign"],
)
def test_class_folder_sources_read_s3_input(s3, tmp_path, source_cls, write):
    fixture = write(tmp_path / "raw", classes=None, images_per_class=1)
    url = f"s3://raw/{source_cls.name}"
    s3.upload(tmp_path / "raw", url)
    local, remote = tmp_path / "local", tmp_path / "remote"
    convert(source_cls(), fixture.root, local, make_local_runner(1))
    remote_root = f"{url}/{fixture.root.name}"
    convert(source_cls(), remote_root, remote, s3.runner())
    same_dataset(files_of(remote), local, remote_root)


@pytest.mark.slow
def test_unfinished_remote_output_is_named_everywhere(s3, omniglot, tmp_path, capsys):
    _, local = omniglot
    for name in ("0.tfrecords", "0.index"):
        s3.client.put_object(
            Bucket="out", Key=f"unfinished/{name}", Body=(local / name).read_bytes()
        )
    assert verify_cli.main(["s3://out/unfinished"] + s3.flags) == 1
    out = capsys.readouterr().out
    assert "incomplete" in out and "dataset_spec.json" in out
    argv = ["--dataset", "s3://out/unfinished", "--output", str(tmp_path / "copy")] + s3.flags
    assert fetch_cli.run_main(fetch_cli.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert "incomplete" in err and "s3://out/unfinished" in err and "\n" not in err
    assert not (tmp_path / "copy").exists()
    argv = [
        "--source",
        "omniglot",
        "--input",
        "s3://raw/omniglot",
        "--output",
        "s3://out/unfinished",
    ]
    assert convert_cli.main(argv + s3.flags) == 2
    assert "unfinished" in capsys.readouterr().err
    # The same for a local folder with records but no spec.
    folder = tmp_path / "half"
    folder.mkdir()
    (folder / "0.tfrecords").write_bytes((local / "0.tfrecords").read_bytes())
    with pytest.raises(SpecError, match="incomplete"):
        EpisodeReader([str(folder)], "test", SamplerConfig.fixed(2, 1, 1), seed=0)
    assert verify_cli.main([str(folder)]) == 1
    assert "incomplete" in capsys.readouterr().out


@pytest.mark.slow
def test_fetch_brings_back_what_the_reader_reads(s3, omniglot, tmp_path, capsys):
    _, local = omniglot
    s3.upload(local, "s3://out/fetchme")
    with pytest.raises(SpecError, match="episodes.fetch --dataset s3://out/fetchme --output"):
        EpisodeReader(["s3://out/fetchme"], "test", SamplerConfig.fixed(2, 1, 1), seed=0)
    copy = tmp_path / "copy"
    argv = ["--dataset", "s3://out/fetchme", "--output", str(copy)]
    assert fetch_cli.main(argv + s3.flags) == 0
    assert files_of(copy) == files_of(local)
    assert [p.name for p in tmp_path.iterdir()] == ["copy"]  # no staging folder left
    config = SamplerConfig.fixed(3, 1, 1)
    with (
        EpisodeReader([str(copy)], "test", config, seed=3) as a,
        EpisodeReader([str(local)], "test", config, seed=3) as b,
    ):
        assert (a.episode(0).support_images == b.episode(0).support_images).all()
    # An existing folder is not replaced without --overwrite (the old positional form, which
    # still works, with a note for each positional).
    capsys.readouterr()
    with pytest.raises(fetch_cli.UserError, match="--overwrite"):
        fetch_cli.main(["s3://out/fetchme", str(copy)] + s3.flags)
    notes = capsys.readouterr().err
    assert "note: the positional URL is now --dataset URL" in notes
    assert "note: the positional LOCAL is now --output LOCAL" in notes
    # verify checks a finished remote dataset class by class, without copying it first.
    assert verify_cli.main(["s3://out/fetchme", "--no-decode"] + s3.flags) == 0
    assert "OK" in capsys.readouterr().out


# fixed ways: the alphabets off (else an error)


@pytest.mark.slow
def test_episode_shards_to_s3_match_local(s3, omniglot, tmp_path):
    from beam_pipelines import episodes as shards_cli

    _, local = omniglot
    argv = ["--dataset", str(local), *SHARD_ARGS]
    assert shards_cli.main(argv + ["--output", str(tmp_path / "shards")]) == 0
    assert shards_cli.main(argv + ["--output", "s3://out/shards"] + s3.flags) == 0
    assert s3.objects("s3://out/shards") == files_of(tmp_path / "shards")
    _no_staging_left(s3)
    # each worker hashed its shard while writing it; the files published are those hashed
    manifest = json.loads((tmp_path / "shards" / "episodes.json").read_text())
    hashes = [
        hashlib.sha256((tmp_path / "shards" / f).read_bytes()).hexdigest()
        for f in manifest["files"]
    ]
    assert manifest["sha256"] == hashes and not (tmp_path / "shards" / "_sha256").exists()


@pytest.mark.slow
def test_embeddings_to_s3_match_local(s3, tmp_path):
    from splits.embeddings.pipeline import EmbedOptions, embed_dataset
    from tests.fixtures.embedding_inputs import write_random_checkpoint, write_tiny_dataset

    spec = write_tiny_dataset(tmp_path / "tiny")
    checkpoint = write_random_checkpoint(tmp_path / "run" / "last.pt")
    options = EmbedOptions(batch_size=8, chunk_size=4, progress=False)
    embed_dataset(spec.root, checkpoint, tmp_path / "emb.npz", make_local_runner(1), options)
    embed_dataset(spec.root, checkpoint, "s3://out/emb/tiny.npz", s3.runner(), options)
    assert s3.objects("s3://out/emb") == {"tiny.npz": (tmp_path / "emb.npz").read_bytes()}


def test_remote_zip_opens_as_a_seekable_stream(s3, omniglot):
    """zipfile reads a remote archive through the stream `open_binary` returns (it seeks to the
    central directory at the end, then to each member)."""
    from episodes.storage.paths import open_binary, use_options

    use_options(s3.runner().options)
    with open_binary("s3://raw/omniglot_zipped/images_background.zip") as stream:
        assert stream.seekable()
        with zipfile.ZipFile(stream) as archive:
            names = [n for n in archive.namelist() if n.endswith(".png")]
            assert names and archive.read(names[-1])[:8] == b"\x89PNG\r\n\x1a\n"


def _open_uploads(s3: S3Server, bucket: str = "out") -> list[str]:
    listed = s3.client.list_multipart_uploads(Bucket=bucket)
    return [u["Key"] for u in listed.get("Uploads", [])]


def test_s3_writer_puts_small_objects_and_aborts_failed_multipart_uploads(s3):
    from episodes.storage.uploads import S3ObjectWriter

    part = 5 * 2**20  # S3's smallest part
    with S3ObjectWriter(s3.client, "s3://out/writer/small.bin", part) as out:
        out.write(b"x" * 1000)
    assert s3.objects("s3://out/writer") == {"small.bin": b"x" * 1000}
    assert _open_uploads(s3) == []  # one PUT, no multipart upload at all
    data = bytes(range(256)) * (11 * 2**20 // 256)
    with S3ObjectWriter(s3.client, "s3://out/writer/large.bin", part) as out:
        for i in range(0, len(data), 2**20):
            out.write(data[i : i + 2**20])
        assert len(out.buffer) < part and len(out.parts) == 2  # one part held at most
    assert s3.objects("s3://out/writer")["large.bin"] == data
    with pytest.raises(RuntimeError, match="stop"):
        with S3ObjectWriter(s3.client, "s3://out/writer/failed.bin", part) as out:
            out.write(data)
            assert _open_uploads(s3) == ["writer/failed.bin"]
            raise RuntimeError("stop")
    assert _open_uploads(s3) == [] and "failed.bin" not in s3.objects("s3://out/writer")


HOLD_AN_UPLOAD = """
import sys, time
from apache_beam.options.pipeline_options import PipelineOptions
from episodes.storage import paths as storage_paths
storage_paths.use_options(PipelineOptions(sys.argv[2:]))
out = storage_paths.create_stream(sys.argv[1])
out.write(b"z" * (9 * 2**20))  # one part sent: a multipart upload is open
print("uploading", flush=True)
time.sleep(600)
"""


def _killed_while_uploading(s3: S3Server, url: str) -> None:
    """A process killed (SIGKILL) with a multipart upload to `url` open."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AN_UPLOAD, url, *s3.flags], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "uploading"
    finally:
        holder.kill()  # SIGKILL: nothing of the process runs any more
        holder.wait()


@pytest.mark.slow
def test_clean_only_removes_a_killed_runs_leftovers_and_converts_nothing(s3, capsys):
    """kill -9 mid-upload into the staging prefix, and mid-publish into the output itself:
    `convert --clean-only` aborts both uploads and removes the staging objects, one line each
    and one summary; the output's finished objects stay; a second run finds nothing."""
    s3.put("s3://out/cleaned/omniglot/kept.txt", b"kept")
    s3.put("s3://out/cleaned/.omniglot.tmp-1-dead/_spill/a", b"a")
    _killed_while_uploading(s3, "s3://out/cleaned/.omniglot.tmp-1-dead/0.tfrecords")
    _killed_while_uploading(s3, "s3://out/cleaned/omniglot/1.tfrecords")
    assert sorted(_open_uploads(s3)) == [
        "cleaned/.omniglot.tmp-1-dead/0.tfrecords",
        "cleaned/omniglot/1.tfrecords",
    ]
    capsys.readouterr()
    argv = ["--clean-only", "--output", "s3://out/cleaned/omniglot", *s3.flags]
    assert convert_cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "cleaned s3://out/cleaned/omniglot: 2 leftover(s) of killed runs removed"
    assert "removed s3://out/cleaned/.omniglot.tmp-1-dead" in err
    assert "aborted 1 unfinished upload(s) under s3://out/cleaned/omniglot" in err
    assert _open_uploads(s3) == []
    assert s3.objects("s3://out/cleaned") == {"omniglot/kept.txt": b"kept"}
    assert convert_cli.main(argv) == 0
    assert "nothing left over" in capsys.readouterr().out


@pytest.mark.slow
def test_killed_runs_leave_no_upload_after_the_next_run(s3, omniglot, tmp_path, capsys):
    """kill -9 of a process in the middle of an upload into a staging prefix leaves an open
    multipart upload and staging objects; the next conversion to that output removes both."""
    staging = "s3://out/revived/.omniglot.tmp-1-dead"
    s3.client.put_object(Bucket="out", Key="revived/.omniglot.tmp-1-dead/_spill/a", Body=b"a")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AN_UPLOAD, f"{staging}/0.tfrecords", *s3.flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "uploading"
    finally:
        holder.kill()  # SIGKILL: nothing of the process runs any more
        holder.wait()
    assert _open_uploads(s3) == ["revived/.omniglot.tmp-1-dead/0.tfrecords"]
    capsys.readouterr()
    argv = ["--source", "omniglot", "--input", "s3://raw/omniglot"]
    assert convert_cli.main(argv + ["--output", "s3://out/revived/omniglot"] + s3.flags) == 0
    assert _open_uploads(s3) == []
    assert not [k for k in s3.objects("s3://out") if ".tmp-" in k]
    err = capsys.readouterr().err
    assert f"removed {staging}: left by a run that did not finish" in err


def test_failed_job_aborts_the_uploads_of_its_staging_prefix(s3):
    from beam_pipelines.conversion.pipeline import abort_output
    from episodes.storage import paths as storage_paths

    storage_paths.use_options(s3.runner().options)
    staging = storage_paths.staging_prefix("s3://out/aborted/omniglot")
    out = storage_paths.create_stream(f"{staging}/_spill/b.frames")
    out.write(b"q" * (9 * 2**20))
    s3.client.put_object(Bucket="out", Key=staging[len("s3://out/") :] + "/0.index", Body=b"i")
    assert len(_open_uploads(s3)) == 1
    abort_output(staging)  # what a failed or interrupted conversion runs
    assert _open_uploads(s3) == [] and s3.objects("s3://out/aborted") == {}


@pytest.mark.slow
def test_all_sources_from_a_bucket_root_to_a_bucket(s3, tmp_path, capsys):
    """`convert --all` on a bucket root: every source converted to OUT_ROOT/<dataset> in one
    pipeline, identical to a local --all run; a broken layout is skipped with its reason, as
    locally."""
    raw = tmp_path / "raw"
    (raw / "omniglot").mkdir(parents=True)
    write_omniglot_fixture(raw / "omniglot", drawers=1)
    write_traffic_sign_fixture(raw, images_per_class=1)
    (raw / "cifar100" / "cifar-100-python").mkdir(parents=True)
    (raw / "cifar100" / "cifar-100-python" / "meta").write_bytes(b"not read")
    s3.upload(raw, "s3://raw/all")
    only = ["--sources", "omniglot,traffic_sign,cifar100"]
    local = tmp_path / "local"
    assert convert_cli.main(["--all", "--input", str(raw), "--output", str(local), *only]) == 0
    assert "cifar-100-python" in capsys.readouterr().out  # locally: skipped for its layout
    argv = ["--all", "--input", "s3://raw/all", "--output", "s3://out/all", *only]
    assert convert_cli.main(argv + s3.flags) == 0
    printed = capsys.readouterr().out
    assert "cifar-100-python" in printed  # read from the bucket: skipped for its layout too
    for name in ("omniglot", "traffic_sign"):
        remote = s3.objects(f"s3://out/all/{name}")
        expected = files_of(local / name)
        assert sorted(remote) == sorted(expected)
        assert [n for n in expected if n != "dataset_spec.json" and remote[n] != expected[n]] == []
    _no_staging_left(s3)


def test_learners_name_fetch_for_a_remote_dataset():
    from learners.feed.episode_source import dataset_dirs

    with pytest.raises(FileNotFoundError, match="episodes.fetch --dataset s3://out/x --output"):
        dataset_dirs("s3://out/x")


def test_progress_counts_reach_the_launcher_through_object_storage(s3):
    """Encoders on any runner count into the staging prefix; the launcher sums the counts."""
    from beam_pipelines.conversion.progress import ImageCounter, counted_images, progress_folder
    from episodes.storage import paths as storage_paths

    storage_paths.use_options(s3.runner().options)
    staging = "s3://out/.progress.tmp-1-x"
    counters = [ImageCounter(staging) for _ in range(3)]
    for n, counter in enumerate(counters, 1):
        for _ in range(n * 4):
            counter.advance()
        counter.flush()
    assert counted_images(progress_folder(staging)) == 4 + 8 + 12
    storage_paths.discard_prefix(staging)
    assert counted_images(progress_folder(staging)) == 0


NO_AWS_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, args",
    [
        ("beam_pipelines.convert", ["--source", "omniglot", "--output", "/tmp/never", "--input"]),
        ("episodes.fetch", ["--output", "/nonexistent/never", "--dataset"]),
        ("beam_pipelines.verify", ["--dataset"]),
    ],
    ids=["convert", "fetch", "verify"],
)
def test_unreachable_store_or_no_credentials_give_one_line_at_once(module, args, s3):
    """What the user lacks is named in one line within --storage-timeout, before any work
    (Beam's own retries took 7-8 minutes)."""
    closed = free_port()  # nothing listens there
    keys = ["--s3_access_key_id=k", "--s3_secret_access_key=k", "--s3_region_name=us-east-1"]
    url = "s3://nope/x"
    unreachable = [f"--s3_endpoint_url=http://127.0.0.1:{closed}", *keys, "--storage-timeout=2"]
    rc, err, seconds = run_cli(module, [*args, url, *unreachable], {})
    assert rc == 2 and seconds < 60, err
    assert err.count("\n") == 0 and url in err and "no answer from http://127.0.0.1" in err
    assert "--storage-timeout 2 s" in err
    if module != "beam_pipelines.convert":  # the same check: the other cases once, by convert
        return
    no_keys = [f"--s3_endpoint_url={s3.endpoint}", "--s3_region_name=us-east-1"]
    rc, err, _ = run_cli(module, [*args, url, *no_keys], NO_AWS_CREDENTIALS)
    assert rc == 2 and err.count("\n") == 0 and url in err, err
    assert "no S3 credentials found" in err and "--s3_access_key_id" in err
    rc, err, _ = run_cli(module, [*args, url, *s3.flags], {})
    assert rc == 2 and err.count("\n") == 0 and "no bucket 'nope'" in err, err


@pytest.mark.slow
def test_omniglot_s3_to_s3_on_a_dask_cluster_is_byte_identical(s3, omniglot, capsys):
    """Dask worker processes get the S3 options from the launcher (a worker plugin), as Beam's
    harness gives them on other runners: staging, spill and publishing in the bucket."""
    distributed = pytest.importorskip("distributed")
    _, local = omniglot
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        argv = ["--source", "omniglot", "--input", "s3://raw/omniglot", "--output"]
        dask = ["--runner", "DaskRunner", f"--dask_client_address={cluster.scheduler_address}"]
        assert convert_cli.main([*argv, "s3://out/omniglot_dask", *dask, *s3.flags]) == 0
    assert "DaskRunner" in capsys.readouterr().out
    same_dataset(s3.objects("s3://out/omniglot_dask"), local, "s3://raw/omniglot")
    _no_staging_left(s3)
    assert _open_uploads(s3) == []


CTRL_C_MID_UPLOAD = """
import sys, time
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.runners.options import make_runner
from beam_pipelines.sources.omniglot import OmniglotSource
from episodes.storage import paths as storage_paths
import argparse

class SlowUpload(OmniglotSource):
    def read_unit(self, unit):
        out = storage_paths.create_stream(f"{self.staging}/big.bin")
        out.write(b"z" * (9 * 2**20))  # one part sent: a multipart upload is open
        print("uploading", flush=True)
        time.sleep(600)
        return super().read_unit(unit)

source = SlowUpload()
runner = make_runner(argparse.Namespace(runner="DirectRunner", direct_num_workers=1), sys.argv[1:])
import beam_pipelines.conversion.pipeline as conversion
begin = conversion.begin_output
def remembered(output, overwrite):
    source.staging = begin(output, overwrite)
    return source.staging
conversion.begin_output = remembered
convert(source, "s3://raw/omniglot", "s3://out/ctrlc/omniglot", runner, exit_on_ctrl_c=True)
"""


@pytest.mark.slow
def test_ctrl_c_mid_upload_aborts_it(s3, omniglot):
    """SIGINT while a worker's multipart upload is open: the conversion stops (exit 130), its
    staging prefix is removed and the upload aborted at once, no later run needed."""
    import signal

    run = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_MID_UPLOAD, *s3.flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdout.readline().strip() == "uploading"
        assert [k for k in _open_uploads(s3) if k.startswith("ctrlc/")]
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert "interrupted" in err and "staging folder removed" in err
    assert [k for k in _open_uploads(s3) if k.startswith("ctrlc/")] == []
    assert s3.objects("s3://out/ctrlc") == {}


@pytest.mark.slow
def test_remote_verify_matches_local_and_names_a_damaged_object(s3, omniglot, capsys):
    from beam_pipelines.verify import verify_dataset, verify_remote_dataset
    from episodes.storage import paths as storage_paths

    _, local = omniglot
    s3.upload(local, "s3://out/checked")
    storage_paths.use_options(s3.runner().options)
    remote = verify_remote_dataset("s3://out/checked", progress=False)
    here = verify_dataset(local, progress=False)
    assert remote.ok and here.ok
    assert (remote.records, remote.bytes, remote.image_sizes) == (
        here.records,
        here.bytes,
        here.image_sizes,
    )
    data = bytearray((local / "3.tfrecords").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a record
    s3.client.put_object(Bucket="out", Key="checked/3.tfrecords", Body=bytes(data))
    assert verify_cli.main(["--dataset", "s3://out/checked"] + s3.flags) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "class 3" in out and "fewshot-verify" not in out


def test_a_bare_bucket_is_refused_as_an_output(s3, capsys):
    argv = ["--source", "omniglot", "--input", "s3://raw/omniglot", "--output", "s3://out"]
    assert convert_cli.main(argv + s3.flags) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "s3://out: an output must be a folder inside the bucket" in err


@pytest.mark.slow
def test_episode_shards_read_an_s3_dataset_where_it_lies(s3, omniglot, tmp_path, capsys):
    """`--dataset s3://...`: the workers read the records by ranged reads (odd classes without
    their .index object: rebuilt from their records), and the shards are the local bytes."""
    _, local = omniglot
    shards_read_where_they_lie(s3, local, "s3://raw", tmp_path, capsys)


@pytest.mark.slow
def test_embeddings_read_an_s3_dataset_where_it_lies(s3, tmp_path, capsys):
    """`splits.embed --dataset s3://...`: records read in the workers, the local run's npz bytes,
    a corrupt record skipped and named by its object URL."""
    from splits import embed as embed_cli

    argv = embed_here_and_from(s3, "s3://raw/embed/tiny", tmp_path)
    out = capsys.readouterr().out
    assert "skipped 1 unreadable records: s3://raw/embed/tiny/2.tfrecords record 1" in out
    s3.client.delete_object(Bucket="raw", Key="embed/tiny/3.tfrecords")
    assert embed_cli.main([*argv, str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "1 records objects missing" in err
    assert "s3://raw/embed/tiny/3.tfrecords" in err and not (tmp_path / "x.npz").exists()


def test_concurrent_raw_reads_keep_order_bytes_and_errors_in_place(s3, tmp_path):
    """Several objects in flight per worker (episodes.storage.parallel_reads): the bytes come
    back in the order asked, a missing object as its OSError in its place, local files mixed
    in; the same as one read at a time."""
    from episodes.storage import paths as storage_paths
    from episodes.storage.parallel_reads import read_in_order

    storage_paths.use_options(s3.runner().options)
    rng = np.random.default_rng(0)
    blobs = [rng.bytes(int(rng.integers(0, 200_000))) for _ in range(40)]
    urls = [f"s3://raw/many/{i:03d}.bin" for i in range(len(blobs))]
    for url, blob in zip(urls, blobs):
        s3.put(url, blob)
    local = tmp_path / "local.bin"
    local.write_bytes(b"local bytes")
    paths = urls[:20] + ["s3://raw/many/missing.bin", str(local)] + urls[20:]
    expected = blobs[:20] + [None, b"local bytes"] + blobs[20:]
    for in_flight in (1, 4, 16):
        got = list(read_in_order(paths, in_flight=in_flight))
        assert [None if isinstance(g, OSError) else g for g in got] == expected
        assert "s3://raw/many/missing.bin" in str(got[20])
    assert [storage_paths.read_bytes(u) for u in urls] == blobs


def test_an_interrupted_run_claims_only_what_existed(s3):
    """The line of a stopped run says an output "is as it was" only when it held something:
    a never-written prefix "was not written" (it said "is as it was" for every URL)."""
    from beam_pipelines.conversion.pipeline import output_exists
    from episodes.storage import paths as storage_paths

    storage_paths.use_options(s3.runner().options)
    assert not output_exists("s3://out/never/omniglot")
    s3.put("s3://out/there/omniglot/dataset_spec.json", b"{}")
    assert output_exists("s3://out/there/omniglot")
