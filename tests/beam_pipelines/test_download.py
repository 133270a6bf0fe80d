"""`python -m beam_pipelines.download` against a local server on 127.0.0.1 (tests/download_server):
fixture archives served under their registered names, their checksums given through the
registry's test override (the same TFDS-format lookup the installed package's files go
through); faults: dropped connection, wrong checksum, 404/500, a stall, a full disk, Ctrl-C and
SIGTERM; then `convert` on what was downloaded."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines import download
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.downloads import http_fetch
from beam_pipelines.downloads.registry import (
    TEST_OVERRIDE_ENV,
    RegistryError,
    RemoteFile,
    checksum_file,
    parse_checksum_lines,
    remote_files,
)
from beam_pipelines.runners.output_lock import acquire_output_lock
from beam_pipelines.sources import SOURCES
from beam_pipelines.sources.cu_birds import CUBirdsSource
from beam_pipelines.sources.dtd import DTDSource
from beam_pipelines.sources.omniglot import OmniglotSource
from beam_pipelines.sources.quickdraw import QuickDrawSource
from tests.fixtures.download_server import LocalServer, Served
from tests.fixtures.paths import REPO
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture

OMNIGLOT_PATH = "/brendenlake/omniglot/raw/master/python/"
FAST = ["--backoff-s", "0", "--timeout-s", "5"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def server():
    with LocalServer() as running:
        yield running


def register(tmp_path: Path, monkeypatch, dataset: str, lines: list[tuple[str, bytes, str]]):
    """Serve nothing; write `<dataset>.txt` (url, data's size and sha256, name) into the
    registry's test override folder and point the registry at it."""
    folder = tmp_path / "registered"
    folder.mkdir(exist_ok=True)
    text = "".join(f"{url}\t{len(data)}\t{sha256(data)}\t{name}\n" for url, data, name in lines)
    (folder / f"{dataset}.txt").write_text(text)
    monkeypatch.setenv(TEST_OVERRIDE_ENV, str(folder))


def serve_omniglot(tmp_path, monkeypatch, server, **faults) -> dict[str, bytes]:
    """The zipped Omniglot fixture served and registered under TFDS's file names."""
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    write_omniglot_fixture(fixture, zipped=True)
    files = {name: (fixture / name).read_bytes() for name in declared_names(OmniglotSource)}
    lines = []
    for name, data in files.items():
        server.state.files[OMNIGLOT_PATH + name] = Served(data, **faults)
        lines.append((server.url(OMNIGLOT_PATH + name), data, name))
    register(tmp_path, monkeypatch, "omniglot", lines)
    return files


def declared_names(source) -> list[str]:
    """The file names a source declares (read from the declaration, no registry)."""
    return [d.file_name for d in source.downloads]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = download.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- the registry -------------------------------------------------------------------------------


def test_registry_reads_the_installed_tfds_checksums(monkeypatch):
    monkeypatch.delenv(TEST_OVERRIDE_ENV, raising=False)
    installed = checksum_file("omniglot")
    assert "tensorflow_datasets" in str(installed)
    listed = {
        line.split("\t")[3].strip(): line.split("\t")
        for line in installed.read_text().splitlines()
        if line.strip()
    }
    files = remote_files(OmniglotSource)
    assert [f.name for f in files] == ["images_background.zip", "images_evaluation.zip"]
    for f in files:
        url, size, digest, _ = listed[f.name]
        assert (f.url, f.size, f.sha256) == (url, int(size), digest)
        assert f.verified and not f.extract
    birds = remote_files(CUBirdsSource)
    assert len(birds) == 1 and "data.caltech.edu" in birds[0].url  # its first listed URL
    drawings = remote_files(QuickDrawSource)
    assert len(drawings) == 345
    assert "The Eiffel Tower.npy" in {f.name for f in drawings}  # unquoted: the class name
    assert all(f.name.endswith(".npy") and f.size for f in drawings)
    assert remote_files(DTDSource)[0].extract


def test_checksum_lines_tab_and_space_formats_and_errors():
    digest = "a" * 64
    tab = f"https://h/x/The%20Mona%20Lisa.npy\t12\t{digest}\tThe%20Mona%20Lisa.npy\n"
    space = f"http://h/ILSVRC2012_img_train.tar 34 {digest.upper()}\n"
    entries = parse_checksum_lines(tab + "\n" + space, "f.txt")
    assert [(e.name, e.size, e.sha256) for e in entries] == [
        ("The Mona Lisa.npy", 12, digest),
        ("ILSVRC2012_img_train.tar", 34, digest),
    ]
    with pytest.raises(RegistryError, match=r"f\.txt:2: expected"):
        parse_checksum_lines(tab + "http://h/y\tbig\tcafe\n", "f.txt")


def test_list_prints_every_source_its_files_size_and_how(capsys):
    code, out, _ = run(["--list"], capsys)
    assert code == 0
    heads = {line.split(":")[0]: line for line in out.splitlines() if not line.startswith(" ")}
    assert set(heads) == set(SOURCES)
    assert heads["omniglot"].startswith("omniglot: downloads, 2 file(s), 15.9 MB")
    assert "obtain by hand" in heads["ilsvrc_2012"] and "147.9 GB" in heads["ilsvrc_2012"]
    assert "--allow-unverified" in heads["aircraft"]
    assert "345 file(s)" in heads["quickdraw"]
    code, out, _ = run(["--list", "--source", "quickdraw"], capsys)
    assert code == 0 and out.count(".npy") == 345 * 2  # name and URL of each


# -- downloading and converting -----------------------------------------------------------------


def _records(folder: Path) -> dict[str, str]:
    return {
        p.name: sha256(p.read_bytes())
        for p in sorted(folder.iterdir())
        if p.suffix in (".tfrecords", ".index")
    }


def test_convert_download_gives_the_fixtures_records(
    tmp_path, monkeypatch, server, capsys, local_runner
):
    files = serve_omniglot(tmp_path, monkeypatch, server)
    raw, out = tmp_path / "raw", tmp_path / "out"
    args = ["--source", "omniglot", "--input", str(raw), "--output", str(out), "--download"]
    assert convert_cli.main(args) == 0
    for name, data in files.items():
        assert (raw / name).read_bytes() == data
        assert not (raw / (name + ".part")).exists()
    direct = convert(OmniglotSource(), tmp_path / "fixture", tmp_path / "direct", local_runner(1))
    assert _records(out) == _records(direct.output) and _records(out)
    # a second run fetches nothing: the verified files are kept
    asked = len(server.state.requests)
    code, stdout, _ = run(["--source", "omniglot", "--output", str(raw)], capsys)
    assert code == 0 and len(server.state.requests) == asked
    assert stdout.count("verified, kept") == 2


def test_archive_extracted_where_the_layout_wants_folders(tmp_path, monkeypatch, server, capsys):
    fixture = tmp_path / "fixture"
    made = write_dtd_fixture(fixture)
    archive = tmp_path / "dtd-r1.0.1.tar.gz"
    with tarfile.open(archive, "w:gz") as handle:
        handle.add(made.root, arcname="dtd")
    data = archive.read_bytes()
    server.state.files["/dtd-r1.0.1.tar.gz"] = Served(data)
    register(tmp_path, monkeypatch, "dtd", [(server.url("/dtd-r1.0.1.tar.gz"), data, archive.name)])
    raw = tmp_path / "raw"
    code, out, err = run(["--source", "dtd", "--output", str(raw)], capsys)
    assert code == 0, err
    assert "extracted" in out
    extracted = sorted(p.relative_to(raw / "dtd") for p in (raw / "dtd").rglob("*") if p.is_file())
    written = sorted(p.relative_to(made.root) for p in made.root.rglob("*") if p.is_file())
    assert extracted == written and written
    for rel in written:
        assert (raw / "dtd" / rel).read_bytes() == (made.root / rel).read_bytes()
    assert [c.name for c in DTDSource().plan(raw).classes] == [
        c.name for c in DTDSource().plan(fixture).classes
    ]
    code, out, _ = run(["--source", "dtd", "--output", str(raw)], capsys)
    assert code == 0 and "extracted earlier" in out


def test_mirror_prefix_serves_the_files(tmp_path, monkeypatch, server, capsys):
    files = serve_omniglot(tmp_path, monkeypatch, server, status=500)  # registered URLs fail
    for name, data in files.items():
        server.state.files["/cache/" + name] = Served(data)
    raw = tmp_path / "raw"
    mirror = server.url("/cache")
    code, _, err = run(["--source", "omniglot", "--output", str(raw), "--mirror", mirror], capsys)
    assert code == 0, err
    assert {p for p, _ in server.state.requests} == {"/cache/" + n for n in files}
    assert all((raw / n).read_bytes() == d for n, d in files.items())


# -- faults -------------------------------------------------------------------------------------


def test_dropped_connection_resumes_with_range(tmp_path, monkeypatch, server, capsys):
    files = serve_omniglot(tmp_path, monkeypatch, server, drop_after=3000)
    raw = tmp_path / "raw"
    code, _, err = run(["--source", "omniglot", "--output", str(raw), *FAST], capsys)
    assert code == 0, err
    assert all((raw / n).read_bytes() == d for n, d in files.items())
    assert (OMNIGLOT_PATH + "images_background.zip", "bytes=3000-") in server.state.requests
    assert "retry 1/5" in err


def test_wrong_checksum_refused_and_nothing_kept(tmp_path, monkeypatch, server, capsys):
    files = serve_omniglot(tmp_path, monkeypatch, server)
    name = "images_background.zip"
    server.state.files[OMNIGLOT_PATH + name].data = b"X" + files[name][1:]  # same size
    raw = tmp_path / "raw"
    code, _, err = run(["--source", "omniglot", "--output", str(raw), *FAST], capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert server.url(OMNIGLOT_PATH + name) in lines[0] and "sha256" in lines[0]
    assert not (raw / name).exists() and not (raw / (name + ".part")).exists()
    assert (raw / "images_evaluation.zip").read_bytes() == files["images_evaluation.zip"]


@pytest.mark.parametrize("status", [404, 500])
def test_http_errors_end_in_one_line_naming_the_url(tmp_path, monkeypatch, server, capsys, status):
    serve_omniglot(tmp_path, monkeypatch, server, status=status)
    raw = tmp_path / "raw"
    argv = ["--source", "omniglot", "--output", str(raw), "--retries", "1", "--backoff-s", "0"]
    code, _, err = run(argv, capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 2  # one per file
    assert all(f"HTTP {status}" in line and "127.0.0.1" in line for line in lines)
    tries = [p for p, _ in server.state.requests if p.endswith("images_background.zip")]
    assert len(tries) == (1 if status == 404 else 2)  # 404 is final, 500 is retried
    assert "Traceback" not in err


def test_stalling_server_times_out_in_one_line(tmp_path, monkeypatch, server, capsys):
    serve_omniglot(tmp_path, monkeypatch, server, stall_s=5.0)
    raw = tmp_path / "raw"
    argv = ["--source", "omniglot", "--output", str(raw), "--timeout-s", "0.3", "--retries", "0"]
    started = time.monotonic()
    code, _, err = run(argv, capsys)
    assert code == 2 and time.monotonic() - started < 4
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 2 and all("timeout" in line for line in lines)
    assert (raw / "images_background.zip.part").stat().st_size > 0  # kept to resume
    assert not (raw / "images_background.zip").exists()


def test_full_disk_ends_in_one_line_and_nothing_moved_into_place(
    tmp_path, monkeypatch, server, capsys
):
    serve_omniglot(tmp_path, monkeypatch, server)
    written = []

    def full_after_one_chunk(handle, data):
        if written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), handle.name)
        written.append(len(data))
        handle.write(data)

    monkeypatch.setattr(http_fetch, "write_chunk", full_after_one_chunk)
    raw = tmp_path / "raw"
    code, _, err = run(["--source", "omniglot", "--output", str(raw)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "No space left on device" in err and ".part" in err
    assert not (raw / "images_background.zip").exists()
    assert not (raw / "images_evaluation.zip").exists()


def test_checksum_unknown_needs_allow_unverified(tmp_path, server):
    data = os.urandom(5000)
    server.state.files["/a.tar"] = Served(data)
    remote = RemoteFile("a.tar", server.url("/a.tar"), None, None, None, False, "nowhere")
    with pytest.raises(download.DownloadError, match="checksum unknown.*--allow-unverified"):
        download.ensure_file(remote, tmp_path, download.DownloadConfig())
    assert not server.state.requests and not list(tmp_path.iterdir())
    path, what = download.ensure_file(
        remote, tmp_path, download.DownloadConfig(allow_unverified=True)
    )
    assert path.read_bytes() == data and f"unverified: sha256 {sha256(data)}" in what


def test_published_md5_is_checked(tmp_path, server):
    data = os.urandom(5000)
    server.state.files["/b.zip"] = Served(data)
    md5 = hashlib.md5(data).hexdigest()
    good = RemoteFile("b.zip", server.url("/b.zip"), None, None, md5, False, "a README")
    bad = RemoteFile("c.zip", server.url("/b.zip"), None, None, "0" * 32, False, "a README")
    assert download.ensure_file(good, tmp_path, download.DownloadConfig())[0].read_bytes() == data
    with pytest.raises(download.DownloadError, match=r"/b\.zip served md5"):
        download.ensure_file(bad, tmp_path, download.DownloadConfig(backoff_s=0))
    assert not (tmp_path / "c.zip").exists() and not (tmp_path / "c.zip.part").exists()


def test_a_wrong_file_already_there_is_not_overwritten(tmp_path, monkeypatch, server, capsys):
    serve_omniglot(tmp_path, monkeypatch, server)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "images_background.zip").write_bytes(b"mine")
    code, _, err = run(["--source", "omniglot", "--output", str(raw)], capsys)
    assert code == 2 and "already there" in err and "move it away" in err
    assert (raw / "images_background.zip").read_bytes() == b"mine"


def test_two_downloads_into_one_folder_refused(tmp_path, monkeypatch, server, capsys):
    serve_omniglot(tmp_path, monkeypatch, server)
    raw = tmp_path / "raw"
    with acquire_output_lock(raw):
        code, _, err = run(["--source", "omniglot", "--output", str(raw)], capsys)
    assert code == 2 and "another download" in err and err.count("\n") == 1
    assert not server.state.requests


def test_obtain_by_hand_prints_the_file_and_where_it_goes(tmp_path, capsys):
    raw = tmp_path / "raw"
    code, _, err = run(["--source", "ilsvrc_2012", "--output", str(raw)], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "ILSVRC2012_img_train.tar (147,897,477,120 bytes)" in err
    assert "image-net.org" in err and str(raw / "ILSVRC2012_img_train.tar") in err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_interrupted_download_keeps_the_part_and_resumes(tmp_path, monkeypatch, server, sig):
    blob, small = os.urandom(200_000), os.urandom(3000)
    name, other = declared_names(OmniglotSource)
    server.state.files[OMNIGLOT_PATH + name] = Served(blob, trickle_s=0.01)
    server.state.files[OMNIGLOT_PATH + other] = Served(small)
    lines = [(server.url(OMNIGLOT_PATH + n), d, n) for n, d in ((name, blob), (other, small))]
    register(tmp_path, monkeypatch, "omniglot", lines)
    raw = tmp_path / "raw"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "beam_pipelines.download", "--source", "omniglot"]
    process = subprocess.Popen(
        [*command, "--output", str(raw)], env=env, stderr=subprocess.PIPE, text=True
    )
    part = raw / (name + ".part")
    deadline = time.monotonic() + 30
    while not (part.exists() and part.stat().st_size > 20_000) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(sig)
    _, err = process.communicate(timeout=30)
    if sig == signal.SIGKILL:  # nothing runs: the part file and an unheld lock file stay
        assert process.returncode == -sig and (raw.parent / f".{raw.name}.lock").exists()
    else:
        assert process.returncode == 128 + sig  # 143 after SIGTERM, as a shell reports it
        assert "interrupted" in err and "resume" in err and "Traceback" not in err
    kept = part.stat().st_size
    assert 0 < kept < len(blob) and not (raw / name).exists()
    assert part.read_bytes() == blob[:kept]
    server.state.files[OMNIGLOT_PATH + name].trickle_s = 0
    assert download.main(["--source", "omniglot", "--output", str(raw)]) == 0
    assert (raw / name).read_bytes() == blob
    assert (OMNIGLOT_PATH + name, f"bytes={kept}-") in server.state.requests
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".raw")) == []


