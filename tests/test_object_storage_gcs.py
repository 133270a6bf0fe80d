"""gs:// for real: the GCS emulator (`gcp-storage-emulator`) on 127.0.0.1 and Beam's GCS file
system (google-cloud-storage, pinned in requirements.lock). The same checks as s3:// in
tests/test_object_storage.py: conversions gs -> gs byte-identical to local runs (Omniglot, the
ImageNet training tar of synset tars, QuickDraw), and a failure mid-pipeline publishes nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion import convert
from beam_pipelines.sources.omniglot import OmniglotSource
from tests.conftest import make_local_runner
from tests.raw_fixtures.ilsvrc import write_ilsvrc_fixture
from tests.raw_fixtures.omniglot import write_omniglot_fixture
from tests.raw_fixtures.quickdraw import write_quickdraw_fixture
from tests.test_object_storage import (
    _free_port,
    _run_cli,
    _same_dataset,
    _some_classes,
    _wait_until_listening,
)

storage = pytest.importorskip("google.cloud.storage")


@dataclass
class GcsServer:
    endpoint: str
    client: object

    flags = ["--project=fewshot-test"]

    def runner(self):
        import argparse

        from beam_pipelines.runner_options import make_runner

        namespace = argparse.Namespace(runner="DirectRunner", direct_num_workers=1)
        return make_runner(namespace, self.flags)

    def upload(self, folder: Path, url: str) -> str:
        bucket, _, prefix = url[len("gs://") :].partition("/")
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(folder).as_posix()}"
                self.client.bucket(bucket).blob(key).upload_from_string(path.read_bytes())
        return url

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

    port = _free_port()
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
        _wait_until_listening(server, port, log, "GCS emulator")
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


def test_omniglot_gs_to_gs_is_byte_identical_to_local(gcs, tmp_path, capsys):
    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=2)
    local = tmp_path / "local"
    convert(OmniglotSource(), fixture.root, local, make_local_runner(1))
    remote_root = gcs.upload(fixture.root, "gs://raw/omniglot")
    argv = ["--source", "omniglot", "--input", remote_root, "--output", "gs://out/omniglot"]
    assert convert_cli.main(argv + gcs.flags) == 0
    assert "Converted omniglot -> gs://out/omniglot" in capsys.readouterr().out
    _same_dataset(gcs.objects("gs://out/omniglot"), local, remote_root)
    _no_staging_left(gcs)


def test_imagenet_tar_and_quickdraw_gs_to_gs_are_byte_identical_to_local(gcs, tmp_path):
    imagenet = write_ilsvrc_fixture(tmp_path / "imagenet", layout="tar")
    classes = _some_classes("quickdraw")
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
        _same_dataset(gcs.objects(out), local, remote_root)
    _no_staging_left(gcs)


class FailingOmniglot(OmniglotSource):
    """Omniglot whose workers fail on one alphabet: a failure inside the pipeline, after other
    units were encoded and spilled into the staging prefix."""

    def read_unit(self, unit):
        if "Beta" in unit.key:
            raise OSError(5, "simulated read failure", unit.key)
        return super().read_unit(unit)


def test_failed_gs_run_publishes_nothing(gcs, tmp_path):
    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=2)
    remote_root = gcs.upload(fixture.root, "gs://raw/doomed")
    with pytest.raises(Exception, match="simulated read failure"):
        convert(FailingOmniglot(), remote_root, "gs://out/doomed/omniglot", gcs.runner())
    assert gcs.objects("gs://out/doomed") == {}
    _no_staging_left(gcs)


def test_gs_access_faults_are_one_line_at_once(gcs, tmp_path):
    argv = ["--source", "omniglot", "--output", str(tmp_path / "never"), "--input"]
    rc, err, _ = _run_cli("beam_pipelines.convert", [*argv, "gs://nope/x", *gcs.flags], {})
    assert rc == 2 and err.count("\n") == 0, err
    assert "gs://nope/x: no bucket 'nope'" in err
    closed = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{_free_port()}"}
    flags = [*gcs.flags, "--storage-timeout=2"]
    rc, err, seconds = _run_cli("beam_pipelines.convert", [*argv, "gs://raw/x", *flags], closed)
    assert rc == 2 and err.count("\n") == 0 and seconds < 60, err
    assert "gs://raw/x: no answer from http://127.0.0.1" in err and "--storage-timeout 2 s" in err
    assert not (tmp_path / "never").exists()


def test_decode_workers_start_after_a_default_socket_timeout(tmp_path):
    """Beam's GCS client calls socket.setdefaulttimeout(60), which makes every new socket
    non-blocking; the reader's decode workers (a socket pair each) must still start."""
    from episodes.reader import EpisodeReader
    from episodes.sampler_config import SamplerConfig
    from tests.test_reader_fixtures import write_dataset

    toy = write_dataset(tmp_path / "toy")
    saved = socket.getdefaulttimeout()
    socket.setdefaulttimeout(60)
    try:
        config = SamplerConfig.fixed(3, 1, 1)
        with EpisodeReader([str(toy.root)], "test", config, seed=3, decode_processes=2) as reader:
            assert reader.episode(0).support_images.shape[0] == 3
    finally:
        socket.setdefaulttimeout(saved)
