"""The import direction inside `episodes/` and `splits/` and between the repo's packages
(issues 11 and 35).

Every module's imports, top-level and inside functions (`if TYPE_CHECKING:` blocks aside, they
run only for type checkers), are read with `ast`. Checked: the packages import only down
PACKAGE_LAYERS (no back edge, no two packages importing each other); `episodes` imports only
downward through the layers of LAYERS, and its root holds only commands and old names;
`splits` imports only downward through SPLITS_LAYERS and no split method imports another; the
glyph dataset generator imports only itself and `episodes.util`; no module graph cycle among
the repo's packages. Importing `a.b.c` runs `a/__init__` and `a/b/__init__` too, but those
implicit edges are not counted: a package's `__init__` importing its own modules is not a cycle.

Issue 31 adds `learners` (its folders import only the folders before them, LEARNERS_LAYERS; it
imports nothing but `episodes`) and `beam_pipelines` (BEAM_PIPELINES_LAYERS), at the end.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.fixtures.paths import REPO
from tests.fixtures.project_modules import PACKAGES, module_names

# Layers of `episodes`, lowest first: a module may import its own layer and those below.
# An entry ending in ".*" is a whole subpackage; every other module is named one by one, so a
# new module fails `test_every_episodes_module_has_a_layer` until it is given its place here.
LAYERS: dict[str, tuple[str, ...]] = {
    "util": ("episodes", "episodes.util.*"),
    "records": ("episodes.records.*",),
    "storage": ("episodes.storage.*",),
    "images / hierarchy": ("episodes.images.*", "episodes.hierarchy.*"),
    "sampling": ("episodes.sampling.*",),
    "reading": ("episodes.reading.*",),
    "adapters": ("episodes.adapters.*",),
    "commands": ("episodes.fetch", "episodes.fixml", "episodes.glyph_dataset", "episodes.read"),
}
NEVER_IMPORTED_BY_EPISODES = ("learners", "beam_pipelines", "splits")
GLYPH_DATASET = "beam_pipelines.glyph_dataset"
GLYPH_DATASET_MAY_IMPORT = ("beam_pipelines.glyph_dataset", "episodes.util")

# The packages, lowest first (DESIGN.md): a package imports only packages of a lower layer, so
# what two packages share goes down to the lower one (`beam_pipelines` and `learners`, one
# layer, import neither each other).
PACKAGE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("episodes",),
    ("beam_pipelines", "learners"),
    ("splits",),
    ("benchmarks",),
)

# Layers of `splits`, lowest first (as LAYERS).
SPLITS_LAYERS: dict[str, tuple[str, ...]] = {
    "files": (
        "splits",
        "splits.class_names",
        "splits.embeddings",
        "splits.embeddings.embeddings_file",
        "splits.parameter_flags",
        "splits.split_method",
    ),
    "methods": ("splits.methods.*",),
    "embedding job": (
        "splits.embeddings.feature_extractor",
        "splits.embeddings.pipeline",
        "splits.embeddings.pretrain",
    ),
    "commands": (
        "splits.__main__",
        "splits.analyze",
        "splits.atg",
        "splits.embed",
        "splits.make",
        "splits.published",
        "splits.published_meta_dataset",
        "splits.published_tables",
        "splits.random",
        "splits.semantic",
    ),
}


# ----------------------------------------------------------------------------------------------
# The module graph


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, at any depth, except in `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _import_nodes_of(other)
            continue
        yield from _import_nodes_of(child)


def _import_nodes_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _import_nodes(node)


def _imported(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: Iterable[str]
) -> set[str]:
    """Modules an import statement loads: `import a.b` -> a.b; `from a.b import c` -> a.b.c
    when c is a module, else a.b; relative imports resolved against `module`."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        if not is_package:
            anchor = anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    found = set()
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        found.add(submodule if submodule in modules else base)
    return found


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (see the module docstring)."""
    modules = module_names(root, packages)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = set()
        for node in _import_nodes(tree):
            for target in _imported(name, path.name == "__init__.py", node, modules):
                if target in modules and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles met by a depth-first search (each back edge closes one), as module lists that
    start at their smallest name and end where they began; deterministic (sorted order)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []
    cycles: dict[tuple[str, ...], list[str]] = {}

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                loop = stack[stack.index(target) :]
                start = loop.index(min(loop))
                loop = loop[start:] + loop[:start]
                cycles.setdefault(tuple(loop), [*loop, loop[0]])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return list(cycles.values())


def layer_of(module: str, layers: dict[str, tuple[str, ...]]) -> int | None:
    """Position of `module`'s layer in `layers` (None when no entry names it). The entry that
    names it most closely decides: its exact name, else the longest "pkg.*" around it (so a
    layer may take "pkg.*" for every module the layers do not name otherwise)."""
    found, closest = None, -1
    for position, entries in enumerate(layers.values()):
        for entry in entries:
            if module == entry:
                return position
            # "episodes.records.*" also covers the package "episodes.records" itself.
            inside = entry.endswith(".*") and (module + ".").startswith(entry[:-1])
            if inside and len(entry) > closest:
                found, closest = position, len(entry)
    return found


def upward_imports(
    graph: dict[str, set[str]], package: str, layers: dict[str, tuple[str, ...]]
) -> list[str]:
    """'a (layer) imports b (higher layer)' for every import against the layer order."""
    names = list(layers)
    found = []
    for module in sorted(graph):
        if module != package and not module.startswith(package + "."):
            continue
        own = layer_of(module, layers)
        for target in sorted(graph[module]):
            theirs = layer_of(target, layers)
            if own is not None and theirs is not None and theirs > own:
                found.append(f"{module} ({names[own]}) imports {target} ({names[theirs]})")
    return found


def imports_outside(graph: dict[str, set[str]], package: str, allowed: Iterable[str]) -> list[str]:
    """'a imports b' for every import of `package`'s modules outside `allowed` packages."""
    allowed = tuple(allowed)

    def inside(name: str, prefixes: Iterable[str]) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    return [
        f"{module} imports {target}"
        for module in sorted(graph)
        if inside(module, (package,))
        for target in sorted(graph[module])
        if not inside(target, allowed)
    ]


