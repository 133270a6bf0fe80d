"""Writers of Omniglot's layout: one file per image under a folder, or one zip per split
with fixed timestamps so the archive bytes are reproducible.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from beam_pipelines.glyph_dataset.alphabet_plan import AlphabetPlan
from beam_pipelines.glyph_dataset.config import BACKGROUND, EVALUATION

__all__ = ["character_folders", "FolderWriter", "ZipWriter"]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def character_folders(plans: Sequence[AlphabetPlan]) -> Iterator[tuple[str, int]]:
    """(relative folder of a character, global 1-based character index), in output order."""
    index = 0
    for plan in plans:
        for number in range(1, len(plan.codepoints) + 1):
            index += 1
            yield f"{plan.split}/{plan.name}/character{number:02d}", index


class FolderWriter:
    """Writes members as files under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, member: str, data: bytes) -> None:
        path = self.root / member
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def close(self) -> list[str]:
        """The top-level entries written (GENERATOR.json's "files")."""
        return [BACKGROUND, EVALUATION]


class ZipWriter:
    """Writes members into `<split>.zip` archives with fixed timestamps (reproducible bytes)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.archives: dict[str, zipfile.ZipFile] = {}
        self.folders: set[str] = set()

    def _archive(self, split: str) -> zipfile.ZipFile:
        if split not in self.archives:
            self.archives[split] = zipfile.ZipFile(self.root / f"{split}.zip", "w")
        return self.archives[split]

    def add(self, member: str, data: bytes) -> None:
        archive = self._archive(member.split("/", 1)[0])
        parts = member.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth]) + "/"
            if folder not in self.folders:
                self.folders.add(folder)
                info = zipfile.ZipInfo(folder, date_time=_ZIP_DATE)
                info.external_attr = (0o40755 << 16) | 0x10
                archive.writestr(info, b"")
        info = zipfile.ZipInfo(member, date_time=_ZIP_DATE)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(info, data)

    def close(self) -> list[str]:
        """Finish the archives; the top-level entries written (GENERATOR.json's "files")."""
        for archive in self.archives.values():
            archive.close()
        return [f"{split}.zip" for split in (BACKGROUND, EVALUATION)]
