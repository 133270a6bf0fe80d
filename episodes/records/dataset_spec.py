"""Dataset specifications: what classes a converted dataset has, their splits and hierarchy.

Reads our `dataset_spec.json` and, unchanged, the reference Meta-Dataset spec files
(`DatasetSpecification`, `BiLevelDatasetSpecification`, `HierarchicalDatasetSpecification`,
whose dict keys are Python-repr strings such as "TRAIN" or "0"). What we write holds both:
the reference's top-level keys (episodes.records.meta_dataset_spec), so its `load_dataset_spec`
reads our folders, and this project's own fields beside them. Specs of the previous format
(`fewshot-tasksets.dataset_spec/1`, our fields only) still load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from episodes.util.cli_errors import UserError
from episodes.util.json_files import read_json_object

__all__ = [
    "ALL_SPLITS",
    "BiLevelHierarchy",
    "DagHierarchy",
    "DagNode",
    "DatasetSpec",
    "READABLE_FORMATS",
    "ReferenceFormat",
    "SPEC_FILENAME",
    "SPEC_FORMAT",
    "SpecError",
    "Split",
    "load_spec",
    "use_reference_format",
]

SPEC_FILENAME = "dataset_spec.json"
SPEC_FORMAT = "fewshot-tasksets.dataset_spec/2"
# Formats whose own fields `_from_ours` reads: /1 had no reference keys beside them.
READABLE_FORMATS = ("fewshot-tasksets.dataset_spec/1", SPEC_FORMAT)


class SpecError(UserError, ValueError):
    """A dataset spec that cannot be read or does not describe what was asked of it."""


class Split(str, Enum):
    """The three class splits of a few-shot benchmark."""

    TRAIN = "train"
    VALID = "valid"
    TEST = "test"

    @classmethod
    def parse(cls, value: str | Split) -> Split:
        """Accept 'train', 'TRAIN', 'Split.TRAIN', 'validation', 'val', ... ."""
        if isinstance(value, Split):
            return value
        text = str(value).strip()
        if text.startswith("<") and ":" in text:  # "<Split.TRAIN: 0>"
            text = text[1:].split(":", 1)[0]
        text = text.split(".")[-1].lower()
        aliases = {
            "train": cls.TRAIN,
            "valid": cls.VALID,
            "validation": cls.VALID,
            "val": cls.VALID,
            "test": cls.TEST,
        }
        if text not in aliases:
            raise SpecError(f"unknown split {value!r}: expected one of train, valid, test")
        return aliases[text]


ALL_SPLITS = (Split.TRAIN, Split.VALID, Split.TEST)


@dataclass(frozen=True)
class DagNode:
    """A WordNet synset in one split's sub-DAG."""

    wn_id: str
    words: str
    children: tuple[str, ...]
    parents: tuple[str, ...]

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass
class DagHierarchy:
    """Per-split sub-DAGs of WordNet over the classes (Meta-Dataset's ImageNet hierarchy)."""

    split_nodes: dict[Split, dict[str, DagNode]]

    def nodes(self, split: Split) -> dict[str, DagNode]:
        return self.split_nodes.get(Split.parse(split), {})

    def leaves(self, split: Split) -> list[str]:
        """Leaf synsets of a split's DAG, sorted by WordNet id."""
        return sorted(n.wn_id for n in self.nodes(split).values() if n.is_leaf)

    def roots(self, split: Split) -> list[str]:
        return sorted(n.wn_id for n in self.nodes(split).values() if not n.parents)

    def spanned_leaves(self, split: Split) -> dict[str, frozenset[str]]:
        """For every node of a split's DAG, the set of leaves reachable from it."""
        nodes = self.nodes(split)
        memo: dict[str, frozenset[str]] = {}
        order: list[str] = []
        seen: set[str] = set()
        # Iterative post-order: children before parents.
        for root in sorted(nodes):
            if root in seen:
                continue
            stack = [(root, False)]
            while stack:
                wn_id, expanded = stack.pop()
                if expanded:
                    order.append(wn_id)
                    continue
                if wn_id in seen:
                    continue
                seen.add(wn_id)
                stack.append((wn_id, True))
                for child in nodes[wn_id].children:
                    if child not in seen:
                        stack.append((child, False))
        for wn_id in order:
            node = nodes[wn_id]
            if node.is_leaf:
                memo[wn_id] = frozenset((wn_id,))
            else:
                span: set[str] = set()
                for child in node.children:
                    span |= memo[child]
                memo[wn_id] = frozenset(span)
        return memo

    def to_json(self) -> dict:
        return {
            "type": "dag",
            "splits": {
                split.value: [
                    {
                        "wn_id": n.wn_id,
                        "words": n.words,
                        "children": list(n.children),
                        "parents": list(n.parents),
                    }
                    for n in sorted(nodes.values(), key=lambda n: n.wn_id)
                ]
                for split, nodes in self.split_nodes.items()
            },
        }

    @classmethod
    def from_node_lists(
        cls, split_lists: Mapping[Split, Iterable[Mapping[str, Any]]]
    ) -> DagHierarchy:
        split_nodes: dict[Split, dict[str, DagNode]] = {}
        for split, node_list in split_lists.items():
            nodes: dict[str, DagNode] = {}
            for raw in node_list:
                node = DagNode(
                    wn_id=raw["wn_id"],
                    words=raw.get("words", ""),
                    children=tuple(raw.get("children", raw.get("children_ids", ()))),
                    parents=tuple(raw.get("parents", raw.get("parents_ids", ()))),
                )
                nodes[node.wn_id] = node
            for node in nodes.values():
                for other in node.children + node.parents:
                    if other not in nodes:
                        raise SpecError(
                            f"{split.value} DAG: node {node.wn_id} links to unknown {other}"
                        )
            split_nodes[Split.parse(split)] = nodes
        return cls(split_nodes)


