"""`python -m beam_pipelines.download --source NAME --output RAW`: fetch a source's official raw
archives into the layout `convert --source NAME --input RAW` reads (`--all`: every source that
downloads, each into RAW/<source>/, as `convert --all --input RAW` finds them).

What is fetched is what each source declares (`Source.downloads`,
beam_pipelines.sources._lib.raw_downloads): URLs, sizes and SHA-256 registered by the installed
tensorflow-datasets (read at run time, beam_pipelines.downloads.registry), or a published URL and
digest with its origin. A file is fetched through `NAME.part` (resumed with HTTP Range after
any stop), verified, renamed into place (beam_pipelines.downloads.http_fetch) and, where the layout wants
the folders, extracted; a verified file already there is not fetched again (a `.NAME.verified`
stamp spares re-hashing it). A file without a known digest is fetched only with
`--allow-unverified`; files behind a login (ILSVRC-2012) are named with where to put them, one
line each. `--list` prints every source, its files, total size and whether it downloads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import signal
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from beam_pipelines.downloads.http_fetch import (
    Expected,
    FetchError,
    FetchOptions,
    fetch,
    file_digests,
    mismatch,
    part_path,
)
from beam_pipelines.downloads.registry import (
    ByHandFile,
    RegistryError,
    RemoteFile,
    by_hand_files,
    raw_folder_name,
    remote_files,
)
from beam_pipelines.runners.output_lock import OutputLockedError, acquire_output_lock
from beam_pipelines.sources import SOURCES, get_source_class
from beam_pipelines.sources._lib.source_config import add_config_arguments, option
from beam_pipelines.sources.base import LayoutError, Source
from episodes.util.atomic_files import missing_parents, remove_if_empty, write_text_atomically
from episodes.util.cli_errors import UserError, UserErrors, run_main, user_faults
from episodes.util.cli_style import CommandParser, command_parser
from episodes.util.config_flags import check_fields, config_from_args
from episodes.util.progress_lines import ProgressLines
from episodes.util.termination import note_signal

__all__ = [
    "build_parser",
    "by_hand_line",
    "download_for_convert",
    "download_source",
    "DownloadConfig",
    "DownloadError",
    "ensure_by_hand",
    "ensure_extracted",
    "ensure_file",
    "extract_archive",
    "file_url",
    "interrupted_line",
    "list_downloads",
    "main",
    "Outcome",
    "report",
    "run_downloads",
    "SAFE_TAR",
    "sigterm_as_interrupt",
    "source_status",
    "targets",
    "total_size",
    "UnverifiedError",
]


class DownloadError(UserError):
    """A file that could not be fetched, verified or placed: one line saying what to do."""


class UnverifiedError(DownloadError):
    """A file with no known digest, not fetched without --allow-unverified."""


@dataclass(frozen=True)
class DownloadConfig:
    """The download command's options (each a flag, beam_pipelines.sources._lib.source_config)."""

    mirror: str | None = option(
        None,
        "fetch every file from URL_PREFIX/<file name> (a cache or mirror) instead of its "
        "registered URL; sizes and digests are still checked",
        metavar="URL_PREFIX",
    )
    allow_unverified: bool = option(
        False,
        "also fetch files no checksum is known for (aircraft); their SHA-256 is printed",
    )
    timeout_s: float = option(60.0, "seconds without data before a try fails", minimum=0.01)
    retries: int = option(5, "tries after the first on a network fault", minimum=0)
    backoff_s: float = option(
        1.0, "seconds before the first retry, doubled for each next one (at most 60)", minimum=0
    )

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DownloadConfig:
        return config_from_args(cls, args)

    def fetch_options(self) -> FetchOptions:
        return FetchOptions(
            timeout_s=self.timeout_s, retries=self.retries, backoff_s=self.backoff_s
        )


def file_url(remote: RemoteFile, mirror: str | None) -> str:
    """Where `remote` is fetched from: its registered URL, or the mirror's `PREFIX/<name>`."""
    if not mirror:
        return remote.url
    return f"{mirror.rstrip('/')}/{quote(remote.name)}"


def _stamp(folder: Path, name: str, kind: str) -> Path:
    return folder / f".{name}.{kind}"


