"""Inputs and outputs in object storage (gs://, s3://, any Beam `FileSystems` scheme).

Local paths keep their pathlib/rename behaviour; everything here is for URLs with a scheme.
Object stores have no folders and no rename, so:
  - an input "folder" is listed once (`ObjectPath.listed`) and the sources walk that listing
    through the few pathlib calls they use (`/`, `iterdir`, `is_dir`, `is_file`, `open` ...);
    workers read single objects by URL (`read_bytes`, `open_binary`);
  - an output folder is written under a hidden staging prefix beside it; on success the files
    are copied to the output (server-side copies, PUBLISH_THREADS at once, with progress lines)
    and the commit marker (`dataset_spec.json`, `episodes.json`) is copied last, so a folder
    without its marker is an unfinished one (`publish_staged`);
  - S3 objects are written by episodes.storage.uploads (one PUT when small, one part in
    memory, multipart uploads aborted on failure); a failed job's staging prefix and its open
    uploads are removed (`discard_prefix`), and a later run to the same output removes what
    killed runs left (`remove_remote_leftovers`);
  - object reads on S3 and GCS go through one client per process and thread; a whole object is
    one GET (`read_bytes`; episodes.storage.parallel_reads keeps several in flight), and a
    ranged read (`open_binary(url, buffer_bytes)`) fetches that much, not Beam's 16 MiB.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from episodes.storage.s3_get import get_object_bytes
from episodes.storage.uploads import bucket_and_key
from episodes.util.cli_errors import OutputExistsError, UsageError
from episodes.util.moved_modules import moved_names

__all__ = [
    "ObjectPath",
    "PUBLISH_THREADS",
    "READ_BUFFER_BYTES",
    "SINGLE_COPY_LIMIT",
    "abort_open_uploads",
    "check_output_prefix",
    "copy_objects",
    "create_local_file",
    "create_stream",
    "discard_prefix",
    "filesystem_flags",
    "folder_url",
    "input_location",
    "is_remote",
    "join",
    "list_objects",
    "load_remote_spec",
    "open_binary",
    "publish_staged",
    "read_bytes",
    "read_local_file",
    "remove_remote_leftovers",
    "require_output_folder",
    "staging_prefix",
    "unknown_local_flags",
    "use_options",
    "write_bytes",
]


# A remote output prefix that holds objects is an existing output, as a local folder is.
__getattr__ = moved_names(
    __name__, {"OutputPrefixError": "episodes.util.cli_errors:OutputExistsError"}
)


def is_remote(path: Any) -> bool:
    """True for a URL with a scheme (gs://, s3://, ...); False for a local path."""
    return not isinstance(path, Path) and FileSystems.get_scheme(str(path)) is not None


def use_options(options: Any) -> None:
    """Give Beam's file systems the pipeline options (S3 endpoint, keys, GCP project) before
    the launcher itself lists or writes objects; Beam does the same in its workers."""
    FileSystems.set_options(options)


def filesystem_flags() -> frozenset[str]:
    """The flags of Beam's file-system options (S3, GCS, Azure, HDFS): legal with any runner,
    the local one included, since the launcher and its workers list and write objects."""
    import argparse

    from apache_beam.options import pipeline_options as po

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for options in (
        po.S3Options,
        po.GoogleCloudOptions,
        po.AzureOptions,
        po.HadoopFileSystemOptions,
    ):
        options._add_argparse_args(parser)
    return frozenset(flag for action in parser._actions for flag in action.option_strings)


def unknown_local_flags(beam_args: list[str]) -> list[str]:
    """The `--flags` in `beam_args` that the local runner would ignore (not file-system ones)."""
    known = filesystem_flags()
    return [a for a in beam_args if a.startswith("--") and a.split("=", 1)[0] not in known]


def folder_url(url: str) -> str:
    return str(url).rstrip("/")


def join(base: str | os.PathLike, *names: str) -> str:
    """`base/name...` for a URL; os.path.join for a local path."""
    if not is_remote(base):
        return os.path.join(base, *names)
    return "/".join([folder_url(str(base)), *(n.strip("/") for n in names)])


def list_objects(url: str) -> dict[str, int]:
    """Every object under the folder `url`, recursively: {relative name: size in bytes}."""
    base = folder_url(url) + "/"
    try:
        (result,) = FileSystems.match([base + "**"])
    except Exception as exc:  # Beam wraps the store's own errors in BeamIOError
        raise OSError(errno.EIO, f"cannot list objects ({_reason(exc)})", url) from None
    return {
        m.path[len(base) :]: int(m.size_in_bytes)
        for m in result.metadata_list
        if m.path.startswith(base) and not m.path.endswith("/")
    }


def _object_size(url: str) -> int | None:
    """The size of the object `url`, or None if there is none."""
    try:
        (result,) = FileSystems.match([url])
    except Exception:
        return None
    sizes = [int(m.size_in_bytes) for m in result.metadata_list if m.path == url]
    return sizes[0] if sizes else None


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "exception_details", None)
    if isinstance(inner, dict) and inner:
        exc = next(iter(inner.values()))
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


