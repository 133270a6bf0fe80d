"""Any image-classification dataset already prepared by TensorFlow Datasets:
`--source tfds:NAME --tfds-data-dir DIR` (NAME may carry a config and version,
`name/config:1.2.3`); `--input` serves as the data dir when `--tfds-data-dir` is absent.

Choices:
- Never downloads: the builder is opened on DIR (`tfds.builder(NAME, data_dir=DIR)`; a dataset
  whose code is not importable is opened from its `dataset_info.json`) and a dataset that is
  not prepared there stops the conversion before the pipeline, naming DIR.
- The image and label features are the top-level `Image` and `ClassLabel` features
  (`supervised_keys` decide when there are several; `--tfds-image-key` / `--tfds-label-key`
  override). Classes are the `ClassLabel` names in label order.
- `--tfds-split` (comma-separated) selects splits; by default every split is pooled per class,
  keys `<split>-<index in split>`. No fixed class split unless `--split-fractions` draws one.
- Work units are the shard file instructions; workers read the shards without TensorFlow
  (TFRecord framing with CRC checks, or ArrayRecord) and take the encoded image bytes as they
  are stored, so the writer re-encodes each image once. A record whose CRC does not verify is
  rejected; a shard whose framing breaks rejects its remaining records.
- The stored format defaults to the dataset's encoding (PNG unless it stores JPEG), and the
  mode to L for single-channel images, RGB otherwise.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from beam_pipelines.conversion.image_codec import ImageOptions
from beam_pipelines.sources._lib.fraction_split import (
    FractionSplitConfig,
    fraction_rule,
    fraction_splits,
)
from beam_pipelines.sources._lib.source_config import flag_of, option
from beam_pipelines.sources.base import (
    ClassInfo,
    ConversionPlan,
    LayoutError,
    RawItem,
    Source,
    WorkUnit,
)
from episodes.records.dataset_spec import Split
from episodes.records.example_proto import ExampleDecodeError, decode_example
from episodes.records.tfrecord_io import iter_frames
from episodes.storage.paths import (
    is_remote,
    join,
    list_objects,
    open_binary,
    read_bytes,
)

__all__ = [
    "dataset_name_of",
    "FORMATS",
    "SHARD_NAME",
    "SHARD_READ_BYTES",
    "TfdsConfig",
    "TfdsSource",
]

FORMATS = ("tfrecord", "array_record")


SHARD_READ_BYTES = 8 * 2**20  # one read of a shard object
SHARD_NAME = re.compile(r"\.(tfrecord|array_record)-\d+-of-\d+$")


def dataset_name_of(source: str | None) -> str:
    """NAME of `--source tfds:NAME`."""
    if not source or not str(source).startswith("tfds:") or not str(source)[5:].strip():
        raise LayoutError(f"--source {source!r}: expected tfds:NAME, e.g. tfds:mnist")
    return str(source)[5:].strip()


def _tfrecord_payloads(path: str) -> Iterator[tuple[bytes | None, str | None]]:
    """(payload, None) per record, (payload, reason) for a record that fails its CRC; a broken
    frame raises CorruptRecordError (the caller rejects the records it did not get)."""
    with open_binary(path, buffer_bytes=SHARD_READ_BYTES) as stream:  # a file or an object
        for index, (_, payload, ok) in enumerate(iter_frames(stream, where=path)):
            yield payload, None if ok else f"record {index}: payload CRC mismatch"


def _array_record_payloads(path: str) -> Iterator[tuple[bytes | None, str | None]]:
    from array_record.python.array_record_module import ArrayRecordReader

    reader = ArrayRecordReader(path)
    try:
        for payload in reader.read_all():
            yield payload, None
    finally:
        reader.close()


@dataclass(frozen=True)
class TfdsConfig(FractionSplitConfig):
    tfds_data_dir: str | None = option(
        None, "TFDS data dir holding the prepared dataset (default: --input)", metavar="DIR"
    )
    tfds_split: str | None = option(
        None, "comma-separated splits to pool (default: all splits)", metavar="SPLITS"
    )
    tfds_image_key: str | None = option(None, "the Image feature to use", metavar="KEY")
    tfds_label_key: str | None = option(None, "the ClassLabel feature to use", metavar="KEY")
    tfds_name: str | None = option(None, "NAME of --source tfds:NAME", cli=False)


class TfdsSource(Source):
    name = "tfds"
    raw_folders = None  # reads a TFDS data dir, not a folder of its own
    layout = "a TFDS data dir holding NAME/[config/]version/ prepared by tfds (never downloaded)"
    default_image_format = "png"
    default_mode = "RGB"
    remote_input = True  # a data dir in object storage: TFRecord shards (see _remote_builder)

    config_class = TfdsConfig

    @classmethod
    def from_args(cls, args) -> TfdsSource:
        """The source of `--source tfds:NAME` and its flags."""
        return cls(cls.config_class.from_args(args, tfds_name=dataset_name_of(args.source)))

    def _builder(self, name: str, data_dir: Path):
        import tensorflow_datasets as tfds

        if not data_dir.is_dir():
            raise LayoutError(f"{data_dir}: not found; expected {self.layout}")
        try:
            builder = tfds.builder(name, data_dir=str(data_dir))
        except Exception as exc:  # DatasetNotFoundError and friends
            present = sorted(p.name for p in data_dir.iterdir() if p.is_dir())[:8]
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LayoutError(
                f"{data_dir}: TFDS dataset {name!r} not found there (found {present}; {reason}); "
                "prepare it first, e.g. `tfds build NAME --data_dir DIR` (this converter never "
                "downloads)"
            ) from None
        if not builder.is_prepared():
            raise LayoutError(
                f"{data_dir}: TFDS dataset {name!r} is not prepared there (expected "
                f"{builder.data_dir}/dataset_info.json); prepare it first with `tfds build "
                f"{name} --data_dir {data_dir}` (this converter never downloads)"
            )
        return builder

    def _features(self, builder) -> tuple[str, str, object, object]:
        import tensorflow_datasets as tfds

        features = builder.info.features
        images = {k: f for k, f in features.items() if isinstance(f, tfds.features.Image)}
        labels = {k: f for k, f in features.items() if isinstance(f, tfds.features.ClassLabel)}
        supervised = builder.info.supervised_keys or (None, None)
        chosen = []
        for found, field_name, preferred, what in (
            (images, "tfds_image_key", supervised[0], "Image"),
            (labels, "tfds_label_key", supervised[1], "ClassLabel"),
        ):
            key = getattr(self.config, field_name)
            if key is None and len(found) == 1:
                key = next(iter(found))
            elif key is None and isinstance(preferred, str) and preferred in found:
                key = preferred
            if key not in found:
                raise LayoutError(
                    f"TFDS dataset {builder.name!r}: top-level {what} features {sorted(found)}; "
                    f"expected exactly one, or name it with {flag_of(field_name)}"
                    + (f" (got {key!r})" if key is not None else "")
                )
            chosen.append(key)
        return chosen[0], chosen[1], images[chosen[0]], labels[chosen[1]]

    def _remote_builder(self, name: str, data_dir: str, local: Path):
        """A dataset prepared under an object-store data dir: the metadata files of its version
        folder (all but the shards) copied into `local` and opened there with
        `tfds.builder_from_directory` (TFDS opens only the paths TensorFlow's file systems know,
        and no s3:// without tensorflow-io); the shards stay where they are, read by the
        workers. Returns the builder and the version folder's URL."""
        import tensorflow_datasets as tfds

        base, _, version = name.partition(":")
        try:
            names = list_objects(join(data_dir, base))
        except OSError as exc:
            raise LayoutError(f"{data_dir}: cannot list it ({exc.strerror})") from None
        versions = sorted(
            (n.rpartition("/")[0] for n in names if n.rpartition("/")[2] == "dataset_info.json"),
            key=lambda v: tuple(int(x) if x.isdigit() else -1 for x in v.split("/")[-1].split(".")),
        )
        if version:
            versions = [v for v in versions if v.split("/")[-1] == version]
        if not versions:
            raise LayoutError(
                f"{data_dir}: TFDS dataset {name!r} is not prepared there (no {base}/[config/]"
                f"version/dataset_info.json); prepare it first with `tfds build {base} "
                f"--data_dir DIR` and copy DIR there (this converter never downloads)"
            )
        chosen = versions[-1]
        remote = join(data_dir, base, chosen) if chosen else join(data_dir, base)
        prefix = f"{chosen}/" if chosen else ""
        for relative in names:
            file = relative[len(prefix) :] if relative.startswith(prefix) else None
            if file and "/" not in file and not SHARD_NAME.search(file):
                (local / file).write_bytes(read_bytes(join(remote, file)))
        return tfds.builder_from_directory(str(local)), remote

    def plan(self, input_path: Path) -> ConversionPlan:
        if not self.config.tfds_name:
            raise LayoutError("--source tfds: expected tfds:NAME, e.g. tfds:mnist")
        data_dir = self.config.tfds_data_dir or input_path
        if is_remote(data_dir):
            with tempfile.TemporaryDirectory(prefix="fewshot-tfds-") as local:
                builder, remote = self._remote_builder(
                    self.config.tfds_name, str(data_dir), Path(local)
                )
                return self._plan(builder, remote)
        return self._plan(self._builder(self.config.tfds_name, Path(data_dir)), None)

    def _plan(self, builder, remote: str | None) -> ConversionPlan:
        """The plan of an opened builder; `remote`: the URL its shards lie under, if remote."""
        name = self.config.tfds_name
        image_key, label_key, image_feature, label_feature = self._features(builder)
        file_format = str(getattr(builder.info.file_format, "value", builder.info.file_format))
        if file_format not in FORMATS:
            raise LayoutError(
                f"{builder.data_dir}: shards in {file_format} format; expected one of {FORMATS}"
            )
        available = sorted(builder.info.splits)
        wanted = self.config.tfds_split
        chosen = [s.strip() for s in wanted.split(",") if s.strip()] if wanted else available
        unknown = [s for s in chosen if s not in available]
        if unknown or not chosen:
            raise LayoutError(
                f"--tfds-split {wanted!r}: unknown split(s) {unknown}; "
                f"{builder.name} has {available}"
            )
        names = list(label_feature.names)
        shards = set(list_objects(remote)) if remote is not None else set()
        units = []
        for split in chosen:
            start = 0
            for shard, instruction in enumerate(builder.info.splits[split].file_instructions):
                filename = str(instruction.filename)
                if remote is not None:  # the shard beside the metadata, in the store
                    filename = join(remote, Path(filename).name)
                    if file_format != "tfrecord":
                        raise LayoutError(
                            f"{remote}: {file_format} shards are read from local files only; "
                            "copy the prepared dataset to a local folder"
                        )
                    if Path(filename).name not in shards:
                        raise LayoutError(f"{filename}: shard of {builder.name} {split} not found")
                elif not Path(filename).is_file():
                    raise LayoutError(f"{filename}: shard of {builder.name} {split} not found")
                payload = (
                    file_format,
                    filename,
                    int(instruction.skip),
                    int(instruction.take),
                    split,
                    start,
                    image_key,
                    label_key,
                    tuple(names),
                )
                take = int(instruction.take)
                units.append(WorkUnit(f"{split}-{shard:05d}", payload, take))
                start += take
        splits = fraction_splits(names, self.config)
        order = {Split.TRAIN: 0, Split.VALID: 1, Split.TEST: 2, None: 3}
        ranked = sorted(range(len(names)), key=lambda i: (order[splits[names[i]]], i))
        encoding = getattr(image_feature, "encoding_format", None) or "png"
        channels = (getattr(image_feature, "shape", None) or (None, None, 3))[-1]
        config = self.config
        image_options = ImageOptions(
            image_format=config.image_format or ("jpeg" if encoding == "jpeg" else "png"),
            mode=config.image_mode or ("L" if channels == 1 else "RGB"),
            jpeg_quality=config.jpeg_quality or 95,
            resize=config.resize,
        )
        return ConversionPlan(
            source=self.name,
            dataset_name=builder.name,
            classes=[ClassInfo(names[i], splits[names[i]]) for i in ranked],
            units=units,
            image_options=image_options,
            provenance={
                "input": remote or str(Path(builder.data_dir).resolve()),
                "tfds_name": name,
                "tfds_version": str(builder.info.version),
                "tfds_splits": chosen,
                "tfds_file_format": file_format,
                "image_feature": image_key,
                "label_feature": label_key,
                "split_rule": fraction_rule(self.config),
            },
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        file_format, filename, skip, take, split, start, image_key, label_key, names = unit.payload
        reader = _tfrecord_payloads if file_format == "tfrecord" else _array_record_payloads
        done = 0  # records of this unit yielded so far; record `skip + done` of the shard is next

        def missing(reason: str) -> RawItem:
            # The label of a record that was never read is unknown: class 0 stands in, which the
            # writer ignores for items carrying an error (they are only counted and listed).
            return RawItem(
                names[0], f"{split}-{start + done:09d}", f"{filename}[{skip + done}]", error=reason
            )

        try:
            for position, (payload, error) in enumerate(reader(filename)):
                if position < skip:
                    continue
                if done >= take:
                    return
                yield _example_item(
                    payload,
                    error,
                    f"{split}-{start + done:09d}",
                    f"{filename}[{skip + done}]",
                    image_key,
                    label_key,
                    names,
                )
                done += 1
        except Exception as exc:  # a broken frame or an unreadable shard
            reason = f"shard unreadable from here on ({type(exc).__name__}: {exc})"
        else:
            reason = "record missing: the shard ends early"
        while done < take:
            yield missing(reason)
            done += 1


def _example_item(payload, error, key, where, image_key, label_key, names) -> RawItem:
    """The RawItem of one serialized tf.train.Example (class 0 stands in for an unknown label
    of a rejected record)."""
    try:
        features = decode_example(payload) if payload is not None else {}
    except ExampleDecodeError as exc:
        return RawItem(names[0], key, where, error=error or f"not a tf.train.Example ({exc})")
    labels, images = features.get(label_key, []), features.get(image_key, [])
    label = labels[0] if len(labels) == 1 and isinstance(labels[0], int) else None
    known = label is not None and 0 <= label < len(names)
    class_name = names[label] if known else names[0]
    if error:
        return RawItem(class_name, key, where, error=error)
    if not known:
        return RawItem(class_name, key, where, error=f"label {labels} outside 0..{len(names) - 1}")
    if len(images) != 1 or not isinstance(images[0], bytes):
        return RawItem(class_name, key, where, error=f"no encoded image in feature {image_key!r}")
    return RawItem(class_name, key, where, data=images[0])
