"""Meta-Dataset's own spec JSON, read and written: the top-level keys that
`meta_dataset.data.dataset_spec.load_dataset_spec` turns into a `DatasetSpecification`,
`BiLevelDatasetSpecification` or `HierarchicalDatasetSpecification`.

`load_spec` reads the reference's spec files unchanged (`spec_from_reference`; dict keys may be
Python-repr strings such as "TRAIN" or "0"), and our `dataset_spec.json` carries these keys
beside this project's own fields (`reference_fields`), so a folder we convert is read by both
tools. This module builds on `episodes.records.dataset_spec` (our own spec type) and installs
itself there with `use_reference_format`. The reference's conventions (read from its `dataset_spec.py`):
split-keyed dicts use the Split enum names (`TRAIN`, `VALID`, `TEST`); class and superclass
ids are decimal strings; a split's classes are the contiguous id range after the previous
splits' (train < valid < test), and in the bi-level case a superclass's classes are the
contiguous range after the previous superclasses'; the ImageNet DAG is one node list per split
(`wn_id`, `words`, `children_ids`, `parents_ids`) and `images_per_class` gives, per split,
the images spanned by every node of that split's DAG. `path` is replaced by the loader with
the folder it reads from, so we write "." (a spec stays valid when the folder moves).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from episodes.records.dataset_spec import (
    ALL_SPLITS,
    BiLevelHierarchy,
    DagHierarchy,
    DatasetSpec,
    ReferenceFormat,
    SpecError,
    Split,
    use_reference_format,
)

__all__ = [
    "BILEVEL",
    "FLAT",
    "HIERARCHICAL",
    "REFERENCE_CLASSES",
    "REFERENCE_FILE_PATTERNS",
    "REFERENCE_KEYS",
    "reference_class",
    "reference_fields",
    "spec_from_reference",
]

FLAT = "DatasetSpecification"
BILEVEL = "BiLevelDatasetSpecification"
HIERARCHICAL = "HierarchicalDatasetSpecification"
REFERENCE_CLASSES = (FLAT, BILEVEL, HIERARCHICAL)
# Top-level keys of each reference class, in the order its serialiser writes them.
REFERENCE_KEYS = {
    FLAT: (
        "name",
        "classes_per_split",
        "images_per_class",
        "class_names",
        "path",
        "file_pattern",
        "__class__",
    ),
    BILEVEL: (
        "name",
        "superclasses_per_split",
        "classes_per_superclass",
        "images_per_class",
        "superclass_names",
        "class_names",
        "path",
        "file_pattern",
        "__class__",
    ),
    HIERARCHICAL: (
        "name",
        "split_subgraphs",
        "images_per_class",
        "class_names",
        "path",
        "file_pattern",
        "__class__",
    ),
}
REFERENCE_FILE_PATTERNS = ("{}.tfrecords", "{}_{}.tfrecords")


# ----------------------------------------------------------------------------------------------
# Writing


def _split_counts(spec: DatasetSpec) -> dict[str, int] | None:
    """{'TRAIN': n, 'VALID': n, 'TEST': n} when the split classes are the contiguous id ranges
    the reference assumes; None when the spec has no split or another layout."""
    if spec.split_classes is None:
        return None
    counts, start = {}, 0
    for split in ALL_SPLITS:
        ids = sorted(spec.split_classes.get(split, []))
        if ids != list(range(start, start + len(ids))):
            return None
        counts[split.name] = len(ids)
        start += len(ids)
    return counts if start == spec.num_classes else None


def _bilevel_layout(spec: DatasetSpec) -> tuple[dict[str, int], list[int]] | None:
    """(superclasses per split, classes per superclass) when the bi-level hierarchy has the
    reference's layout: superclass blocks contiguous in id order, split by split."""
    hierarchy = spec.hierarchy
    if not isinstance(hierarchy, BiLevelHierarchy) or _split_counts(spec) is None:
        return None
    supers = hierarchy.superclass_of
    num_supers = len(hierarchy.superclass_names)
    if supers != sorted(supers) or sorted(set(supers)) != list(range(num_supers)):
        return None
    per_split, start = {}, 0
    for split in ALL_SPLITS:
        ids = sorted({supers[c] for c in spec.split_classes.get(split, [])})
        if ids != list(range(start, start + len(ids))):
            return None
        per_split[split.name] = len(ids)
        start += len(ids)
    return per_split, [supers.count(s) for s in range(num_supers)]