_S3IO_CACHE: dict[tuple, Any] = {}
_CLIENTS_LOCK = threading.Lock()
_S3_FIELDS = (
    "s3_endpoint_url",
    "s3_access_key_id",
    "s3_secret_access_key",
    "s3_session_token",
    "s3_region_name",
    "s3_api_version",
    "s3_verify",
    "s3_disable_ssl",
)


READ_BUFFER_BYTES = 2**20  # per open S3 stream (Beam's default is 16 MiB)


def _s3_client() -> Any:
    """The boto3 client of `_s3io()` (thread-safe; shared by the publishing threads)."""
    return _s3io().client.client


def _s3_settings() -> tuple[Any, tuple]:
    """The options Beam's own FileSystems.get_filesystem hands to a file system, and the S3
    settings among them (what a client depends on)."""
    from apache_beam.options.pipeline_options import PipelineOptions, S3Options
    from apache_beam.options.value_provider import RuntimeValueProvider

    options = FileSystems._pipeline_options or RuntimeValueProvider.runtime_options
    if not isinstance(options, PipelineOptions):  # a plain dict on some runners' workers
        return options, tuple((options or {}).get(name) for name in _S3_FIELDS)
    known = _S3_SETTINGS.get(id(options))
    if known is None or known[0] is not options:
        # `view_as` parses every Beam option anew (milliseconds): once per options object,
        # not once per object read
        s3 = options.view_as(S3Options)
        known = (options, tuple(getattr(s3, name) for name in _S3_FIELDS))
        with _CLIENTS_LOCK:
            _S3_SETTINGS.clear()
            _S3_SETTINGS[id(options)] = known
    return known


_S3_SETTINGS: dict[int, tuple[Any, tuple]] = {}  # id(options) -> (options, settings)


def _s3io() -> Any:
    """One S3 client per process, thread and options. Beam's S3FileSystem builds a new boto3
    client for every open (about 0.4 s each here), which would dominate per-image reads; one
    per thread, since Beam's client keeps the state of its current download (threads sharing
    it interleave their ranged reads: fetch's threads, the progress thread)."""
    from apache_beam.io.aws import s3io

    options, settings = _s3_settings()
    return _client_of_this_thread(_S3IO_CACHE, settings, lambda: s3io.S3IO(options=options))


_SHARED_S3_CLIENTS: dict[tuple, Any] = {}


def _shared_s3_client() -> Any:
    """One boto3 client per process and options for whole-object GETs, shared by threads (a
    boto3 client is thread-safe; Beam's wrapper, with its download state, is not): the reading
    threads of episodes.storage.parallel_reads would otherwise build one each, 0.4 s apiece."""
    from apache_beam.io.aws import s3io

    options, settings = _s3_settings()
    key = (os.getpid(), settings)
    with _CLIENTS_LOCK:
        if key not in _SHARED_S3_CLIENTS:
            _SHARED_S3_CLIENTS.clear()  # another process's (forked) or other options'
            _SHARED_S3_CLIENTS[key] = s3io.S3IO(options=options).client.client
        return _SHARED_S3_CLIENTS[key]


