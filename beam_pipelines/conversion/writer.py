"""The shared writer: RawItems -> per-class TFRecords, `.index` sidecars and `dataset_spec.json`.

Small named PTransforms, in pipeline order:
  EncodeUnits       read each work unit's items (the source's `read_unit`) and decode/check/
                    convert/encode them into a spill file (beam_pipelines.conversion.frame_spill),
                    emitting per class of the unit ("encoded", (class id, small references))
                    and per reject ("rejected", why): one element per unit and class, not per
                    image, so Beam's per-element cost (coders, the shuffle) is paid per unit
  WriteClassFiles   group the references by class id, order by item key, stream the records
                    from the spill files into the class file + index (memory stays bounded)
  WriteSpec         the class results and rejects gathered under one key -> spec JSON
No tagged outputs and no side inputs: every runner of the Beam model routes one PCollection per
step the same way (Beam's Dask runner hands every tagged output to every consumer, and
recomputes a side input's producers), so the kinds travel as the first tuple field instead.
Records inside a class are ordered by the source's item key, so the files are byte-identical
whatever the runner, worker count or bundle order.
On one worker in the launcher's own process (the local runner's default) the same work is one
step, ConvertInThisProcessFn, given the units by reference: no shuffle has anything to bring
together there, and Beam's fixed cost per step was a third of a small dataset's conversion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_pipelines.conversion.frame_spill import (
    FrameRef,
    SpillWriter,
    frames_in_order,
    open_output,
    release_spill_files,
)
from beam_pipelines.conversion.image_codec import ImageOptions, ImageRejected, process_image
from beam_pipelines.conversion.progress import ImageCounter
from beam_pipelines.conversion.whole_class_file import (
    WholeClassFile,
    class_file_names,
    class_result,
    write_index,
)
from beam_pipelines.sources.base import ConversionPlan, RawItem, WorkUnit
from episodes.records.dataset_spec import BiLevelHierarchy, DatasetSpec, Split
from episodes.records.example_proto import encode_image_example, image_example_pieces
from episodes.records.record_index import RecordIndex
from episodes.records.tfrecord_io import frame_pieces, frame_record
from episodes.storage.paths import write_bytes

__all__ = [
    "_write_bytes",
    "build_spec",
    "class_file_names",
    "CLASS_RESULT",
    "CONVERTER_VERSION",
    "ConvertInThisProcessFn",
    "ConvertUnits",
    "units_in_this_process",
    "ENCODED",
    "EncodeImagesFn",
    "GATHER_TRIGGER",
    "GatherUnderOneKey",
    "kind_class_result",
    "of_kind",
    "REJECTED",
    "values_by_kind",
    "write_class_file",
    "write_gathered_spec",
    "write_spec",
    "WriteConvertedDataset",
]

CONVERTER_VERSION = "1"
ENCODED = "encoded"
REJECTED = "rejected"
CLASS_RESULT = "class"
GATHER_TRIGGER = "trigger"
_LOG = logging.getLogger(__name__)


class EncodeImagesFn(beam.DoFn):
    """WorkUnit -> its RawItems encoded. A unit that holds a whole class writes that class file
    itself (beam_pipelines.conversion.whole_class_file) and emits ("class", result); any other emits per
    class of the unit one ("encoded", (class id, [FrameRef, ...])), the framed records parked in
    a spill file. Every reject is one ("rejected", (path, reason))."""

    def __init__(
        self, source: Any, class_index: dict[str, int], options: ImageOptions, staging_dir: str
    ):
        self.source = source
        self.class_index = class_index
        self.options = options
        self.staging_dir = staging_dir

    def setup(self):
        self._counter = ImageCounter(self.staging_dir)  # the launcher prints the progress

    def start_bundle(self):
        self._spill = SpillWriter(self.staging_dir)

    def finish_bundle(self):
        self._spill.close()
        self._counter.flush()

    def whole_class_of(self, unit: WorkUnit) -> int | None:
        """The class id of the one class `unit` holds whole, if it does."""
        return None if unit.whole_class is None else self.class_index[unit.whole_class]

    def process(self, unit: WorkUnit):
        whole_class = self.whole_class_of(unit)
        if whole_class is not None:
            yield from self.write_whole_class(unit, whole_class)
            return
        batches: dict[int, list] = {}
        for item in self.source.read_unit(unit):
            self._counter.advance()
            kind, value = self.encode(item)
            if kind == REJECTED:
                yield kind, value
            else:
                class_id, encoded = value
                batches.setdefault(class_id, []).append(self.emit(class_id, item.key, encoded))
        for class_id, refs in batches.items():
            yield ENCODED, (class_id, [ref for _, ref in refs])

    def write_whole_class(self, unit: WorkUnit, class_id: int):
        """Encode the unit's items straight into their class file; then its result."""
        out = WholeClassFile(class_id, self.staging_dir)
        try:
            for item in self.source.read_unit(unit):
                self._counter.advance()
                kind, value = self.encode(item)
                if kind == REJECTED:
                    yield kind, value
                    continue
                if value[0] != class_id:
                    raise RuntimeError(
                        f"work unit {unit.key} of class {unit.whole_class!r} yielded an item of "
                        f"class {item.class_name!r} ({item.path})"
                    )
                encoded = value[1]
                out.add(item.key, encoded, frame_pieces(image_example_pieces(encoded, class_id)))
        except BaseException:
            out.abandon()
            raise
        yield CLASS_RESULT, out.close()

    def encode(self, item: RawItem) -> tuple[str, tuple]:
        """("encoded", (class id, encoded image bytes)) or ("rejected", (path, reason))."""
        if item.error:
            return REJECTED, (item.path, item.error)
        class_id = self.class_index.get(item.class_name)
        if class_id is None:
            return REJECTED, (item.path, f"class {item.class_name!r} is not in the conversion plan")
        try:
            encoded = process_image(item.data, self.options, item.array, item.crop_box)
        except ImageRejected as exc:
            return REJECTED, (item.path, str(exc))
        return ENCODED, (class_id, encoded)

    def emit(self, class_id: int, key: str, encoded: bytes) -> tuple[int, FrameRef]:
        """Park the framed record in this bundle's spill file; its reference goes on."""
        frame = frame_record(encode_image_example(encoded, class_id))
        return class_id, self._spill.add(class_id, key, hashlib.sha256(encoded).digest(), frame)