@dataclass
class BiLevelHierarchy:
    """Two-level hierarchy: every class belongs to one superclass (Omniglot alphabets,
    CIFAR-100 coarse labels)."""

    superclass_names: list[str]
    superclass_of: list[int]  # per class id
    superclass_splits: dict[Split, list[int]] | None = None  # superclass ids per split

    def classes_of(self, superclass: int) -> list[int]:
        return [c for c, s in enumerate(self.superclass_of) if s == superclass]

    def superclasses(self, split: Split | None = None) -> list[int]:
        if split is None or self.superclass_splits is None:
            return list(range(len(self.superclass_names)))
        return list(self.superclass_splits.get(Split.parse(split), []))

    def to_json(self) -> dict:
        return {
            "type": "bilevel",
            "superclasses": [
                {"id": s, "name": name, "classes": self.classes_of(s)}
                for s, name in enumerate(self.superclass_names)
            ],
            "superclass_splits": (
                None
                if self.superclass_splits is None
                else {k.value: list(v) for k, v in self.superclass_splits.items()}
            ),
        }


Hierarchy = DagHierarchy | BiLevelHierarchy


@dataclass
class DatasetSpec:
    """Classes of a converted dataset: names, image counts, splits, hierarchy, provenance.

    Class ids are positions in `class_names`; records of class c live in
    `root / file_pattern.format(c)`.
    """

    name: str
    class_names: list[str]
    images_per_class: list[int]
    split_classes: dict[Split, list[int]] | None = None
    hierarchy: Hierarchy | None = None
    image_format: str | None = None
    file_pattern: str = "{}.tfrecords"
    provenance: dict[str, Any] = field(default_factory=dict)
    root: Path | None = None
    source_format: str = "fewshot-tasksets"

    def __post_init__(self):
        if len(self.class_names) != len(self.images_per_class):
            raise SpecError(
                f"spec {self.name!r}: {len(self.class_names)} class names but "
                f"{len(self.images_per_class)} image counts"
            )
        if len(set(self.class_names)) != len(self.class_names):
            dupes = sorted({n for n in self.class_names if self.class_names.count(n) > 1})
            raise SpecError(f"spec {self.name!r}: duplicate class names {dupes[:5]}")
        if self.split_classes is not None:
            seen: dict[int, Split] = {}
            for split, ids in self.split_classes.items():
                for c in ids:
                    if not 0 <= c < self.num_classes:
                        raise SpecError(
                            f"spec {self.name!r}: {split.value} class id {c} out of range"
                        )
                    if c in seen:
                        raise SpecError(
                            f"spec {self.name!r}: class {c} in both {seen[c].value} and {split.value}"
                        )
                    seen[c] = split

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def total_images(self) -> int:
        return int(sum(self.images_per_class))

    @property
    def has_splits(self) -> bool:
        return self.split_classes is not None

    def classes(self, split: Split | str) -> list[int]:
        """Class ids of a split, sorted."""
        split = Split.parse(split)
        if self.split_classes is None:
            raise SpecError(
                f"dataset {self.name!r} defines no class splits: pass a split file (--split-file)"
            )
        return sorted(self.split_classes.get(split, []))

    def split_of(self, class_id: int) -> Split | None:
        if self.split_classes is None:
            return None
        for split, ids in self.split_classes.items():
            if class_id in ids:
                return split
        return None

    def class_id(self, name: str) -> int:
        try:
            return self._name_to_id()[name]
        except KeyError:
            raise SpecError(f"dataset {self.name!r} has no class named {name!r}") from None

    def _name_to_id(self) -> dict[str, int]:
        cache = self.__dict__.get("_name_cache")
        if cache is None or len(cache) != len(self.class_names):
            cache = {n: i for i, n in enumerate(self.class_names)}
            self.__dict__["_name_cache"] = cache
        return cache

    def records_path(self, class_id: int) -> Path:
        if self.root is None:
            raise SpecError(f"spec {self.name!r} was not loaded from a dataset folder")
        return self.root / self.file_pattern.format(class_id)

    def with_splits(
        self, train: Sequence[str], valid: Sequence[str], test: Sequence[str], source: str = ""
    ) -> DatasetSpec:
        """A copy whose splits are given by class names (a split file overriding the spec's).

        The hierarchy is kept wherever it still applies (Meta-Dataset's rule: a superclass or
        DAG node belongs to a split when all its classes lie in that split): a split keeps
        superclass (alphabet) episodes when every class of it sits in a superclass wholly
        inside it, DAG episodes when every leaf of it lies under a kept internal node. Splits
        where it no longer applies sample classes flat; `hierarchy_notes` says which, in one line
        (also recorded in the provenance)."""
        split_classes = {}
        for split, names in ((Split.TRAIN, train), (Split.VALID, valid), (Split.TEST, test)):
            unknown = [n for n in names if n not in self._name_to_id()]
            if unknown:
                raise SpecError(
                    f"split file {source or ''} names {len(unknown)} classes not in dataset "
                    f"{self.name!r}, e.g. {unknown[:3]}"
                )
            split_classes[split] = sorted(self._name_to_id()[n] for n in names)
        hierarchy, note = _hierarchy_under_splits(self, split_classes)
        provenance = dict(self.provenance)
        if source:
            provenance["split_file"] = source
        provenance.pop("hierarchy_note", None)
        if note:
            provenance["hierarchy_note"] = f"split file {source or '(given)'}: {note}"
        return replace(
            self, split_classes=split_classes, hierarchy=hierarchy, provenance=provenance
        )

    @property
    def hierarchy_note(self) -> str | None:
        """One line saying where a split file left the hierarchy out (None: kept, or none)."""
        return self.provenance.get("hierarchy_note")

    def to_json(self) -> dict:
        """The reference Meta-Dataset's keys (read by its `load_dataset_spec`), then ours."""
        return {
            **_reference_format().fields(self),
            "format": SPEC_FORMAT,
            "name": self.name,
            "image_format": self.image_format,
            "file_pattern": self.file_pattern,
            "num_classes": self.num_classes,
            "total_images": self.total_images,
            "splits": (
                None
                if self.split_classes is None
                else {s.value: sorted(self.split_classes.get(s, [])) for s in ALL_SPLITS}
            ),
            "classes": [
                {"id": i, "name": n, "images": int(k)}
                for i, (n, k) in enumerate(zip(self.class_names, self.images_per_class))
            ],
            "hierarchy": None if self.hierarchy is None else self.hierarchy.to_json(),
            "provenance": self.provenance,
        }

    def save(self, path: str | os.PathLike) -> None:
        path = Path(path)
        if path.is_dir():
            path = path / SPEC_FILENAME
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n")


