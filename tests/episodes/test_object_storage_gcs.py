"""gs:// for real: the GCS emulator (`gcp-storage-emulator`) on 127.0.0.1 and Beam's GCS file
system (google-cloud-storage, pinned in requirements.lock). The same checks as s3:// in
tests/episodes/test_object_storage.py: conversions gs -> gs byte-identical to local runs (Omniglot, the
ImageNet training tar of synset tars, QuickDraw), a failure mid-pipeline publishes nothing, the
shards and embed jobs read a gs:// dataset where it lies (the local bytes; an unfinished one
refused in one line), and the next run removes what a killed gs:// run left."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.sources.omniglot import OmniglotSource
from episodes.storage.uploads import bucket_and_key
from tests.fixtures.local_runner import make_local_runner
from tests.fixtures.object_store import (
    SHARD_ARGS,
    embed_here_and_from,
    run_cli,
    same_dataset,
    shards_read_where_they_lie,
    some_classes,
    wait_until_listening,
)
from tests.fixtures.ports import free_port
from tests.fixtures.raw.ilsvrc import write_ilsvrc_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.raw.quickdraw import write_quickdraw_fixture

storage = pytest.importorskip("google.cloud.storage")


@dataclass
class GcsServer:
    endpoint: str
    client: object

    flags = ["--project=fewshot-test"]

    def runner(self):
        import argparse

        from beam_pipelines.runners.options import make_runner

        namespace = argparse.Namespace(runner="DirectRunner", direct_num_workers=1)
        return make_runner(namespace, self.flags)

    def upload(self, folder: Path, url: str) -> str:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.put(f"{url}/{path.relative_to(folder).as_posix()}", path.read_bytes())
        return url

    def put(self, url: str, data: bytes) -> None:
        bucket, key = bucket_and_key(url)
        self.client.bucket(bucket).blob(key).upload_from_string(data)

    def delete(self, url: str) -> None:
        bucket, key = bucket_and_key(url)
        self.client.bucket(bucket).blob(key).delete()

    def objects(self, url: str) -> dict[str, bytes]:
        bucket, _, prefix = url[len("gs://") :].partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        return {
            blob.name[len(prefix) :]: blob.download_as_bytes()
            for blob in self.client.list_blobs(bucket, prefix=prefix)
        }


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """A GCS emulator (in memory) on 127.0.0.1, a random port; STORAGE_EMULATOR_HOST points
    Beam's GCS client (in this process and in worker processes) at it."""
    from google.auth.credentials import AnonymousCredentials

    port = free_port()
    log = tmp_path_factory.mktemp("gcs") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1"]
            + ["--port", str(port), "--in-memory", "--quiet"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = endpoint
    try:
        wait_until_listening(server, port, log, "GCS emulator")
        client = storage.Client(project="fewshot-test", credentials=AnonymousCredentials())
        for bucket in ("raw", "out"):
            client.create_bucket(bucket)
        yield GcsServer(endpoint, client)
    finally:
        server.terminate()
        server.wait(timeout=10)
        if saved is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = saved


def _no_staging_left(gcs: GcsServer) -> None:
    assert not [k for k in gcs.objects("gs://out") if any(p.startswith(".") for p in k.split("/"))]


@pytest.mark.slow
def test_omniglot_gs_to_gs_is_byte_identical_to_local(gcs, tmp_path, capsys):
    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=2)
    local = tmp_path / "local"
    convert(OmniglotSource(), fixture.root, local, make_local_runner(1))
    remote_root = gcs.upload(fixture.root, "gs://raw/omniglot")
    argv = ["--source", "omniglot", "--input", remote_root, "--output", "gs://out/omniglot"]
    assert convert_cli.main(argv + gcs.flags) == 0
    assert "Converted omniglot -> gs://out/omniglot" in capsys.readouterr().out
    same_dataset(gcs.objects("gs://out/omniglot"), local, remote_root)
    _no_staging_left(gcs)


@pytest.mark.slow
def test_imagenet_tar_and_quickdraw_gs_to_gs_are_byte_identical_to_local(gcs, tmp_path):
    imagenet = write_ilsvrc_fixture(tmp_path / "imagenet", layout="tar")
    classes = some_classes("quickdraw")
    quickdraw = write_quickdraw_fixture(tmp_path / "qd", classes=classes, images_per_class=3)
    cases = [
        ("ilsvrc_2012", imagenet.root, ["--ilsvrc-allow-missing-classes"]),
        ("quickdraw", quickdraw.root, ["--random-split", "--quickdraw-chunk-rows", "2"]),
    ]
    for name, root, options in cases:
        local = tmp_path / f"local_{name}"
        common = ["--source", name, *options]
        assert convert_cli.main([*common, "--input", str(root), "--output", str(local)]) == 0
        remote_root = gcs.upload(root, f"gs://raw/{name}")
        out = f"gs://out/{name}"
        assert convert_cli.main([*common, "--input", remote_root, "--output", out, *gcs.flags]) == 0
        same_dataset(gcs.objects(out), local, remote_root)
    _no_staging_left(gcs)