def _cycle_text(cycle: list[str]) -> str:
    return " -> ".join(cycle)


# ----------------------------------------------------------------------------------------------
# The repo


GRAPH = import_graph(REPO, PACKAGES)


def test_every_episodes_module_has_a_layer():
    missing = [
        m for m in sorted(GRAPH) if m.split(".")[0] == "episodes" and layer_of(m, LAYERS) is None
    ]
    assert not missing, (
        "modules of episodes/ without a layer; add each to LAYERS in tests/project/test_import_layers.py: "
        + ", ".join(missing)
    )
    stale = [
        entry
        for entries in LAYERS.values()
        for entry in entries
        if not any(m == entry or (entry.endswith(".*") and m.startswith(entry[:-1])) for m in GRAPH)
    ]
    assert not stale, f"LAYERS names modules that no longer exist: {stale}"


def test_episodes_imports_only_downward():
    assert upward_imports(GRAPH, "episodes", LAYERS) == []


def test_episodes_never_imports_learners_beam_pipelines_or_splits():
    outside = [
        line
        for line in imports_outside(GRAPH, "episodes", ("episodes",))
        if line.split(" imports ")[1].split(".")[0] in NEVER_IMPORTED_BY_EPISODES
    ]
    assert outside == []


def package_back_edges(
    graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]
) -> list[str]:
    """'a imports b' for every import of a package of the same or a higher layer."""
    level = {package: k for k, names in enumerate(layers) for package in names}
    found = []
    for module in sorted(graph):
        own = module.split(".")[0]
        for target in sorted(graph[module]):
            theirs = target.split(".")[0]
            if theirs != own and level.get(theirs, -1) >= level.get(own, len(layers)):
                found.append(f"{module} ({own}) imports {target} ({theirs})")
    return found