def _hierarchy_under_splits(
    spec: DatasetSpec, split_classes: dict[Split, list[int]]
) -> tuple[Hierarchy | None, str | None]:
    """The spec's hierarchy restricted to new class splits, and a note on splits it left."""
    hierarchy = spec.hierarchy
    if isinstance(hierarchy, BiLevelHierarchy):
        return _bilevel_under_splits(spec, hierarchy, split_classes)
    if isinstance(hierarchy, DagHierarchy):
        return _dag_under_splits(spec, hierarchy, split_classes)
    return hierarchy, None


def _bilevel_under_splits(
    spec: DatasetSpec, hierarchy: BiLevelHierarchy, split_classes: dict[Split, list[int]]
) -> tuple[BiLevelHierarchy, str | None]:
    splits_of: dict[int, set[Split]] = {}  # superclass -> splits its (listed) classes lie in
    for split, ids in split_classes.items():
        for c in ids:
            splits_of.setdefault(hierarchy.superclass_of[c], set()).add(split)
    kept: dict[Split, list[int]] = {}
    lost: list[str] = []
    for split in ALL_SPLITS:
        supers = sorted({hierarchy.superclass_of[c] for c in split_classes.get(split, [])})
        mixed = [s for s in supers if len(splits_of[s]) > 1]
        if not supers:
            continue
        if mixed:
            names = ", ".join(repr(hierarchy.superclass_names[s]) for s in mixed[:3])
            more = f" and {len(mixed) - 3} more" if len(mixed) > 3 else ""
            lost.append(f"{split.value} (superclasses {names}{more} span several splits)")
        else:
            kept[split] = supers
    note = None
    if lost:
        note = (
            f"{'; '.join(lost)}: those splits sample classes flat, without the superclass "
            f"hierarchy of {spec.name!r}"
        )
    return replace(hierarchy, superclass_splits=kept), note