class FailingOmniglot(OmniglotSource):
    """Omniglot whose workers fail on one alphabet: a failure inside the pipeline, after other
    units were encoded and spilled into the staging prefix."""

    def read_unit(self, unit):
        if "Beta" in unit.key:
            raise OSError(5, "simulated read failure", unit.key)
        return super().read_unit(unit)


@pytest.mark.slow
def test_failed_gs_run_publishes_nothing(gcs, tmp_path):
    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=2)
    remote_root = gcs.upload(fixture.root, "gs://raw/doomed")
    with pytest.raises(Exception, match="simulated read failure"):
        convert(FailingOmniglot(), remote_root, "gs://out/doomed/omniglot", gcs.runner())
    assert gcs.objects("gs://out/doomed") == {}
    _no_staging_left(gcs)


@pytest.mark.slow
def test_gs_access_faults_are_one_line_at_once(gcs, tmp_path):
    argv = ["--source", "omniglot", "--output", str(tmp_path / "never"), "--input"]
    rc, err, _ = run_cli("beam_pipelines.convert", [*argv, "gs://nope/x", *gcs.flags], {})
    assert rc == 2 and err.count("\n") == 0, err
    assert "gs://nope/x: no bucket 'nope'" in err
    closed = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{free_port()}"}
    flags = [*gcs.flags, "--storage-timeout=2"]
    rc, err, seconds = run_cli("beam_pipelines.convert", [*argv, "gs://raw/x", *flags], closed)
    assert rc == 2 and err.count("\n") == 0 and seconds < 60, err
    assert "gs://raw/x: no answer from http://127.0.0.1" in err and "--storage-timeout 2 s" in err
    assert not (tmp_path / "never").exists()


def test_decode_workers_start_after_a_default_socket_timeout(tmp_path):
    """Beam's GCS client calls socket.setdefaulttimeout(60), which makes every new socket
    non-blocking; the reader's decode workers (a socket pair each) must still start."""
    from episodes.reading.reader import EpisodeReader
    from episodes.sampling.sampler_config import SamplerConfig
    from tests.fixtures.reader_datasets import write_dataset

    toy = write_dataset(tmp_path / "toy")
    saved = socket.getdefaulttimeout()
    socket.setdefaulttimeout(60)
    try:
        config = SamplerConfig.fixed(3, 1, 1)
        with EpisodeReader([str(toy.root)], "test", config, seed=3, decode_processes=2) as reader:
            assert reader.episode(0).support_images.shape[0] == 3
    finally:
        socket.setdefaulttimeout(saved)


@pytest.fixture(scope="module")
def omniglot_local(tmp_path_factory) -> Path:
    """A local Omniglot conversion, for the jobs that read a converted dataset."""
    fixture = write_omniglot_fixture(tmp_path_factory.mktemp("raw"), drawers=2)
    local = tmp_path_factory.mktemp("local") / "omniglot"
    convert(OmniglotSource(), fixture.root, local, make_local_runner(1))
    return local


@pytest.mark.slow
def test_episode_shards_read_a_gs_dataset_where_it_lies(gcs, omniglot_local, tmp_path, capsys):
    """`--dataset gs://...`: records read by ranged reads in the workers (odd classes without
    their .index object: rebuilt from their records); the shards are the local run's bytes."""
    copy_to = "gs://out/read/shards"  # gs -> gs as well
    shards_read_where_they_lie(gcs, omniglot_local, "gs://raw", tmp_path, capsys, copy_to)