def _write_bytes(path: str, data: bytes) -> None:
    write_bytes(path, data)  # local, or one object (episodes.storage.paths)


def write_class_file(
    element: tuple[int, Iterable[list[FrameRef]]], output_dir: str
) -> dict[str, Any]:
    """Write one class's records (ordered by item key, then image hash) from its batches of
    references (one per unit) and its index; return its counts. Holds the class's references
    and one record in memory, whatever its size."""
    class_id, batches = element
    refs = sorted(ref for batch in batches for ref in batch)
    records_name, index_name = class_file_names(class_id)
    digest = hashlib.sha256()
    lengths = []
    with open_output(FileSystems.join(output_dir, records_name)) as out:
        for frame in frames_in_order(refs):
            out.write(frame)
            digest.update(frame)
            lengths.append(len(frame))
    write_index(FileSystems.join(output_dir, index_name), lengths)
    release_spill_files(refs)
    return class_result(class_id, lengths, digest, [ref.key for ref in refs])


def build_spec(
    plan: ConversionPlan, results: list[dict], rejected: list[tuple[str, str]]
) -> DatasetSpec:
    """The dataset spec of a finished conversion (pure: no I/O)."""
    images = [0] * len(plan.classes)
    for result in results:
        images[result["class_id"]] = result["images"]
    splits_known = [c.split is not None for c in plan.classes]
    if all(splits_known):
        split_classes = {s: [i for i, c in enumerate(plan.classes) if c.split == s] for s in Split}
    elif not any(splits_known):
        split_classes = None
    else:
        raise ValueError(f"plan for {plan.dataset_name}: some classes have a split and some do not")
    hierarchy = None
    if plan.dag is not None:
        hierarchy = plan.dag
    elif plan.superclass_names is not None:
        super_index = {n: i for i, n in enumerate(plan.superclass_names)}
        superclass_of = [super_index[c.superclass] for c in plan.classes]
        superclass_splits = None
        if split_classes is not None:
            superclass_splits = {
                s: sorted({superclass_of[c] for c in ids}) for s, ids in split_classes.items()
            }
        hierarchy = BiLevelHierarchy(list(plan.superclass_names), superclass_of, superclass_splits)
    all_rejected = sorted(plan.skipped) + sorted(rejected)
    empty = [i for i, n in enumerate(images) if n == 0]
    provenance = dict(plan.provenance)
    provenance.update(
        {
            "source": plan.source,
            "converter_version": CONVERTER_VERSION,
            "beam_version": beam.__version__,
            "images_written": int(sum(images)),
            "rejected_count": len(all_rejected),
            "rejected": [{"path": p, "reason": r} for p, r in all_rejected],
            "empty_classes": empty,
            "duplicate_keys": int(sum(r.get("duplicate_keys", 0) for r in results)),
            "image_mode": plan.image_options.mode,
            "resize": plan.image_options.resize,
            "pixel_convention": plan.image_options.convention,
            "inverted": plan.image_options.invert,
            "records_sha256": hashlib.sha256(
                "".join(r["sha256"] for r in sorted(results, key=lambda r: r["class_id"])).encode()
            ).hexdigest(),
        }
    )
    return DatasetSpec(
        name=plan.dataset_name,
        class_names=[c.name for c in plan.classes],
        images_per_class=images,
        split_classes=split_classes,
        hierarchy=hierarchy,
        image_format=plan.image_options.image_format,
        provenance=provenance,
    )