def reference_class(spec: DatasetSpec) -> str:
    """Which reference specification class describes `spec`.

    The ImageNet DAG is hierarchical; a bi-level hierarchy in the reference's layout
    (Omniglot) is bi-level; everything else, including a two-level dataset whose superclasses
    interleave in id order (CIFAR-100 keeps its fine-label ids), is flat."""
    if isinstance(spec.hierarchy, DagHierarchy) and _split_counts(spec) is not None:
        return HIERARCHICAL
    if _bilevel_layout(spec) is not None:
        return BILEVEL
    return FLAT


def _ids(values) -> dict[str, Any]:
    return {str(i): v for i, v in enumerate(values)}


def _dag_fields(spec: DatasetSpec) -> dict[str, Any]:
    hierarchy = spec.hierarchy
    leaf_images = {name: int(n) for name, n in zip(spec.class_names, spec.images_per_class)}
    subgraphs, images = {}, {}
    for split in ALL_SPLITS:
        nodes = hierarchy.nodes(split)
        subgraphs[split.name] = [
            {
                "wn_id": n.wn_id,
                "words": n.words,
                "children_ids": list(n.children),
                "parents_ids": list(n.parents),
            }
            for n in sorted(nodes.values(), key=lambda n: n.wn_id)
        ]
        spans = hierarchy.spanned_leaves(split)
        images[split.name] = {
            wn_id: sum(leaf_images.get(leaf, 0) for leaf in spans[wn_id]) for wn_id in sorted(nodes)
        }
    return {"split_subgraphs": subgraphs, "images_per_class": images}


def reference_fields(spec: DatasetSpec) -> dict[str, Any]:
    """The reference's top-level keys for `spec`, in the reference serialiser's order.

    A spec without a class split (split left to split files) gets zero classes per split:
    the reference reads it, but samples nothing until it is converted with a split."""
    kind = reference_class(spec)
    fields: dict[str, Any] = {"name": spec.name}
    if kind == HIERARCHICAL:
        fields.update(_dag_fields(spec))
    elif kind == BILEVEL:
        per_split, per_super = _bilevel_layout(spec)
        fields["superclasses_per_split"] = per_split
        fields["classes_per_superclass"] = _ids(per_super)
        fields["images_per_class"] = _ids(int(n) for n in spec.images_per_class)
        fields["superclass_names"] = _ids(spec.hierarchy.superclass_names)
    else:
        fields["classes_per_split"] = _split_counts(spec) or {"TRAIN": 0, "VALID": 0, "TEST": 0}
        fields["images_per_class"] = _ids(int(n) for n in spec.images_per_class)
    fields["class_names"] = _ids(spec.class_names)
    fields["path"] = "."
    fields["file_pattern"] = spec.file_pattern
    fields["__class__"] = kind
    return {key: fields[key] for key in REFERENCE_KEYS[kind]}


# ----------------------------------------------------------------------------------------------
# Reading


def _repr_value(value: Any) -> Any:
    """Reference specs may hold dicts serialised as Python repr strings."""
    if isinstance(value, str) and value[:1] in "{[(":
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def _split_dict(value: Any) -> dict[Split, Any]:
    value = _repr_value(value)
    return {Split.parse(k): _repr_value(v) for k, v in value.items()}


def _int_keyed(value: Any) -> dict[int, Any]:
    value = _repr_value(value)
    return {int(k): v for k, v in value.items()}


def _consecutive_ids(counts: Mapping[Split, Any]) -> tuple[dict[Split, list[int]], int]:
    """Ids numbered in split order (train, valid, test), each split taking the next
    `counts[split]` of them (0 when absent), and how many there are in all: the reference
    specs store per-split counts, not the ids."""
    ids: dict[Split, list[int]] = {}
    start = 0
    for split in ALL_SPLITS:
        count = int(counts.get(split, 0))
        ids[split] = list(range(start, start + count))
        start += count
    return ids, start


