"""Omniglot, from the original archives: `images_background/` and `images_evaluation/`,
each `<Alphabet>/characterNN/*.png`, as folders or as `images_background.zip` /
`images_evaluation.zip`.

Split (Meta-Dataset section 3.1): evaluation alphabets are test; of the background alphabets
the 5 with the fewest characters are valid, the rest train. Class ids are contiguous with
train < valid < test and characters in folder-name order, as the reference converter assigns
them: train and test alphabets in name order, valid alphabets smallest first (ties by name),
the order of the reference's list (Blackfoot 14, Ojibwe 14, Inuktitut 16, Tagalog 17,
Alphabet_of_the_Magi 20 characters: ids 883-963). Class names are `<Alphabet>-<characterNN>`.
"""

from __future__ import annotations

import os
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from beam_pipelines.sources._lib.folder_entries import Skipped, list_entries
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered
from beam_pipelines.sources._lib.source_config import SourceConfig, option
from beam_pipelines.sources.base import (
    ClassInfo,
    ConversionPlan,
    LayoutError,
    RawItem,
    Source,
    WorkUnit,
    require_dir,
)
from episodes.records.dataset_spec import Split
from episodes.storage.parallel_reads import read_in_order
from episodes.storage.paths import ObjectPath, input_location, join, open_binary

__all__ = ["NUM_VALID_ALPHABETS", "OmniglotConfig", "OmniglotSource", "PARTS"]

PARTS = ("images_background", "images_evaluation")
NUM_VALID_ALPHABETS = 5


def _scan_folder(root: Path | ObjectPath) -> tuple[dict[str, dict[str, list[str]]], list[Skipped]]:
    """{alphabet: {character: [file paths]}} of an extracted part, and the entries skipped
    (files outside character folders, FIFOs, broken or looping links, folder loops)."""
    tree: dict[str, dict[str, list[str]]] = {}
    top = list_entries(root)
    skipped = top.skipped + [
        (str(f), "a file outside <Alphabet>/<characterNN>/") for f in top.files
    ]
    for alphabet in top.folders:
        level = list_entries(alphabet, [root])
        skipped += level.skipped
        skipped += [(str(f), "a file outside <Alphabet>/<characterNN>/") for f in level.files]
        chars = {}
        for char in level.folders:
            inside = list_entries(char, [root, alphabet])
            skipped += inside.skipped
            skipped += [(str(f), "a folder inside a character folder") for f in inside.folders]
            chars[char.name] = [str(f) for f in inside.files]
        tree[alphabet.name] = chars
    return tree, skipped


def _scan_zip(path: Path | ObjectPath, part: str) -> dict[str, dict[str, list[str]]]:
    tree: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    try:
        with open_binary(str(path)) as stream, zipfile.ZipFile(stream) as archive:
            for member in archive.namelist():
                pieces = member.split("/")
                if member.endswith("/") or len(pieces) != 4 or pieces[0] != part:
                    continue
                _, alphabet, char, _ = pieces
                tree[alphabet][char].append(member)
    except zipfile.BadZipFile as exc:
        raise LayoutError(f"{path}: not a readable zip archive ({exc})") from None
    return {
        a: {c: sorted(f) for c, f in sorted(chars.items())} for a, chars in sorted(tree.items())
    }


@dataclass(frozen=True)
class OmniglotConfig(SourceConfig):
    omniglot_valid_alphabets: int = option(
        NUM_VALID_ALPHABETS,
        "background alphabets (the smallest) held out as valid (default 5)",
        minimum=0,
    )