def _client_of_this_thread(cache: dict[tuple, Any], settings: Any, make: Callable[[], Any]) -> Any:
    """The entry of `cache` for this process, thread and `settings`, made by `make` the first
    time; other processes' (forked) and other settings' entries are dropped then."""
    key = (os.getpid(), threading.get_ident(), settings)
    with _CLIENTS_LOCK:
        if key not in cache:
            stale = [k for k in cache if k[0] != key[0] or k[2] != key[2]]
            for old in stale:
                del cache[old]
            cache[key] = make()
        return cache[key]


_GCSIO_CACHE: dict[tuple, tuple[Any, Any]] = {}


def _gcsio() -> Any:
    """One GCS client per process, thread and options. Beam's GCSFileSystem builds a new client
    (a new connection) for every open, and reads in 16 MiB chunks; `open_binary` needs a
    smaller chunk for ranged reads (remote_records)."""
    from apache_beam.io.gcp import gcsio
    from apache_beam.options.value_provider import RuntimeValueProvider

    options = FileSystems._pipeline_options or RuntimeValueProvider.runtime_options
    # the options are kept with their client, so their id is not reused meanwhile
    made = _client_of_this_thread(
        _GCSIO_CACHE, id(options), lambda: (options, gcsio.GcsIO(pipeline_options=options))
    )
    return made[1]


def _open_object(path: str, mode: str) -> IO[bytes]:
    if FileSystems.get_scheme(path) == "gs" and mode == "rb":
        return _gcsio().open(path, "rb")
    if FileSystems.get_scheme(path) == "s3":
        if mode == "wb":
            from episodes.storage.uploads import S3ObjectWriter

            return S3ObjectWriter(_s3_client(), path)
        return _s3io().open(path, mode, read_buffer_size=READ_BUFFER_BYTES)
    if mode == "rb":
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def open_binary(path: str, buffer_bytes: int | None = None) -> IO[bytes]:
    """A seekable binary stream of a local file or of one object (for zip and tar archives);
    `buffer_bytes`: how much an object read fetches at least (small to list archive headers,
    large to stream members)."""
    if not is_remote(path):
        return open(path, "rb")
    try:
        if buffer_bytes is not None and FileSystems.get_scheme(str(path)) == "s3":
            return _s3io().open(str(path), "rb", read_buffer_size=buffer_bytes)
        if buffer_bytes is not None and FileSystems.get_scheme(str(path)) == "gs":
            return _gcsio().open(str(path), "rb", read_buffer_size=buffer_bytes)
        return _open_object(path, "rb")
    except Exception as exc:
        raise OSError(errno.EIO, f"cannot open ({_reason(exc)})", path) from None


def read_bytes(path: str) -> bytes:
    """The bytes of a local file or an object; store errors become OSError (naming the URL).
    An S3 or GCS object is fetched with one GET (Beam's reader first asks for its size: a
    second request per object, which doubled the cost of reading small images)."""
    if not is_remote(path):
        return read_local_file(path)
    try:
        scheme = FileSystems.get_scheme(path)
        if scheme == "s3":
            bucket, key = bucket_and_key(path)
            return get_object_bytes(_shared_s3_client(), bucket, key)
        if scheme == "gs":
            bucket, key = bucket_and_key(path)
            return _gcsio().client.bucket(bucket).blob(key).download_as_bytes()
        with _open_object(path, "rb") as stream:
            return stream.read()
    except Exception as exc:
        raise OSError(errno.EIO, f"cannot read ({_reason(exc)})", path) from None


