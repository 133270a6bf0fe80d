"""The files a source downloads: its `downloads` declarations resolved into URLs, sizes and
digests, the TFDS-registered ones read at run time from the installed tensorflow-datasets.

TFDS registers `URL<TAB>SIZE<TAB>SHA256[<TAB>FILE NAME]` lines in
`tensorflow_datasets/url_checksums/<dataset>.txt` or in a `checksums.tsv` beside the
dataset's builder (`tensorflow_datasets/**/<dataset>/checksums.tsv`); the package is located,
never imported (importing TFDS takes seconds and pulls TensorFlow).

Tests (and only tests) point the environment variable `BEAM_PIPELINES_TEST_CHECKSUMS` at a
folder of `<dataset>.txt` files in the same format: those replace the installed TFDS's for the
datasets they name, so a local server's fixture archives go through the same lookup.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from beam_pipelines.sources._lib.raw_downloads import ObtainByHand, Published, TfdsRegistered
from beam_pipelines.sources.base import Source
from episodes.util.cli_errors import UserError

__all__ = [
    "by_hand_files",
    "ByHandFile",
    "checksum_file",
    "parse_checksum_lines",
    "raw_folder_name",
    "registered_entries",
    "RegisteredEntry",
    "RegistryError",
    "remote_files",
    "RemoteFile",
    "TEST_OVERRIDE_ENV",
    "tfds_package_dir",
]

TEST_OVERRIDE_ENV = "BEAM_PIPELINES_TEST_CHECKSUMS"


class RegistryError(UserError, ValueError):
    """A declaration names a file the installed TFDS does not register."""


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch into the raw folder, with what it must be. `sha256` / `md5` None:
    not known (`verified` is False when neither is)."""

    name: str  # file name in the raw folder
    url: str
    size: int | None
    sha256: str | None
    md5: str | None
    extract: bool
    origin: str  # where the figures come from

    @property
    def verified(self) -> bool:
        return bool(self.sha256 or self.md5)

    def digest_text(self) -> str:
        if self.sha256:
            return f"sha256 {self.sha256}"
        if self.md5:
            return f"md5 {self.md5}"
        return "checksum unknown"


@dataclass(frozen=True)
class ByHandFile:
    """A file the user must obtain: where from, and its registered size when TFDS knows it."""

    name: str
    where: str
    size: int | None
    sha256: str | None


@dataclass(frozen=True)
class RegisteredEntry:
    url: str
    size: int
    sha256: str
    name: str


def tfds_package_dir() -> Path | None:
    """The installed tensorflow_datasets package folder (found, not imported), or None."""
    spec = importlib.util.find_spec("tensorflow_datasets")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def parse_checksum_lines(text: str, where: str) -> list[RegisteredEntry]:
    """The entries of a TFDS checksums file: tab-separated (URLs may hold spaces) or, in older
    files, space-separated `URL SIZE SHA256`; the file name defaults to the URL's last part."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t") if "\t" in line else line.rsplit(None, 2)
        try:
            url, size, sha256 = fields[0].strip(), int(fields[1]), fields[2].strip().lower()
            if len(sha256) != 64:
                raise ValueError
        except (IndexError, ValueError):
            raise RegistryError(
                f"{where}:{number}: expected 'URL<TAB>SIZE<TAB>SHA256[<TAB>NAME]', got {line!r}"
            ) from None
        name = fields[3].strip() if len(fields) > 3 and fields[3].strip() else None
        name = unquote(name or urlsplit(url).path.rsplit("/", 1)[-1])
        entries.append(RegisteredEntry(url, size, sha256, name))
    return entries


def checksum_file(dataset: str) -> Path:
    """The file registering `dataset`'s checksums: the test override's, else the installed
    TFDS's `url_checksums/<dataset>.txt` or `<dataset>/checksums.tsv`."""
    override = os.environ.get(TEST_OVERRIDE_ENV)
    if override and (Path(override) / f"{dataset}.txt").is_file():
        return Path(override) / f"{dataset}.txt"
    package = tfds_package_dir()
    if package is None:
        raise RegistryError(
            f"tensorflow-datasets is not installed: its registered checksums give the URLs of "
            f"{dataset!r}; install the toolkit's requirements (requirements.lock)"
        )
    listed = package / "url_checksums" / f"{dataset}.txt"
    if listed.is_file():
        return listed
    found = sorted(package.glob(f"**/{dataset}/checksums.tsv"))
    if not found:
        raise RegistryError(
            f"{package}: no registered checksums for TFDS dataset {dataset!r} "
            f"(url_checksums/{dataset}.txt or {dataset}/checksums.tsv)"
        )
    return found[0]


def registered_entries(dataset: str) -> list[RegisteredEntry]:
    path = checksum_file(dataset)
    return parse_checksum_lines(path.read_text(encoding="utf-8"), str(path))


def _tfds_files(declared: TfdsRegistered) -> list[RemoteFile]:
    path = checksum_file(declared.dataset)
    entries = parse_checksum_lines(path.read_text(encoding="utf-8"), str(path))
    if declared.file_name.startswith("*"):
        wanted = [e for e in entries if e.name.endswith(declared.file_name[1:])]
    else:
        wanted = [e for e in entries if e.name == declared.file_name][:1]  # first listed URL
    if not wanted:
        raise RegistryError(f"{path}: registers no file named {declared.file_name!r}")
    first: dict[str, RegisteredEntry] = {}
    for entry in wanted:
        first.setdefault(entry.name, entry)
    origin = f"registered by tensorflow-datasets ({path.name} of {declared.dataset})"
    return [
        RemoteFile(e.name, e.url, e.size, e.sha256, None, declared.extract, origin)
        for e in sorted(first.values(), key=lambda e: e.name)
    ]


def remote_files(source: type[Source]) -> list[RemoteFile]:
    """Every file `source` downloads, its declarations resolved (RegistryError if TFDS does
    not register a declared file)."""
    files: list[RemoteFile] = []
    for declared in source.downloads:
        if isinstance(declared, TfdsRegistered):
            files.extend(_tfds_files(declared))
        elif isinstance(declared, Published):
            files.append(
                RemoteFile(
                    declared.file_name,
                    declared.url,
                    declared.size,
                    declared.sha256,
                    declared.md5,
                    declared.extract,
                    declared.origin,
                )
            )
    return files


def by_hand_files(source: type[Source]) -> list[ByHandFile]:
    """The files of `source` the user must obtain, with their TFDS-registered size if any."""
    out = []
    for declared in source.downloads:
        if not isinstance(declared, ObtainByHand):
            continue
        size = sha256 = None
        if declared.tfds:
            try:
                entry = next(
                    (e for e in registered_entries(declared.tfds) if e.name == declared.file_name),
                    None,
                )
            except RegistryError:
                entry = None
            if entry is not None:
                size, sha256 = entry.size, entry.sha256
        out.append(ByHandFile(declared.file_name, declared.where, size, sha256))
    return out


def raw_folder_name(source: type[Source]) -> str:
    """The sub-folder of a `--all` root a source's files go to: its own name where
    `convert --all` looks for it there, else the first folder it looks in."""
    names = source.raw_folder_names()
    return source.name if source.name in names or not names else names[0]