def spec_from_reference(raw: dict) -> DatasetSpec:
    """A DatasetSpec from the reference's spec JSON (any of its three classes), unchanged."""
    kind = raw["__class__"]
    name = raw["name"]
    file_pattern = raw.get("file_pattern", "{}.tfrecords")
    if kind == "DatasetSpecification":
        per_split = _split_dict(raw["classes_per_split"])
        names = _int_keyed(raw["class_names"])
        images = _int_keyed(raw["images_per_class"])
        n = len(names)
        split_classes, start = _consecutive_ids(per_split)
        if start != n:
            raise SpecError(f"classes_per_split sums to {start} but there are {n} classes")
        return DatasetSpec(
            name=name,
            class_names=[names[i] for i in range(n)],
            images_per_class=[int(images[i]) for i in range(n)],
            split_classes=split_classes,
            file_pattern=file_pattern,
            provenance={"reference_spec_class": kind},
            source_format="meta-dataset",
        )
    if kind == "BiLevelDatasetSpecification":
        supers_per_split = _split_dict(raw["superclasses_per_split"])
        classes_per_super = _int_keyed(raw["classes_per_superclass"])
        super_names = _int_keyed(raw["superclass_names"])
        names = _int_keyed(raw["class_names"])
        images = _int_keyed(raw["images_per_class"])
        superclass_of: list[int] = []
        for s in range(len(classes_per_super)):
            superclass_of.extend([s] * int(classes_per_super[s]))
        if len(superclass_of) != len(names):
            raise SpecError(
                f"classes_per_superclass sums to {len(superclass_of)} but there are {len(names)} classes"
            )
        superclass_splits, start = _consecutive_ids(supers_per_split)
        if start != len(classes_per_super):
            raise SpecError(
                f"superclasses_per_split sums to {start}, expected {len(classes_per_super)}"
            )
        split_classes = {
            split: [c for c, s in enumerate(superclass_of) if s in set(ids)]
            for split, ids in superclass_splits.items()
        }
        return DatasetSpec(
            name=name,
            class_names=[names[i] for i in range(len(names))],
            images_per_class=[int(images[i]) for i in range(len(names))],
            split_classes=split_classes,
            hierarchy=BiLevelHierarchy(
                superclass_names=[super_names[s] for s in range(len(super_names))],
                superclass_of=superclass_of,
                superclass_splits=superclass_splits,
            ),
            file_pattern=file_pattern,
            provenance={"reference_spec_class": kind},
            source_format="meta-dataset",
        )
    if kind == "HierarchicalDatasetSpecification":
        subgraphs = _split_dict(raw["split_subgraphs"])
        hierarchy = DagHierarchy.from_node_lists(subgraphs)
        names = _int_keyed(raw["class_names"])
        per_split_images = _split_dict(raw["images_per_class"])
        wnid_to_id = {wnid: i for i, wnid in names.items()}
        images = [0] * len(names)
        split_classes = {}
        for split in ALL_SPLITS:
            leaves = hierarchy.leaves(split)
            ids = []
            for leaf in leaves:
                if leaf not in wnid_to_id:
                    raise SpecError(f"{split.value} leaf {leaf} is not among class_names")
                cid = wnid_to_id[leaf]
                ids.append(cid)
                counts = per_split_images.get(split, {})
                images[cid] = int(counts.get(leaf, counts.get(str(cid), 0)))
            split_classes[split] = sorted(ids)
        return DatasetSpec(
            name=name,
            class_names=[names[i] for i in range(len(names))],
            images_per_class=images,
            split_classes=split_classes,
            hierarchy=hierarchy,
            file_pattern=file_pattern,
            provenance={"reference_spec_class": kind},
            source_format="meta-dataset",
        )
    raise SpecError(f"unknown reference spec class {kind!r}")


use_reference_format(ReferenceFormat(read=spec_from_reference, fields=reference_fields))