def test_all_puts_each_source_where_convert_all_looks(tmp_path, monkeypatch, server, capsys):
    files = serve_omniglot(tmp_path, monkeypatch, server)
    for name, data in files.items():
        server.state.files["/cache/" + name] = Served(data)
    raw = tmp_path / "raw"
    argv = ["--all", "--output", str(raw), "--mirror", server.url("/cache"), "--retries", "0"]
    code, out, err = run(argv, capsys)
    assert code == 2  # the files the mirror does not hold (404), one line each
    assert all((raw / "omniglot" / n).read_bytes() == d for n, d in files.items())
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors and all("HTTP 404" in line and "/cache/" in line for line in errors)
    notices = [line for line in err.splitlines() if not line.startswith("error:")]
    assert any(line.startswith("ilsvrc_2012: obtain ILSVRC2012_img_train.tar") for line in notices)
    assert any(line.startswith("aircraft:") and "--allow-unverified" in line for line in notices)
    assert not any("fgvc-aircraft" in path for path, _ in server.state.requests)
    for folder in raw.iterdir():
        if folder.is_dir():
            source = SOURCES[folder.name]
            assert folder.name in source.raw_folder_names()  # convert --all finds it there
    assert "omniglot" in out and "Traceback" not in err


def test_convert_download_refuses_an_existing_output_before_fetching(
    tmp_path, monkeypatch, server, capsys
):
    serve_omniglot(tmp_path, monkeypatch, server)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    raw = tmp_path / "raw"
    args = ["--source", "omniglot", "--input", str(raw), "--output", str(out), "--download"]
    assert convert_cli.main(args) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite" in err and err.count("\n") == 1
    assert not server.state.requests and not raw.exists()