def read_local_file(path: str | os.PathLike) -> bytes:
    """The bytes of a local file, read with plain descriptor calls: a conversion reads one
    small file per image, and `open()`'s buffered file object costs several times the read
    of a small file itself (the same bytes and the same OSError)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) == size:  # the usual case: a regular file, read whole in one call
            return data
        chunks = [data]  # a file that changed size, a short read, a pseudo-file of size 0
        while chunk := os.read(fd, max(size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:  # a folder opens and fails on reading: named as open() names it
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
    finally:
        os.close(fd)


def create_stream(url: str) -> IO[bytes]:
    """A binary stream writing one object. On S3 a `with` block that raises publishes
    nothing (the upload is aborted); elsewhere a partial object may stay in the staging
    prefix, which the failed job's cleanup removes."""
    try:
        return _open_object(url, "wb")
    except Exception as exc:
        raise OSError(errno.EIO, f"cannot create ({_reason(exc)})", url) from None


def create_local_file(path: str | os.PathLike) -> IO[bytes]:
    """A new local file for writing, its folders made first (what Beam's local FileSystems.create
    does, without its per-call overhead: a conversion creates several files per class)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "wb")


def write_bytes(path: str, data: bytes) -> None:
    """Write one whole file or object (a store makes an object visible only once its upload
    completed)."""
    if not is_remote(path):
        with create_local_file(path) as out:
            out.write(data)
        return
    with _open_object(path, "wb") as out:
        out.write(data)


@dataclass
class _Listing:
    """One listing of a remote folder, indexed as a tree of relative names."""

    root: str
    files: dict[str, int]
    children: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.files:
            parts = name.split("/")
            for depth in range(len(parts)):
                self.children.setdefault("/".join(parts[:depth]), set()).add(parts[depth])


@dataclass(frozen=True)
class _Stat:
    st_size: int


class ObjectPath:
    """The pathlib.Path calls the sources make, answered from one listing of a remote folder.

    `str()` is the object's URL, which workers read with `read_bytes` / `open_binary`."""

    def __init__(self, listing: _Listing, relative: str = ""):
        self._listing = listing
        self._rel = relative.strip("/")

    @classmethod
    def listed(cls, url: str) -> ObjectPath:
        """List every object under `url` once (one recursive listing) and return its root;
        a URL naming one object (an archive) gives that object, in a listing of it alone."""
        url = folder_url(url)
        listing = list_objects(url)
        if not listing:
            size = _object_size(url)
            if size is not None:
                parent, _, name = url.rpartition("/")
                return cls(_Listing(parent, {name: size}), name)
        return cls(_Listing(url, listing))

    def __truediv__(self, name: str) -> ObjectPath:
        name = str(name).strip("/")
        if not name or ".." in name.split("/"):
            raise ValueError(f"{self}: cannot join {name!r}")
        return ObjectPath(self._listing, posixpath.join(self._rel, name) if self._rel else name)

    def __str__(self) -> str:
        return join(self._listing.root, self._rel) if self._rel else self._listing.root

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and str(self) == str(other)

    def __lt__(self, other: ObjectPath) -> bool:
        return str(self) < str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    @property
    def name(self) -> str:
        return posixpath.basename(self._rel) if self._rel else self._listing.root.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]

    @property
    def stem(self) -> str:
        return posixpath.splitext(self.name)[0]

    @property
    def parent(self) -> ObjectPath:
        if not self._rel:
            raise ValueError(f"{self}: the listed root has no parent in this listing")
        return ObjectPath(self._listing, posixpath.dirname(self._rel))

    def is_file(self) -> bool:
        return self._rel in self._listing.files

    def is_dir(self) -> bool:
        return self._rel in self._listing.children

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def iterdir(self) -> Iterator[ObjectPath]:
        if not self.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder (no objects below it)", str(self))
        for name in sorted(self._listing.children[self._rel]):
            yield self / name

    def glob(self, pattern: str) -> Iterator[ObjectPath]:
        """The entries of this folder whose names match `pattern` (one level, fnmatch)."""
        import fnmatch

        if "/" in pattern or "**" in pattern:
            raise ValueError(f"{self}: only one-level patterns are supported, not {pattern!r}")
        if self.is_dir():
            for path in self.iterdir():
                if fnmatch.fnmatchcase(path.name, pattern):
                    yield path

    def relative_to(self, other: ObjectPath) -> str:
        """This path below `other` as a relative name (a str: objects have no relative paths)."""
        base = str(other).rstrip("/") + "/"
        if not str(self).startswith(base):
            raise ValueError(f"{self} is not below {other}")
        return str(self)[len(base) :]

    def stat(self) -> _Stat:
        if not self.is_file():
            raise FileNotFoundError(errno.ENOENT, "no such object", str(self))
        return _Stat(self._listing.files[self._rel])

    def resolve(self) -> ObjectPath:
        return self

    def read_bytes(self) -> bytes:
        return read_bytes(str(self))

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def open(self, mode: str = "r", newline: str | None = None, encoding: str | None = None) -> IO:
        if mode not in ("r", "rb"):
            raise ValueError(f"{self}: objects are opened for reading only, not {mode!r}")
        stream = io.BytesIO(self.read_bytes())
        if mode == "rb":
            return stream
        return io.TextIOWrapper(stream, encoding=encoding or "utf-8", newline=newline)