def _dag_under_splits(
    spec: DatasetSpec, hierarchy: DagHierarchy, split_classes: dict[Split, list[int]]
) -> tuple[DagHierarchy | None, str | None]:
    # The whole graph: every split's sub-DAG of the spec, merged (leaves are class names).
    children: dict[str, set[str]] = {}
    words: dict[str, str] = {}
    for nodes in hierarchy.split_nodes.values():
        for node in nodes.values():
            children.setdefault(node.wn_id, set()).update(node.children)
            words.setdefault(node.wn_id, node.words)
    spans: dict[str, frozenset[str]] = {}

    def span(wn_id: str) -> frozenset[str]:
        stack = [wn_id]
        while stack:  # iterative post-order: the ImageNet DAG is deep
            top = stack[-1]
            todo = [c for c in children[top] if c not in spans]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            spans[top] = (
                frozenset(u for c in children[top] for u in spans[c])
                if children[top]
                else frozenset((top,))
            )
        return spans[wn_id]

    kept: dict[Split, dict[str, DagNode]] = {}
    lost: list[str] = []
    for split in ALL_SPLITS:
        leaves = {spec.class_names[c] for c in split_classes.get(split, [])}
        if not leaves:
            continue
        outside = leaves - set(children)
        internal = {n for n in children if children[n] and not outside and span(n) <= leaves}
        covered = {u for n in internal for u in spans[n]}
        if outside or covered != leaves:
            missing = sorted(outside or leaves - covered)
            lost.append(
                f"{split.value} ({len(missing)} of its classes, e.g. {missing[0]!r}, lie under "
                "no DAG node wholly in it)"
            )
            continue
        members = internal | leaves
        parents: dict[str, list[str]] = {n: [] for n in members}
        for n in sorted(internal):
            for c in children[n]:
                parents[c].append(n)
        kept[split] = {
            n: DagNode(
                wn_id=n,
                words=words.get(n, ""),
                children=tuple(sorted(children[n] & members)),
                parents=tuple(sorted(parents[n])),
            )
            for n in sorted(members)
        }
    note = None
    if lost:
        note = (
            f"{'; '.join(lost)}: those splits sample classes flat, without the ImageNet DAG of "
            f"{spec.name!r}"
        )
    return (DagHierarchy(kept) if kept else None), note