FULL_GRAPH = import_graph(REPO, (*PACKAGES, "benchmarks"))


def test_packages_import_only_lower_layers():
    assert {p for layer in PACKAGE_LAYERS for p in layer} == {*PACKAGES, "benchmarks"}
    assert package_back_edges(FULL_GRAPH, PACKAGE_LAYERS) == []


def test_the_episodes_root_holds_only_commands_and_old_names():
    """Library modules live in the sub-packages by role; what stays at the root is a
    `python -m` command or a module kept for its old names (until 0.3.0)."""
    loose = []
    for path in sorted((REPO / "episodes").glob("*.py")):
        text = path.read_text()
        if path.name != "__init__.py" and not (
            '__name__ == "__main__"' in text or "moved_names(" in text
        ):
            loose.append(path.name)
    assert not loose, f"library modules at the root of episodes/: {loose}"


def test_every_splits_module_has_a_layer():
    missing = [
        m
        for m in sorted(GRAPH)
        if m.split(".")[0] == "splits" and layer_of(m, SPLITS_LAYERS) is None
    ]
    assert not missing, (
        "modules of splits/ without a layer; add each to SPLITS_LAYERS in "
        "tests/project/test_import_layers.py: " + ", ".join(missing)
    )


def test_splits_imports_only_downward():
    assert upward_imports(GRAPH, "splits", SPLITS_LAYERS) == []