def input_location(path: str | os.PathLike) -> Path | ObjectPath:
    """A local `Path`, or the listed `ObjectPath` of a remote folder."""
    if isinstance(path, ObjectPath):
        return path
    return ObjectPath.listed(str(path)) if is_remote(path) else Path(path)


def require_output_folder(url: str) -> None:
    """An output in object storage must be a folder inside a bucket: its staging prefix lies
    beside it, in the same bucket. UsageError for a bare bucket."""
    if "/" not in folder_url(url).split("://", 1)[-1]:
        raise UsageError(
            f"{url}: an output must be a folder inside the bucket, e.g. {folder_url(url)}/NAME"
        )


def staging_prefix(url: str) -> str:
    """A fresh hidden prefix beside the output folder `url` for a job to write into."""
    require_output_folder(url)
    parent, _, name = folder_url(url).rpartition("/")
    return f"{parent}/.{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def check_output_prefix(url: str, overwrite: bool, marker: str) -> None:
    """Refuse a remote output folder that already holds objects unless `overwrite`."""
    existing = list_objects(url)
    if existing and not overwrite:
        state = "a finished output" if marker in existing else f"an unfinished one (no {marker})"
        raise OutputExistsError(
            f"{url}: output prefix holds {len(existing)} objects, {state} (pass --overwrite)"
        )


def publish_staged(staging: str, url: str, marker: str) -> list[str]:
    """Copy a finished staging prefix to `url`, `marker` last; remove the staging objects.

    An old output loses its marker first, so at no moment does a marker stand beside a mix of
    old and new files. Returns the published names."""
    staged = list_objects(staging)
    if marker not in staged:
        raise OSError(errno.EIO, f"the job wrote no {marker}", staging)
    old = list_objects(url)
    if marker in old:
        FileSystems.delete([join(url, marker)])
    names = sorted(n for n in staged if n != marker)
    copy_objects(staging, url, {n: staged[n] for n in names})
    stale = sorted(set(old) - set(staged))
    if stale:
        FileSystems.delete([join(url, n) for n in stale])
    copied = list_objects(url)
    wrong = [n for n in names if copied.get(n) != staged[n]]
    if wrong:
        raise OSError(
            errno.EIO, f"copied objects differ in size from the staged ones: {wrong[:3]}", url
        )
    FileSystems.copy([join(staging, marker)], [join(url, marker)])
    discard_prefix(staging)
    return names + [marker]


PUBLISH_THREADS = 10  # boto3 keeps 10 connections per client: more threads would wait
SINGLE_COPY_LIMIT = 5 * 2**30  # S3's CopyObject limit; larger objects use a multipart copy


