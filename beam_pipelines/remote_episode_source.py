"""The episodes of datasets in object storage, for the episode-shards job's workers.

`EpisodeReader` opens local folders only. A shards worker needs less of it: the description of
episode i (a pure function of the specs, split, sampler config and seed: the same
`sampler_factory.make_sampler` the reader uses) and the encoded bytes of its records, read here
with one ranged read each (`episodes.storage.remote_records`). So `--dataset s3://...` works on
any runner without a local copy, and the shards are byte-identical to those of a local folder.
Local folders among the datasets are read from disk as the reader reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from episodes.images.record_images import RecordImages
from episodes.reading.reader import encoded_episode_images
from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.records.reader_errors import ReaderError
from episodes.records.record_reader import RecordReader
from episodes.sampling.sampler_factory import (
    legacy_mode,
    load_dataset,
    make_sampler,
    read_split_file,
)
from episodes.sampling.sampling_mode import SamplingMode
from episodes.storage import paths as storage_paths

__all__ = ["load_any_dataset", "RemoteEpisodeSource"]


def load_any_dataset(
    location: str, split_file: str | None
) -> tuple[DatasetSpec, RecordReader, dict[str, int] | None]:
    """The spec (its splits replaced by `split_file`), a records reader of a local folder or a
    dataset URL, and for a URL its objects' listing ({name: size}; None for a folder)."""
    if not storage_paths.is_remote(location):
        spec = load_dataset(location, split_file)
        return spec, RecordReader(spec.root, spec.file_pattern), None
    from episodes.storage.remote_records import RemoteRecordReader, load_remote_dataset

    spec, listing = load_remote_dataset(location)
    if split_file is not None:
        train, valid, test = read_split_file(split_file)
        spec = spec.with_splits(train, valid, test, source=str(split_file))
    return spec, RemoteRecordReader(location, spec.file_pattern, sizes=listing), listing


class RemoteEpisodeSource:
    """What a shards worker reads of `EpisodeReader` (`describe`, `encoded_images`, `spec`,
    `specs`, `split`, `close`), for datasets of which at least one is a URL."""

    def __init__(
        self,
        locations: Sequence[str],
        split: Split | str,
        config: Any,
        seed: int,
        split_file: str | None = None,
        mix_lambda: float | None = None,
        base_split: Split | str = Split.TRAIN,
        sampling: SamplingMode | None = None,
    ):
        if split_file is not None and len(locations) != 1:
            raise ReaderError("split_file applies to one dataset; got several dataset folders")
        self.split = Split.parse(split)
        loaded = [load_any_dataset(str(location), split_file) for location in locations]
        self.specs = [spec for spec, _, _ in loaded]
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ReaderError(f"dataset names must differ across sources, got {names}")
        mode = sampling if sampling is not None else legacy_mode(mix_lambda, base_split)
        splits = mode.splits_read(self.split)
        self._images: dict[str, RecordImages] = {}
        for (spec, records, listing), location in zip(loaded, locations):
            for name in splits:
                classes = spec.classes(name)  # a clear error for a spec without splits
                if listing is not None:  # a URL
                    self._check_records(spec, listing, classes, str(location))
            self._images[spec.name] = RecordImages(records)
        self.sampler = make_sampler(self.specs, self.split, config, seed, sampling=mode)

    @staticmethod
    def _check_records(spec: DatasetSpec, listing: dict[str, int], classes, location: str) -> None:
        from episodes.storage.remote_records import missing_records

        missing = missing_records(spec, listing, classes)
        if missing:
            raise ReaderError(
                f"dataset {spec.name!r}: {len(missing)} record objects are missing, e.g. "
                f"{storage_paths.join(location, missing[0])}"
            )

    def spec(self, source: str) -> DatasetSpec:
        for spec in self.specs:
            if spec.name == source:
                return spec
        raise ReaderError(f"episode source {source!r} is not among {[s.name for s in self.specs]}")

    def describe(self, index: int) -> Any:
        return self.sampler.episode(index)

    def encoded_images(self, description: Any) -> tuple[list[bytes], list[bytes]]:
        """Encoded bytes of the support and query records, as stored (as EpisodeReader's)."""
        return encoded_episode_images(description, self._images[description.source].encoded)

    def close(self) -> None:
        for images in self._images.values():
            images.close()