def test_a_split_method_imports_no_other_method():
    def method_of(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if parts[:2] == ["splits", "methods"] and len(parts) > 2 else None

    found = [
        f"{module} imports {target}"
        for module in sorted(GRAPH)
        for target in sorted(GRAPH[module])
        if method_of(module) and method_of(target) and method_of(module) != method_of(target)
    ]
    assert found == []


def test_glyph_dataset_imports_only_itself_and_util():
    assert imports_outside(GRAPH, GLYPH_DATASET, GLYPH_DATASET_MAY_IMPORT) == []


def test_no_import_cycles_among_the_repo_packages():
    found = sorted({_cycle_text(c) for c in find_cycles(GRAPH)})
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_graph_sees_function_level_imports_and_skips_type_checking():
    # episodes.read imports the episode grid inside main(); the sampler factory imports the
    # sampling modes inside legacy_mode (`from episodes.sampling.modes import get_mode`).
    assert "episodes.reading.episode_grid" in GRAPH["episodes.read"]
    assert "episodes.sampling.modes" in GRAPH["episodes.sampling.sampler_factory"]
    assert "episodes.sampling.fixml" in GRAPH["episodes.sampling.modes.mixed"]


# ----------------------------------------------------------------------------------------------
# The checker finds what is planted


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_planted_cycle_and_an_upward_import(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/base.py": "def f():\n    from pkg.top import run  # upward, inside a function\n",
            "pkg/low/other.py": "import pkg.low.base\n",
            "pkg/top.py": (
                "from typing import TYPE_CHECKING\n"
                "from pkg.low import base\n"
                "if TYPE_CHECKING:\n"
                "    from pkg import hidden\n"
                "from . import cyc\n"
            ),
            "pkg/cyc.py": "from .top import run\n",
            "pkg/hidden.py": "import pkg.top\n",
            "pkg/new.py": "import os\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.top"] == {"pkg.low.base", "pkg.cyc"}  # TYPE_CHECKING import skipped
    assert graph["pkg.low.base"] == {"pkg.top"}
    assert graph["pkg.low.other"] == {"pkg.low.base"}
    cycles = [_cycle_text(c) for c in find_cycles(graph)]
    assert cycles == [
        "pkg.cyc -> pkg.top -> pkg.cyc",
        "pkg.low.base -> pkg.top -> pkg.low.base",
    ]
    layers = {"low": ("pkg.low.*",), "top": ("pkg", "pkg.top", "pkg.cyc", "pkg.hidden")}
    assert upward_imports(graph, "pkg", layers) == ["pkg.low.base (low) imports pkg.top (top)"]
    assert layer_of("pkg.new", layers) is None  # a new module without a layer is noticed
    assert layer_of("pkg.low", layers) == 0
    assert imports_outside(graph, "pkg.low", ("pkg.low",)) == ["pkg.low.base imports pkg.top"]


def test_the_package_checker_finds_a_back_edge_and_a_sibling_import():
    graph = {
        "low.a": {"high.b"},  # a back edge
        "mid.c": {"low.a", "side.d"},  # a sibling of the same layer
        "side.d": {"low.a"},
        "high.b": {"mid.c", "low.a"},
    }
    layers = (("low",), ("mid", "side"), ("high",))
    assert package_back_edges(graph, layers) == [
        "low.a (low) imports high.b (high)",
        "mid.c (mid) imports side.d (side)",
    ]


def test_the_checker_passes_a_clean_package(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg import a\n",  # a package importing its modules
            "pkg/a.py": "import pkg.b\n",
            "pkg/b.py": "def f():\n    import json\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert find_cycles(graph) == []
    assert upward_imports(graph, "pkg", {"b": ("pkg.b",), "a": ("pkg", "pkg.a")}) == []


# ----------------------------------------------------------------------------------------------
# learners and beam_pipelines (issue 31)

# Layers of `learners`, lowest first (as LAYERS): one folder per step of the flow, the
# `python -m` commands on top. A module at learners/' top or in a new folder has no layer (and
# fails test_every_learners_module_has_a_layer) until it is given its place here.
LEARNERS_LAYERS: dict[str, tuple[str, ...]] = {
    "package": ("learners",),
    "feed": ("learners.feed.*",),
    "nn": ("learners.nn.*",),
    "optim": ("learners.optim.*",),
    "inference": ("learners.inference.*",),
    "method interface": (
        "learners.methods",
        "learners.methods.config_fields",
        "learners.methods.config_flags",
        "learners.methods.learner_config",
        "learners.methods.learner",
    ),
    "registry": ("learners.methods.registry",),
    "methods": ("learners.methods.*",),
    "training": ("learners.training.*",),
    "evaluation": ("learners.evaluation.*",),
    "reproduction": ("learners.reproduction.*",),
    "commands": ("learners.train", "learners.evaluate", "learners.report", "learners.reproduce"),
}
LEARNERS_MAY_IMPORT = ("learners", "episodes")

# Layers of `beam_pipelines`, lowest first: what sources share with the writer, the sources,
# then everything else (the conversion, writer, runners, downloads), then the commands and the
# package's `__init__` (which may prepare a starting command; no module imports it).
BEAM_PIPELINES_LAYERS: dict[str, tuple[str, ...]] = {
    "formats": (
        "beam_pipelines.conversion.codec_fast_paths",
        "beam_pipelines.conversion.image_codec",
        "beam_pipelines.conversion.jpeg_markers",
        "beam_pipelines.conversion.pixel_conventions",
    ),
    "sources": ("beam_pipelines.sources.*",),
    "pipeline": ("beam_pipelines.*",),
    "commands": (
        "beam_pipelines",
        "beam_pipelines.cache",
        "beam_pipelines.convert",
        "beam_pipelines.convert_all",
        "beam_pipelines.download",
        "beam_pipelines.embed",
        "beam_pipelines.episodes",
        "beam_pipelines.glyph_dataset.*",
        "beam_pipelines.verify",
    ),
}


def _without_a_layer(package: str, layers: dict[str, tuple[str, ...]]) -> list[str]:
    return [m for m in sorted(GRAPH) if m.split(".")[0] == package and layer_of(m, layers) is None]


def _stale_entries(layers: dict[str, tuple[str, ...]]) -> list[str]:
    return [
        entry
        for entries in layers.values()
        for entry in entries
        if not any(
            m == entry or (entry.endswith(".*") and (m + ".").startswith(entry[:-1])) for m in GRAPH
        )
    ]


def test_every_learners_module_has_a_layer():
    missing = _without_a_layer("learners", LEARNERS_LAYERS)
    assert not missing, (
        "modules of learners/ without a layer; put each in its folder, or add it to "
        "LEARNERS_LAYERS in tests/project/test_import_layers.py: " + ", ".join(missing)
    )
    assert _stale_entries(LEARNERS_LAYERS) == []


def test_learners_imports_only_downward():
    assert upward_imports(GRAPH, "learners", LEARNERS_LAYERS) == []


def test_learners_imports_only_itself_and_episodes():
    assert imports_outside(GRAPH, "learners", LEARNERS_MAY_IMPORT) == []


def test_the_learner_interface_never_reaches_the_registry():
    """The circle learner -> registry -> (the methods) -> learner is gone: nothing the
    Learner interface imports, directly or not, is the registry."""
    reached, todo = set(), ["learners.methods.learner"]
    while todo:
        for target in GRAPH[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert "learners.methods.registry" not in reached


def test_the_learners_top_holds_only_the_commands():
    """A newcomer sees the folders and the `python -m` commands (docs/layout.md, "Layout of this repository"), each folder
    saying its job in one line (its docstring's first paragraph)."""
    top = [p for p in (REPO / "learners").glob("*.py") if p.name != "__init__.py"]
    loose = sorted(p.name for p in top if '__name__ == "__main__"' not in p.read_text())
    assert not loose, f"library modules at the top of learners/: {loose}"
    assert {"train.py", "evaluate.py", "report.py"} <= {p.name for p in top}
    for path in (REPO / "learners").iterdir():
        if path.is_dir() and any(path.glob("*.py")):
            assert (path / "__init__.py").is_file(), path
            doc = ast.get_docstring(ast.parse((path / "__init__.py").read_text())) or ""
            summary = doc.split("\n\n")[0]
            assert summary and "\n" not in summary, f"{path}/__init__.py: its job in one line"


def test_every_beam_pipelines_module_has_a_layer():
    assert _without_a_layer("beam_pipelines", BEAM_PIPELINES_LAYERS) == []
    assert _stale_entries(BEAM_PIPELINES_LAYERS) == []


def test_beam_pipelines_imports_only_downward():
    assert upward_imports(GRAPH, "beam_pipelines", BEAM_PIPELINES_LAYERS) == []


def test_beam_pipelines_and_learners_never_import_each_other():
    both = [
        line
        for package, other in (("beam_pipelines", "learners"), ("learners", "beam_pipelines"))
        for line in imports_outside(GRAPH, package, (package,))
        if line.split(" imports ")[1].split(".")[0] == other
    ]
    assert both == []


def test_the_closest_layer_entry_decides():
    layers = {
        "low": ("pkg", "pkg.base"),
        "parts": ("pkg.parts.*",),
        "rest": ("pkg.*",),
        "top": ("pkg.cli", "pkg.tool.*"),
    }
    assert [
        layer_of(m, layers)
        for m in ("pkg", "pkg.base", "pkg.parts", "pkg.parts.a", "pkg.other", "pkg.cli")
    ] == [0, 0, 1, 1, 2, 3]
    assert [layer_of(m, layers) for m in ("pkg.tool", "pkg.tool.x", "other")] == [3, 3, None]
    graph = {"pkg.other": {"pkg.cli"}, "pkg.cli": {"pkg.other", "pkg.parts.a"}}
    assert upward_imports(graph, "pkg", layers) == ["pkg.other (rest) imports pkg.cli (top)"]