def test_fetch_quotes_spaces_and_shows_rate_and_eta(tmp_path, server, capsys):
    blob = os.urandom(40_000)
    server.state.files["/full/The%20Mona%20Lisa.npy"] = Served(blob, trickle_s=0.002, chunk=2048)
    target = tmp_path / "The Mona Lisa.npy"
    options = http_fetch.FetchOptions(progress_every_s=0.0)
    expected = http_fetch.Expected(len(blob), sha256(blob))
    digests = http_fetch.fetch(server.url("/full/The Mona Lisa.npy"), target, expected, options)
    assert target.read_bytes() == blob and digests[:2] == (len(blob), sha256(blob))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[The")]
    assert lines and all("/39 KiB (" in line and "KiB/s, ETA " in line for line in lines)


def test_tfds_source_has_nothing_to_download(tmp_path, capsys):
    code, _, err = run(["--source", "tfds", "--output", str(tmp_path / "raw")], capsys)
    assert code == 2 and "tfds build" in err and err.count("\n") == 1


def test_nothing_fetched_says_so_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """Issue 30: a server that never answers leaves no .part, so the line does not claim one
    is kept, and the folders made for the files go again."""
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    write_omniglot_fixture(fixture, zipped=True)
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    lines = [
        (f"http://127.0.0.1:{port}/{name}", (fixture / name).read_bytes(), name)
        for name in declared_names(OmniglotSource)
    ]
    register(tmp_path, monkeypatch, "omniglot", lines)
    raw = tmp_path / "new" / "raw"
    argv = ["--source", "omniglot", "--output", str(raw), "--retries", "0", "--backoff-s", "0"]
    code, _, err = run(argv, capsys)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 2, err
    assert all("nothing was written, run again to retry" in line for line in errors), errors
    assert "is kept" not in err
    assert not (tmp_path / "new").exists()