class OmniglotSource(Source):
    name = "omniglot"
    layout = (
        "images_background/ and images_evaluation/ (folders or .zip) of "
        "<Alphabet>/characterNN/*.png"
    )
    default_image_format = "png"
    default_mode = "L"
    meta_dataset_pixels = True
    reference_inverts = True  # the reference stores white strokes on black
    remote_input = True  # listed and read through episodes.storage.paths
    # The two zips as TFDS registers them (convert reads the zips as they are).
    downloads = (
        TfdsRegistered("omniglot", "images_background.zip"),
        TfdsRegistered("omniglot", "images_evaluation.zip"),
    )

    config_class = OmniglotConfig

    def _locate(self, input_path: Path) -> dict[str, tuple[str, Path]]:
        require_dir(input_path, f"a folder holding {self.layout}")
        found = {}
        for part in PARTS:
            folder, archive = input_path / part, input_path / f"{part}.zip"
            if folder.is_dir():
                found[part] = ("folder", folder)
            elif archive.is_file():
                found[part] = ("zip", archive)
        missing = [p for p in PARTS if p not in found]
        if missing:
            present = sorted(p.name for p in input_path.iterdir())[:8]
            raise LayoutError(
                f"{input_path}: not an Omniglot layout: missing {', '.join(missing)} "
                f"(folder or .zip); expected {self.layout}; found {present}"
            )
        return found

    def plan(self, input_path: Path) -> ConversionPlan:
        input_path = input_location(input_path)  # a local Path or a listed object-store folder
        found = self._locate(input_path)
        trees, skipped = {}, []
        for part, (kind, path) in found.items():
            if kind == "folder":
                tree, part_skipped = _scan_folder(path)
                skipped += part_skipped
            else:
                tree = _scan_zip(path, part)
            tree = {a: chars for a, chars in tree.items() if chars}
            if not tree:
                raise LayoutError(
                    f"{path}: no <Alphabet>/<characterNN>/ folders with images; expected {self.layout}"
                )
            trees[part] = tree
        overlap = set(trees[PARTS[0]]) & set(trees[PARTS[1]])
        if overlap:
            raise LayoutError(f"{input_path}: alphabets in both parts: {sorted(overlap)[:5]}")
        n_valid = self.config.omniglot_valid_alphabets
        background = trees[PARTS[0]]
        if not 0 <= n_valid < len(background):
            raise LayoutError(
                f"--omniglot-valid-alphabets {n_valid}: the background part has only "
                f"{len(background)} alphabets"
            )
        by_size = sorted(background, key=lambda a: (len(background[a]), a))
        valid_alphabets = set(by_size[:n_valid])
        alphabet_split = {
            a: Split.VALID if a in valid_alphabets else Split.TRAIN for a in background
        }
        alphabet_split.update({a: Split.TEST for a in trees[PARTS[1]]})
        alphabets = (
            sorted(a for a in background if a not in valid_alphabets)
            + by_size[:n_valid]
            + sorted(trees[PARTS[1]])
        )
        classes, units = [], []
        for alphabet in alphabets:
            part = PARTS[0] if alphabet in background else PARTS[1]
            kind, path = found[part]
            for char, files in trees[part][alphabet].items():
                class_name = f"{alphabet}-{char}"
                classes.append(ClassInfo(class_name, alphabet_split[alphabet], alphabet))
                if kind == "folder":  # names below the part folder: a smaller plan to ship
                    files = [f[len(str(path)) + 1 :] for f in files]
                units.append(
                    WorkUnit(
                        class_name,
                        (class_name, kind, str(path), tuple(files)),
                        len(files),
                        whole_class=class_name,
                    )
                )
        return ConversionPlan(
            source=self.name,
            dataset_name="omniglot",
            classes=classes,
            units=units,
            image_options=self.image_options(),
            superclass_names=alphabets,
            skipped=skipped,
            provenance={
                "input": str(input_path.resolve()),
                "parts": {p: f"{k}:{v.name}" for p, (k, v) in found.items()},
                "valid_alphabets": sorted(valid_alphabets),
                "split_rule": "evaluation alphabets test; 5 smallest background alphabets valid",
                "class_order": "train and test alphabets by name, valid smallest first",
            },
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        class_name, kind, path, files = unit.payload
        if kind == "folder":  # objects in storage: several read at once, yielded in order
            paths = [join(path, name) for name in files]
            for file, data in zip(paths, read_in_order(paths)):
                name = os.path.basename(file)  # Path(file).name, without building a Path
                if isinstance(data, OSError):
                    yield RawItem(class_name, name, file, error=f"unreadable: {data}")
                    continue
                yield RawItem(class_name, name, file, data=data)
        else:
            with open_binary(path) as stream, zipfile.ZipFile(stream) as archive:
                for member in files:
                    where = f"{path}:{member}"
                    try:
                        data = archive.read(member)
                    except (zipfile.BadZipFile, OSError) as exc:
                        yield RawItem(class_name, member.rsplit("/", 1)[-1], where, error=str(exc))
                        continue
                    yield RawItem(class_name, member.rsplit("/", 1)[-1], where, data=data)