def test_embeddings_read_a_gs_dataset_where_it_lies(gcs, tmp_path, capsys):
    """`splits.embed --dataset gs://...`: the local run's npz bytes, a corrupt record skipped
    and named by its object URL; an unfinished dataset and a missing records object refused in
    one line."""
    from splits import embed as embed_cli

    argv = embed_here_and_from(gcs, "gs://raw/embed/tiny", tmp_path)
    out = capsys.readouterr().out
    assert "skipped 1 unreadable records: gs://raw/embed/tiny/2.tfrecords record 1" in out
    gcs.put("gs://raw/embed/unfinished/0.tfrecords", b"x")
    unfinished = ["--dataset", "gs://raw/embed/unfinished", *argv[2:]]
    assert embed_cli.main([*unfinished, str(tmp_path / "u.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "gs://raw/embed/unfinished: incomplete dataset" in err
    gcs.delete("gs://raw/embed/tiny/3.tfrecords")
    assert embed_cli.main([*argv, str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "1 records objects missing" in err
    assert "gs://raw/embed/tiny/3.tfrecords" in err
    assert sorted(p.name for p in tmp_path.glob("*.npz")) == ["local.npz", "remote.npz"]


STALL_A_CONVERSION = """
import sys, time
import beam_pipelines.sources as sources
from beam_pipelines import convert as convert_cli

class Stalling(sources.SOURCES["omniglot"]):
    def read_unit(self, unit):
        if "Beta" in unit.key:
            print("stalled", flush=True)
            time.sleep(600)
        return super().read_unit(unit)

sources.SOURCES["omniglot"] = Stalling
sys.exit(convert_cli.main(sys.argv[1:]))
"""


def _hidden(gcs: GcsServer, url: str) -> list[str]:
    return sorted(k for k in gcs.objects(url) if any(p.startswith(".") for p in k.split("/")))


@pytest.mark.slow
def test_the_next_run_removes_what_a_killed_gs_run_left(gcs, omniglot_local, tmp_path, capsys):
    """kill -9 of a conversion whose worker is stalled: its staging objects (`.NAME.tmp-PID-HEX8`
    beside the output) stay in the bucket; the next conversion removes them and names the prefix.
    The shards and embed jobs do the same with what their killed runs left."""
    from beam_pipelines import episodes as shards_cli
    from splits.embeddings.pipeline import EmbedOptions, embed_dataset
    from tests.fixtures.embedding_inputs import write_random_checkpoint, write_tiny_dataset

    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=2)
    gcs.upload(fixture.root, "gs://raw/killed")
    argv = ["--source", "omniglot", "--input", "gs://raw/killed"]
    argv += ["--output", "gs://out/killed/omniglot", *gcs.flags]
    log = tmp_path / "killed.log"
    with open(log, "wb") as err:
        command = [sys.executable, "-c", STALL_A_CONVERSION, *argv]
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err)
    try:
        assert run.stdout.readline().strip() == b"stalled", log.read_text()[-2000:]
    finally:
        run.kill()  # SIGKILL: nothing of the process runs any more
        run.communicate()
    left = _hidden(gcs, "gs://out/killed")
    prefixes = {k.split("/")[0] for k in left}
    assert len(prefixes) == 1 and prefixes.pop().startswith(f".omniglot.tmp-{run.pid}-"), left
    dead = f"gs://out/killed/{left[0].split('/')[0]}"
    capsys.readouterr()
    assert convert_cli.main(argv) == 0
    assert f"removed {dead}: left by a run that did not finish" in capsys.readouterr().err
    assert _hidden(gcs, "gs://out/killed") == []
    same_dataset(gcs.objects("gs://out/killed/omniglot"), omniglot_local, "gs://raw/killed")
    # what killed shards and embed jobs leave: staging objects of the same kind of name
    shards_dead = "gs://out/killed/.shards.tmp-1-0123abcd"
    embed_dead = "gs://out/killed/.tiny.npz.tmp-1-4567cdef"
    gcs.put(f"{shards_dead}/episodes-00000-of-00002.tfrecords", b"half a shard")
    gcs.put(f"{shards_dead}/_sha256/episodes-00000-of-00002.tfrecords", b"0" * 64)
    gcs.put(f"{embed_dead}/class_sums.npz", b"sums")
    shards = ["--dataset", str(omniglot_local), *SHARD_ARGS, *gcs.flags]
    assert shards_cli.main([*shards, "--output", "gs://out/killed/shards"]) == 0
    assert f"removed {shards_dead}: left by a run that did not finish" in capsys.readouterr().err
    assert _hidden(gcs, "gs://out/killed") == [".tiny.npz.tmp-1-4567cdef/class_sums.npz"]
    spec = write_tiny_dataset(tmp_path / "tiny")
    checkpoint = write_random_checkpoint(tmp_path / "run" / "last.pt")
    options = EmbedOptions(batch_size=8, chunk_size=4, progress=False)
    embed_dataset(spec.root, checkpoint, "gs://out/killed/tiny.npz", gcs.runner(), options)
    assert f"removed {embed_dead}: left by a run that did not finish" in capsys.readouterr().err
    assert _hidden(gcs, "gs://out/killed") == []
    embed_dataset(spec.root, checkpoint, tmp_path / "tiny.npz", make_local_runner(1), options)
    assert gcs.objects("gs://out/killed")["tiny.npz"] == (tmp_path / "tiny.npz").read_bytes()


def test_ranged_reads_of_a_gs_object_fetch_one_buffer_each(gcs, monkeypatch):
    """Records read where they lie (episode shards) seek about a class's object: each read
    fetches RANGE_BUFFER_BYTES, not the 16 MiB chunk Beam's GCS reader downloads by default."""
    from google.cloud.storage.blob import Blob

    from episodes.storage import paths as storage_paths
    from episodes.storage.remote_records import RANGE_BUFFER_BYTES, ObjectRangePool

    data = bytes(range(256)) * (4 * 2**20 // 256)
    gcs.put("gs://raw/ranged/4mib.bin", data)
    storage_paths.use_options(gcs.runner().options)
    fetched = []
    download = Blob.download_as_bytes

    def counted(blob, *args, **kwargs):
        body = download(blob, *args, **kwargs)
        fetched.append(len(body))
        return body

    monkeypatch.setattr(Blob, "download_as_bytes", counted)
    pool = ObjectRangePool()
    offsets = [3 * 2**20, 2**19, 2 * 2**20 + 7, 2**20]
    for offset in offsets:
        assert pool.read("gs://raw/ranged/4mib.bin", offset, 1000) == data[offset : offset + 1000]
    pool.close()
    # google's BlobReader asks for an inclusive end one past its chunk: one byte more each
    assert len(fetched) == len(offsets) and max(fetched) <= RANGE_BUFFER_BYTES + 1, fetched
