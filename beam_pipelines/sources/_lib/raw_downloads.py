"""What a source declares about fetching its raw files (`Source.downloads`), read by
`python -m beam_pipelines.download`.

Three kinds of declaration, each naming the file as it must lie in the raw folder:
- `TfdsRegistered`: the URL, size and SHA-256 are those the installed tensorflow-datasets
  registers for one of its datasets (read at run time, beam_pipelines.downloads.registry);
- `Published`: a file TFDS does not register, with the URL and the digests its publisher (or
  widely used public code) gives, and `origin` saying where each figure came from; a file with
  no known digest is downloaded only with `--allow-unverified`;
- `ObtainByHand`: a file behind a login or a licence form: the command prints where to get it
  and where to put it, and never fetches it.
`extract=True` unpacks a verified archive into the raw folder, where the source's layout
expects the extracted folders rather than the archive.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ObtainByHand", "Published", "RawDownload", "TfdsRegistered"]


@dataclass(frozen=True)
class TfdsRegistered:
    """File(s) of the installed TFDS's registered checksums of `dataset`: `file_name` is the
    registered file name, or `*.EXT` for every registered file ending in `.EXT`."""

    dataset: str
    file_name: str
    extract: bool = False


@dataclass(frozen=True)
class Published:
    """A file TFDS does not register; `None` where no public figure was found (`origin`)."""

    url: str
    file_name: str
    origin: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None
    extract: bool = False


@dataclass(frozen=True)
class ObtainByHand:
    """A file the user fetches (a login or a licence form): `where` is the page to get it from;
    `tfds` optionally names the TFDS dataset whose registered checksums give its size."""

    file_name: str
    where: str
    tfds: str | None = None


RawDownload = TfdsRegistered | Published | ObtainByHand
