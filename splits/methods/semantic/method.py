"""`--method semantic`: class splits from a hierarchy (`algorithm`): superclasses or a DAG.

The hierarchy is the `--dataset` spec's (bi-level superclasses or WordNet DAG), or
`--hierarchy FILE`, a plain JSON hierarchy ({class: superclass}; {"parents": {node: [parents]},
"leaves": [...]} or a parent map) or `builtin:cifar100` (CIFAR-100's 20 superclasses).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from episodes.records.dataset_spec import DatasetSpec, SpecError, load_spec
from episodes.records.index_conventions import CIFAR100_SUPERCLASS_OF
from episodes.records.split_file import SplitFile
from episodes.util.cli_style import OLD_SPELLINGS_UNTIL
from episodes.util.config_flags import config_field
from episodes.util.json_files import read_json
from splits.methods import register_method
from splits.methods.semantic.algorithm import (
    FC100_SOURCE,
    FC100_SUPERCLASSES,
    ILSVRC_ROOTS,
    HierarchyError,
    dag_split,
    spec_parents,
    spec_superclasses,
    superclass_split,
)
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod

__all__ = [
    "BUILTIN_CIFAR100",
    "KINDS",
    "SemanticMethod",
    "SemanticParameters",
    "load_json",
    "read_hierarchy",
]

KINDS = ("superclass", "dag")
BUILTIN_CIFAR100 = "builtin:cifar100"


@dataclass(frozen=True)
class SemanticParameters:
    """Which hierarchy split: superclass (one of preset / assignment / counts) or dag (roots)."""

    kind: str = config_field(
        choices=KINDS,
        help="superclass: classes follow their superclass; dag: the leaves under --valid-roots "
        "/ --test-roots form valid / test, the rest train",
    )
    hierarchy: str | None = config_field(
        None,
        metavar="FILE",
        help='instead of --dataset: a JSON hierarchy ({"class": "superclass", ...}; '
        '{"parents": {node: [parents]}, "leaves": [...]} or a parent map) or builtin:cifar100',
    )
    preset: str | None = config_field(
        None, choices=("fc100",), help="superclass: Oreshkin et al.'s CIFAR-100 12/4/4 (FC100)"
    )
    assignment: str | None = config_field(
        None, metavar="FILE", help='superclass: JSON {"train": [superclass, ...], ...}'
    )
    counts: tuple[int, int, int] | None = config_field(
        None,
        metavar=("TRAIN", "VALID", "TEST"),
        help="superclass: superclasses per split, drawn by --seed (or --ordered)",
    )
    ordered: bool = config_field(
        False, help="superclass with --counts: contiguous blocks in the superclass order"
    )
    valid_roots: tuple[str, ...] = config_field(
        tuple(ILSVRC_ROOTS["valid"]), metavar="NODE", help="dag: nodes whose leaves form valid"
    )
    test_roots: tuple[str, ...] = config_field(
        tuple(ILSVRC_ROOTS["test"]), metavar="NODE", help="dag: nodes whose leaves form test"
    )

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise HierarchyError(f"kind {self.kind!r} is not one of {KINDS}")
        given = [
            f"--{name}"
            for name in ("preset", "assignment", "counts")
            if getattr(self, name) is not None
        ]
        if self.kind == "dag":
            dag_only = given + (["--ordered"] if self.ordered else [])
            if dag_only:
                raise HierarchyError(f"{', '.join(dag_only)} apply to --kind superclass")
            return
        if len(given) != 1:
            raise HierarchyError(
                "--kind superclass takes one of --preset, --assignment or --counts"
                + (f" (given: {', '.join(given)})" if given else "")
            )
        if self.ordered and self.counts is None:
            raise HierarchyError("--ordered applies to --counts")
        roots = (tuple(ILSVRC_ROOTS["valid"]), tuple(ILSVRC_ROOTS["test"]))
        if (self.valid_roots, self.test_roots) != roots:
            raise HierarchyError("--valid-roots / --test-roots apply to --kind dag")


def read_hierarchy(path: str) -> DatasetSpec | object:
    """A dataset spec (folder or spec JSON, through load_spec) or a plain hierarchy JSON."""
    if path == BUILTIN_CIFAR100:
        return dict(CIFAR100_SUPERCLASS_OF)
    try:
        return load_spec(path)
    except SpecError as err:
        if Path(path).is_dir():
            raise HierarchyError(str(err)) from None
        data = load_json(path)
        if isinstance(data, dict) and ("__class__" in data or "format" in data):
            raise HierarchyError(str(err)) from None  # a spec, but a broken one
        return data


def load_json(path: str) -> object:
    """A JSON file of the semantic method (hierarchy, assignment); HierarchyError names it."""
    return read_json(path, HierarchyError, f"hierarchy file {path} does not exist")


@register_method
class SemanticMethod(SplitMethod):
    """Superclass splits (Omniglot alphabets, FC100) and DAG splits (ILSVRC carnivore/device)."""

    name = "semantic"
    summary = "split by a class hierarchy: superclasses (FC100, alphabets) or a DAG (ILSVRC)"
    Parameters = SemanticParameters
    reads = ("dataset",)

    def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
        p = self.parameters
        if inputs.dataset is not None and p.hierarchy is not None:
            raise HierarchyError("give --dataset DIR or --hierarchy FILE, not both")
        if inputs.dataset is None and p.hierarchy is None:
            raise HierarchyError("no hierarchy: give --dataset DIR or --hierarchy FILE")
        data = inputs.spec if inputs.spec is not None else read_hierarchy(p.hierarchy)
        spec = data if isinstance(data, DatasetSpec) else None
        if spec is not None and p.hierarchy is not None:
            print(
                f"note: --hierarchy {p.hierarchy} (a converted dataset) is now --dataset; the "
                f"old use goes in {OLD_SPELLINGS_UNTIL}",
                file=sys.stderr,
            )
        dataset = inputs.name(spec.name if spec is not None else "dataset")
        if p.kind == "superclass":
            split = self._superclass(data, spec, dataset, inputs.seed)
        else:
            split = self._dag(data, spec, dataset)
        return [PlannedSplit(dataset, self.file_name(inputs.seed), lambda: split)]

    def file_name(self, seed: int | None) -> str:
        """semantic_<kind>[_<preset>][_seed<seed>].json"""
        p = self.parameters
        parts = ["semantic", p.kind, p.preset or ""]
        if p.counts is not None and not p.ordered:
            parts.append(f"seed{seed}")
        return "_".join(part for part in parts if part) + ".json"

    def _superclass(
        self, data: object, spec: DatasetSpec | None, dataset: str, seed: int | None
    ) -> SplitFile:
        p = self.parameters
        if spec is not None:
            mapping = spec_superclasses(spec)
        else:
            mapping = data.get("class_to_superclass", data) if isinstance(data, dict) else None
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise HierarchyError(f"{p.hierarchy}: expected a class -> superclass object")
        if p.preset == "fc100":
            split = superclass_split(mapping, assignment=FC100_SUPERCLASSES, dataset=dataset)
            split.source = FC100_SOURCE
            return split
        if p.assignment:
            given = load_json(p.assignment)
            if not isinstance(given, dict):
                raise HierarchyError(f"{p.assignment}: expected {{split: [superclass]}}")
            return superclass_split(mapping, assignment=given, dataset=dataset)
        order = list(dict.fromkeys(mapping.values())) if p.ordered else None
        if order is None and seed is None:
            raise HierarchyError("--counts needs --seed or --ordered")
        return superclass_split(
            mapping, counts=p.counts, seed=seed, superclass_order=order, dataset=dataset
        )

    def _dag(self, data: object, spec: DatasetSpec | None, dataset: str) -> SplitFile:
        p = self.parameters
        if spec is not None:
            parents, leaves = spec_parents(spec)
        else:
            if not isinstance(data, dict):
                raise HierarchyError(f"{p.hierarchy}: expected a JSON object")
            parents = data.get("parents", data)
            leaves = data.get("leaves") if "parents" in data else None
        return dag_split(parents, p.valid_roots, p.test_roots, leaves, dataset)