def copy_objects(source: str, target: str, sizes: dict[str, int], label: str = "publish") -> None:
    """Copy the objects `sizes` ({relative name: bytes}) from the prefix `source` to `target`:
    server-side copies, PUBLISH_THREADS at a time, with a progress line every few seconds."""
    from concurrent.futures import ThreadPoolExecutor

    from episodes.util.progress_lines import ProgressLines

    if not sizes:
        return
    s3 = FileSystems.get_scheme(source) == "s3" and FileSystems.get_scheme(target) == "s3"
    client = _s3_client() if s3 else None

    def copy_one(name: str) -> None:
        src, dst = join(source, name), join(target, name)
        try:
            if client is None:
                FileSystems.copy([src], [dst])
                return
            (src_bucket, src_key), (dst_bucket, dst_key) = bucket_and_key(src), bucket_and_key(dst)
            if sizes[name] < SINGLE_COPY_LIMIT:
                client.copy_object(
                    Bucket=dst_bucket,
                    Key=dst_key,
                    CopySource={"Bucket": src_bucket, "Key": src_key},
                )
            else:
                client.copy({"Bucket": src_bucket, "Key": src_key}, dst_bucket, dst_key)
        except Exception as exc:
            raise OSError(errno.EIO, f"cannot copy to {dst} ({_reason(exc)})", src) from None

    progress = ProgressLines(label, len(sizes), "objects")
    with ThreadPoolExecutor(PUBLISH_THREADS, thread_name_prefix="publish") as pool:
        for _ in pool.map(copy_one, sorted(sizes)):
            progress.advance()


def abort_open_uploads(url: str) -> int:
    """Abort the S3 multipart uploads open under the prefix `url`; how many. 0 on other
    stores: GCS lists no unfinished resumable upload (it is no object, and expires a week
    after it began: cloud.google.com/storage/docs/resumable-uploads)."""
    if FileSystems.get_scheme(str(url)) != "s3":
        return 0
    from episodes.storage.uploads import abort_uploads

    return abort_uploads(_s3_client(), str(url))


def discard_prefix(url: str) -> None:
    """Delete every object under `url` (a failed job's staging prefix) and abort the uploads
    still open there; errors are ignored."""
    try:
        abort_open_uploads(folder_url(url) + "/")
    except Exception:  # best effort: the next run to this output tries again
        pass
    try:
        names = list_objects(url)
        if names:
            FileSystems.delete([join(url, n) for n in names])
    except Exception:  # best effort: a leftover staging prefix is hidden and harmless
        pass


def remove_remote_leftovers(url: str) -> list[str]:
    """Remove what killed runs writing the output `url` left: their staging prefixes
    (`.NAME.tmp-*` beside it: the objects they finished) and, on S3, the multipart uploads
    open there; the prefixes removed.

    Object storage has no locks, so two runs writing one output at once are not supported
    (each would publish over the other); a run removes every leftover of its own output."""
    require_output_folder(url)
    parent, _, name = folder_url(url).rpartition("/")
    pattern = f"{parent}/.{name}.tmp-"
    try:
        (result,) = FileSystems.match([pattern + "**"])
        objects = [m.path for m in result.metadata_list]
    except Exception as exc:
        raise OSError(errno.EIO, f"cannot list objects ({_reason(exc)})", url) from None
    prefixes = sorted({pattern + p[len(pattern) :].split("/", 1)[0] for p in objects})
    aborted = abort_open_uploads(pattern)
    if objects:
        FileSystems.delete(objects)
    if aborted and not prefixes:
        prefixes = [pattern + "*"]
    return prefixes


def load_remote_spec(url: str) -> Any:
    """The DatasetSpec of a remote dataset folder (its dataset_spec.json read through a
    temporary local copy)."""
    import tempfile

    from episodes.records.dataset_spec import SPEC_FILENAME, load_spec

    with tempfile.TemporaryDirectory(prefix="fewshot-spec-") as tmp:
        local = Path(tmp, SPEC_FILENAME)
        local.write_bytes(read_bytes(join(url, SPEC_FILENAME)))
        spec = load_spec(local)
    spec.root = None
    return spec