def of_kind(element: tuple[str, Any], kind: str) -> Iterable[Any]:
    """The value of a (kind, value) element when its kind is `kind` (one branch of a step)."""
    if element[0] == kind:
        yield element[1]


def values_by_kind(elements: Iterable[tuple[str, Any]], *kinds: str) -> tuple[list, ...]:
    """The values of (kind, value) elements as one list per kind in `kinds`, in arrival order;
    elements of other kinds (a gather's trigger) are left out."""
    lists: dict[str, list] = {kind: [] for kind in kinds}
    for kind, value in elements:
        if kind in lists:
            lists[kind].append(value)
    return tuple(lists[kind] for kind in kinds)


class GatherUnderOneKey(beam.PTransform):
    """A tuple of (kind, value) collections -> one (0, elements) group: every element of them
    plus a (GATHER_TRIGGER, None) one, so the step after it runs once, after all of them, even
    when they are empty (in place of side inputs: see the module docstring)."""

    def expand(self, collections: tuple[beam.PCollection, ...]) -> beam.PCollection:
        pipeline = collections[0].pipeline
        trigger = pipeline | "Trigger" >> beam.Create([(GATHER_TRIGGER, None)])
        return (
            (trigger, *collections)
            | "Flatten" >> beam.Flatten()
            | "UnderOneKey" >> beam.Map(lambda element: (0, element))
            | "Group" >> beam.GroupByKey()
        )


def write_gathered_spec(
    gathered: tuple[Any, Iterable[tuple[str, Any]]], plan: ConversionPlan, output_dir: str
) -> int:
    """`write_spec` from the one group of (kind, value) elements: class results and rejects."""
    results, rejected = values_by_kind(gathered[1], CLASS_RESULT, REJECTED)
    return write_spec(plan, results, rejected, output_dir)


def write_spec(plan: ConversionPlan, results: list[dict], rejected: list, output_dir: str) -> int:
    """Write empty files for classes without images, then dataset_spec.json."""
    done = {r["class_id"] for r in results}
    for class_id in range(len(plan.classes)):
        if class_id not in done:
            records_name, index_name = class_file_names(class_id)
            _write_bytes(FileSystems.join(output_dir, records_name), b"")
            _write_bytes(
                FileSystems.join(output_dir, index_name),
                RecordIndex(np.zeros(0, dtype=np.uint64), 0).to_bytes(),
            )
    spec = build_spec(plan, results, [tuple(r) for r in rejected])
    import json

    _write_bytes(
        FileSystems.join(output_dir, "dataset_spec.json"),
        (json.dumps(spec.to_json(), indent=1) + "\n").encode(),
    )
    return len(results)


@dataclass
class WriteConvertedDataset(beam.PTransform):
    """PCollection[WorkUnit] of `source` -> a converted dataset folder at `output_dir`."""

    source: Any
    plan: ConversionPlan
    output_dir: str

    def expand(self, units):
        encoder = EncodeImagesFn(
            self.source, self.plan.class_index(), self.plan.image_options, self.output_dir
        )
        coded = units | "EncodeUnits" >> beam.ParDo(encoder)
        # Few steps: building and planning a Beam pipeline costs about 0.03 s of CPU per step,
        # a fixed cost that a small dataset's conversion feels (benchmarks/convert.py).
        if all(encoder.whole_class_of(unit) is not None for unit in self.plan.units):
            # every class is written by its unit: no batches to group, only class results and
            # rejects come out
            for_spec: tuple[beam.PCollection, ...] = (coded,)
        else:
            results = (
                coded
                | "KeepEncoded" >> beam.FlatMap(of_kind, ENCODED)
                | "GroupByClass" >> beam.GroupByKey()
                | "WriteClassFiles" >> beam.Map(kind_class_result, self.output_dir)
            )
            written_or_rejected = coded | "KeepForSpec" >> beam.Filter(
                lambda element: element[0] in (CLASS_RESULT, REJECTED)
            )
            for_spec = (results, written_or_rejected)
        return (
            for_spec
            | "GatherForSpec" >> GatherUnderOneKey()
            # the plan without its work units: Beam pickles (and bz2-compresses) a step's
            # arguments, and the units list every input file (seconds for 30,000 files)
            | "WriteSpec"
            >> beam.Map(
                write_gathered_spec, dataclasses.replace(self.plan, units=[]), self.output_dir
            )
        )