def _read_stamp(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _expected(remote: RemoteFile) -> Expected:
    return Expected(remote.size, remote.sha256, remote.md5)


def _stamped_digests(target: Path) -> tuple[int, str, str] | None:
    """The (size, sha256, md5) a `.verified` stamp recorded, if the file is unchanged since."""
    stamp = _read_stamp(_stamp(target.parent, target.name, "verified"))
    stat = target.stat()
    if stamp.get("size") == stat.st_size and stamp.get("mtime_ns") == stat.st_mtime_ns:
        return stat.st_size, stamp.get("sha256", ""), stamp.get("md5", "")
    return None


def _write_verified_stamp(target: Path, digests: tuple[int, str, str]) -> None:
    stat = target.stat()
    record = {"size": digests[0], "mtime_ns": stat.st_mtime_ns}
    record.update(sha256=digests[1], md5=digests[2])
    write_text_atomically(_stamp(target.parent, target.name, "verified"), json.dumps(record))


def ensure_file(remote: RemoteFile, folder: Path, config: DownloadConfig) -> tuple[Path, str]:
    """`folder/remote.name`, verified, fetching it if absent; (path, what was done)."""
    target = folder / remote.name
    if target.is_file():
        digests = _stamped_digests(target) or file_digests(target)
        wrong = mismatch(_expected(remote), digests)
        if wrong is not None:
            raise DownloadError(
                f"{target}: already there but {wrong}; move it away (or delete it) to "
                "download it again"
            )
        _write_verified_stamp(target, digests)
        how = "verified" if remote.verified else "present (checksum unknown)"
        return target, f"{how}, kept"
    if not remote.verified and not config.allow_unverified:
        raise UnverifiedError(
            f"{remote.url}: checksum unknown ({remote.origin}); pass --allow-unverified to "
            f"fetch it unchecked, or put {remote.name} in {folder} yourself"
        )
    url = file_url(remote, config.mirror)
    resumed = part_path(target).exists()
    try:
        digests = fetch(url, target, _expected(remote), config.fetch_options())
    except FetchError as exc:
        raise DownloadError(str(exc)) from None
    _write_verified_stamp(target, digests)
    what = "downloaded" + (" (resumed)" if resumed else "")
    if not remote.verified:
        what += f", unverified: sha256 {digests[1]}"
    return target, what


def _members(archive: Path) -> int:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            return len(handle.infolist())
    return 0


# tarfile's `data` filter (Python 3.10.12+, 3.11.4+): no absolute names, no links out, no devices
SAFE_TAR = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _check_member(archive: Path, member: tarfile.TarInfo) -> None:
    """Refuse a member that would land outside the folder (also where tarfile has no filter)."""
    parts = Path(member.name).parts
    if member.name.startswith("/") or ".." in parts or member.isdev():
        raise DownloadError(f"{archive}: member {member.name!r} would leave the folder; refused")


def extract_archive(archive: Path, into: Path) -> None:
    """Unpack a zip or a (compressed) tar into the empty folder `into`; tar members that would
    leave it, links out of it and device files are refused (tarfile's `data` filter)."""
    progress = ProgressLines(f"extract {archive.name}", _members(archive), "files")
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as handle:
                for info in handle.infolist():
                    handle.extract(info, into)
                    progress.advance(1)
            return
        with tarfile.open(archive, "r:*") as handle:
            for member in handle:
                _check_member(archive, member)
                handle.extract(member, into, **SAFE_TAR)
                progress.advance(1)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise DownloadError(f"{archive}: cannot be extracted ({exc})") from None


def ensure_extracted(archive: Path) -> str:
    """Extract `archive` beside itself once (a `.NAME.extracted` stamp records its digest);
    entries already there are left as they are."""
    folder = archive.parent
    digests = _stamped_digests(archive)
    stamp_path = _stamp(folder, archive.name, "extracted")
    if digests and _read_stamp(stamp_path).get("sha256") == digests[1]:
        return "extracted earlier"
    staging = folder / f".{archive.name}.extracting"
    if staging.exists():
        shutil.rmtree(staging)  # a run that stopped while extracting (the lock says none runs)
    staging.mkdir()
    try:
        extract_archive(archive, staging)
        kept = []
        for entry in sorted(staging.iterdir()):
            if (folder / entry.name).exists():
                kept.append(entry.name)
            else:
                entry.rename(folder / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    record = {"sha256": digests[1] if digests else None}
    write_text_atomically(stamp_path, json.dumps(record))
    return "extracted" + (f" (already there, left as is: {', '.join(kept)})" if kept else "")


def by_hand_line(source: str, item: ByHandFile, folder: Path) -> str:
    """One line: the file to obtain, its size, where from and where to put it."""
    size = f" ({item.size:,} bytes)" if item.size else ""
    return f"{source}: obtain {item.name}{size} from {item.where}; put it at {folder / item.name}"


def ensure_by_hand(source: str, item: ByHandFile, folder: Path) -> str | None:
    """None when the file is there with its registered size, else the line saying what to do
    (the digest of a 150 GB file is not computed here)."""
    target = folder / item.name
    if target.is_file() and (item.size is None or target.stat().st_size == item.size):
        return None
    line = by_hand_line(source, item, folder)
    if target.is_file():
        line += f" (the file there has {target.stat().st_size:,} bytes)"
    return line


@dataclass
class Outcome:
    done: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)
    by_hand: list[str] = dataclasses.field(default_factory=list)


def download_source(
    source: type[Source], folder: Path, config: DownloadConfig, outcome: Outcome, every: bool
) -> None:
    """Fetch (and extract) every file of `source` into `folder`; faults of one file are noted
    in `outcome` and the others go on (a file without a known digest is only named under
    `every`, as a by-hand file is). A full disk or Ctrl-C stops everything."""
    try:
        files = remote_files(source)
    except RegistryError as exc:
        outcome.failed.append(f"{source.name}: {exc}")
        return
    folder.mkdir(parents=True, exist_ok=True)
    for remote in files:
        try:
            path, what = ensure_file(remote, folder, config)
            if remote.extract:
                what += "; " + ensure_extracted(path)
        except UnverifiedError as exc:
            (outcome.by_hand if every else outcome.failed).append(f"{source.name}: {exc}")
            continue
        except DownloadError as exc:
            outcome.failed.append(str(exc))
            continue
        outcome.done.append(f"{source.name}: {path} {what}")
    for item in by_hand_files(source):
        line = ensure_by_hand(source.name, item, folder)
        if line is not None:
            outcome.by_hand.append(line)


def _size_text(size: int | None) -> str:
    if size is None:
        return "size unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} B"


def source_status(source: type[Source]) -> tuple[str, list[RemoteFile], list[ByHandFile], str]:
    """(how it is obtained, files, by-hand files, note) of a source for `--list`."""
    if source.raw_folders is None:
        return "prepared by tensorflow-datasets (tfds build)", [], [], ""
    try:
        files = remote_files(source)
    except RegistryError as exc:
        return "not available", [], [], str(exc)
    by_hand = by_hand_files(source)
    if by_hand:
        return "obtain by hand", files, by_hand, ""
    if not files:
        return "no download declared", files, by_hand, ""
    if any(not f.verified for f in files):
        return "downloads (checksum unknown: --allow-unverified)", files, by_hand, ""
    return "downloads", files, by_hand, ""


def total_size(files: list[RemoteFile] | list[ByHandFile]) -> int | None:
    sizes = [f.size for f in files]
    return None if not sizes or any(s is None for s in sizes) else sum(sizes)


def list_downloads(only: str | None = None, shown_files: int = 4) -> str:
    """Every source (or `only`): how it is obtained, its total size, then its files."""
    lines = []
    for name in [only] if only else sorted(SOURCES):
        source = SOURCES[name]
        status, files, by_hand, note = source_status(source)
        everything = [*files, *by_hand]
        size = _size_text(total_size(everything)) if everything else "-"
        lines.append(f"{name}: {status}, {len(everything)} file(s), {size}")
        for item in everything[: None if only else shown_files]:
            if isinstance(item, ByHandFile):
                lines.append(f"    {item.name}  {_size_text(item.size)}  from {item.where}")
            else:
                extract = ", extracted" if item.extract else ""
                lines.append(
                    f"    {item.name}  {_size_text(item.size)}  {item.digest_text()}{extract}  "
                    f"{item.url}"
                )
        if not only and len(everything) > shown_files:
            lines.append(
                f"    ... and {len(everything) - shown_files} more "
                f"(--list --source {name} lists them all)"
            )
        if note:
            lines.append(f"    {note}")
    return "\n".join(lines)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the command as Ctrl-C does (the part file kept, one line, exit 143)."""

    def interrupt(signum, frame):
        note_signal(signum)  # the exit status says which signal came (run_main)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def targets(names: list[str], every: bool, output: Path) -> list[tuple[type[Source], Path]]:
    """(source, folder) pairs: one source into `output` itself, or every downloading source
    into `output/<source>/` (`--all`)."""
    if every:
        chosen = [s for s in SOURCES.values() if s.downloads]
        return [(s, output / raw_folder_name(s)) for s in sorted(chosen, key=lambda s: s.name)]
    sources = [get_source_class(n) for n in names]
    for source in sources:
        if source.raw_folders is None:
            raise LayoutError(
                f"--source {source.name}: reads a dataset prepared by tensorflow-datasets "
                "(`tfds build NAME`), nothing to download here"
            )
        if not source.downloads:
            raise LayoutError(f"--source {source.name}: declares no download")
    if len(sources) > 1:
        return [(s, output / raw_folder_name(s)) for s in sources]
    return [(sources[0], output)]


def run_downloads(
    pairs: list[tuple[type[Source], Path]],
    lock_folder: Path,
    config: DownloadConfig,
    every: bool = False,
) -> Outcome:
    """Download every pair under one lock on `lock_folder` (no two downloads into one folder)."""
    lock_created = missing_parents(Path(lock_folder).absolute() / "file")
    try:
        lock = acquire_output_lock(lock_folder)
    except OutputLockedError as exc:
        holder = str(exc).split("(", 1)[-1].split(")", 1)[0]
        raise DownloadError(
            f"{lock_folder.absolute()}: another download or conversion is using this folder "
            f"({holder}); wait for it to finish"
        ) from None
    outcome = Outcome()
    created = {folder: missing_parents(folder / "file") for _, folder in pairs}
    try:
        with lock, sigterm_as_interrupt():
            for source, folder in pairs:
                download_source(source, folder, config, outcome, every)
    finally:  # folders made for files that never came go again (Ctrl-C, a full disk too)
        for folders in created.values():
            remove_if_empty(folders)
        remove_if_empty(lock_created)
    return outcome


def report(outcome: Outcome, every: bool) -> int:
    """Print what was done (stdout) and, with --all, the files to obtain by hand (stderr);
    what failed raises, one `error:` line each, as does a by-hand file of a source asked for by
    name (it cannot be converted yet)."""
    for line in outcome.done:
        print(line)
    faults = list(outcome.failed)
    for line in outcome.by_hand:
        if every:
            print(line, file=sys.stderr)
        else:
            faults.append(line)
    if faults:
        raise UserErrors(faults)
    return 0


def build_parser() -> CommandParser:
    parser = command_parser(
        "beam_pipelines.download",
        "Download a source's official raw archives (verified, resumable) into the layout "
        "`beam_pipelines.convert` reads.",
    )
    parser.add_argument(
        "--source",
        action="append",
        help="source name (see --list); repeatable: several go to OUTPUT/<source>/ each",
    )
    parser.add_argument(
        "--all", action="store_true", help="every source that downloads, into OUTPUT/<source>/"
    )
    parser.add_argument(
        "--list", action="store_true", help="list every source, its files and sizes, and exit"
    )
    parser.add_argument("--output", help="raw folder to download into (convert's --input)")
    add_config_arguments(parser.add_argument_group("download options"), DownloadConfig)
    return parser


def download_for_convert(source: str | None, every: bool, raw: str | None) -> None:
    """`convert --download`: fetch what `convert` is about to read into its --input folder with
    the default options, reported as the command itself reports them (`report`)."""
    if not raw or not (source or every):
        raise UserError("--download needs --input RAW (the folder to fill) and --source or --all")
    outcome = run_downloads(
        targets([source] if source else [], every, Path(raw)), Path(raw), DownloadConfig(), every
    )
    report(outcome, every)


def interrupted_line() -> str:
    return "interrupted: partial files are kept as NAME.part; run the same command to resume"


@user_faults
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        if args.source and len(args.source) > 1:
            parser.error("--list takes at most one --source")
        print(list_downloads(args.source[0] if args.source else None))
        return 0
    if not args.output or not (args.source or args.all):
        parser.error("give --output RAW and --source NAME (or --all); --list shows the sources")
    if args.source and args.all:
        parser.error("give --source or --all, not both")
    config = DownloadConfig.from_args(args)
    output = Path(args.output)
    pairs = targets(args.source or [], args.all, output)
    return report(run_downloads(pairs, output, config, args.all), args.all)


if __name__ == "__main__":
    sys.exit(run_main(main, interrupted=interrupted_line))