# ----------------------------------------------------------------------------------------------
# Loading


def load_spec(path: str | os.PathLike) -> DatasetSpec:
    """Load a spec from a dataset folder or a JSON file, ours or the reference Meta-Dataset's."""
    path = Path(path)
    spec_path = path / SPEC_FILENAME if path.is_dir() else path
    raw = read_json_object(
        spec_path,
        SpecError,
        missing=f"{spec_path}: no dataset spec found (expected {SPEC_FILENAME})",
    )
    try:
        if raw.get("format") in READABLE_FORMATS:
            spec = _from_ours(raw)
        elif "__class__" in raw:
            spec = _reference_format().read(raw)
        else:
            raise SpecError(
                f"{spec_path}: neither a {SPEC_FORMAT} spec nor a reference Meta-Dataset spec "
                f"(no 'format' or '__class__' key)"
            )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SpecError):
            raise SpecError(f"{spec_path}: {exc}") from exc
        raise SpecError(f"{spec_path}: malformed spec ({type(exc).__name__}: {exc})") from exc
    spec.root = spec_path.parent
    return spec


def _from_ours(raw: dict) -> DatasetSpec:
    classes = sorted(raw["classes"], key=lambda c: c["id"])
    if [c["id"] for c in classes] != list(range(len(classes))):
        raise SpecError("class ids are not 0..N-1")
    splits = raw.get("splits")
    split_classes = None if splits is None else {Split.parse(k): list(v) for k, v in splits.items()}
    hierarchy: Hierarchy | None = None
    h = raw.get("hierarchy")
    if h is not None:
        if h["type"] == "dag":
            hierarchy = DagHierarchy.from_node_lists(
                {Split.parse(k): v for k, v in h["splits"].items()}
            )
        elif h["type"] == "bilevel":
            supers = sorted(h["superclasses"], key=lambda s: s["id"])
            superclass_of = [-1] * len(classes)
            for s in supers:
                for c in s["classes"]:
                    superclass_of[c] = s["id"]
            if -1 in superclass_of:
                raise SpecError(f"class {superclass_of.index(-1)} belongs to no superclass")
            ss = h.get("superclass_splits")
            hierarchy = BiLevelHierarchy(
                superclass_names=[s["name"] for s in supers],
                superclass_of=superclass_of,
                superclass_splits=None
                if ss is None
                else {Split.parse(k): list(v) for k, v in ss.items()},
            )
        else:
            raise SpecError(f"unknown hierarchy type {h['type']!r}")
    return DatasetSpec(
        name=raw["name"],
        class_names=[c["name"] for c in classes],
        images_per_class=[int(c["images"]) for c in classes],
        split_classes=split_classes,
        hierarchy=hierarchy,
        image_format=raw.get("image_format"),
        file_pattern=raw.get("file_pattern", "{}.tfrecords"),
        provenance=raw.get("provenance", {}),
    )


# ----------------------------------------------------------------------------------------------
# Meta-Dataset's own spec JSON


@dataclass(frozen=True)
class ReferenceFormat:
    """How Meta-Dataset's spec JSON is read (`read`: raw dict -> DatasetSpec) and written
    (`fields`: DatasetSpec -> the reference's top-level keys)."""

    read: Callable[[dict], DatasetSpec]
    fields: Callable[[DatasetSpec], dict[str, Any]]


_REFERENCE_FORMAT: list[ReferenceFormat] = []


def use_reference_format(reference_format: ReferenceFormat) -> None:
    """Installed by `episodes.records.meta_dataset_spec` (which builds on this module's types,
    so this module cannot import it); `episodes/records/__init__.py` imports it first."""
    _REFERENCE_FORMAT[:] = [reference_format]


def _reference_format() -> ReferenceFormat:
    if not _REFERENCE_FORMAT:
        raise SpecError("the Meta-Dataset spec format is not installed (import episodes.records)")
    return _REFERENCE_FORMAT[0]