def kind_class_result(element: tuple[int, Iterable[list[FrameRef]]], output_dir: str):
    """("class", result) of `write_class_file` (the kinds the spec's gather tells apart)."""
    return CLASS_RESULT, write_class_file(element, output_dir)


_UNITS_IN_THIS_PROCESS: dict[str, list[WorkUnit]] = {}


@contextlib.contextmanager
def units_in_this_process(units: list[WorkUnit]) -> Iterator[str]:
    """A token that stands for `units` while the block runs, for `ConvertUnits(units_token=)`
    on a runner whose one worker is this process."""
    token = uuid.uuid4().hex
    _UNITS_IN_THIS_PROCESS[token] = units
    try:
        yield token
    finally:
        del _UNITS_IN_THIS_PROCESS[token]


class ConvertInThisProcessFn(beam.DoFn):
    """For the one element of an Impulse, on a runner whose one worker is the launcher's
    process: every work unit registered under `units_token` encoded (`EncodeImagesFn`), the
    classes split over several units written from their spilled batches (`write_class_file`),
    then the spec. What WriteConvertedDataset's steps do, in one step: Beam's per-step cost of
    building, planning and running a job (its DoFn checks, options views, a bundle processor
    per stage) is a third of a small dataset's conversion, and one process needs no shuffle
    to bring the classes' batches and results together."""

    def __init__(self, source: Any, plan: ConversionPlan, output_dir: str, units_token: str):
        self.encoder = EncodeImagesFn(source, plan.class_index(), plan.image_options, output_dir)
        self.plan = dataclasses.replace(plan, units=[])  # the units come by reference
        self.output_dir = output_dir
        self.units_token = units_token

    def setup(self):
        self.encoder.setup()

    def process(self, _: bytes):
        batches: dict[int, list[list[FrameRef]]] = {}
        results, rejected = [], []
        self.encoder.start_bundle()
        for unit in _UNITS_IN_THIS_PROCESS[self.units_token]:
            for kind, value in self.encoder.process(unit):
                if kind == ENCODED:
                    batches.setdefault(value[0], []).append(value[1])
                elif kind == CLASS_RESULT:
                    results.append(value)
                else:
                    rejected.append(value)
        self.encoder.finish_bundle()  # the spill files complete before they are read
        for class_id, class_batches in sorted(batches.items()):
            results.append(write_class_file((class_id, class_batches), self.output_dir))
        yield write_spec(self.plan, results, rejected, self.output_dir)


@dataclass
class ConvertUnits(beam.PTransform):
    """The plan's work units, spread over workers (`spread`: a reshuffle hands them out; one
    worker in the launcher's process needs none), -> a converted dataset folder.

    `units_token` (`units_in_this_process`, for one worker in the launcher's process): the units
    reach the worker by reference (Beam pickles and bz2-compresses a Create step's values
    several times while it builds and plans the job: half a second of CPU for 30,000 files),
    and one step converts them (`ConvertInThisProcessFn`)."""

    source: Any
    plan: ConversionPlan
    output_dir: str
    spread: bool = True
    units_token: str | None = None

    def expand(self, pipeline):
        if self.units_token is not None:
            return (
                pipeline
                | "Start" >> beam.Impulse()
                | "ConvertInThisProcess"
                >> beam.ParDo(
                    ConvertInThisProcessFn(
                        self.source, self.plan, self.output_dir, self.units_token
                    )
                )
            )
        reshuffle = self.spread and len(self.plan.units) > 1
        units = pipeline | "CreateUnits" >> beam.Create(self.plan.units, reshuffle=reshuffle)
        return units | "WriteDataset" >> WriteConvertedDataset(
            self.source, self.plan, self.output_dir
        )
