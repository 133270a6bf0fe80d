"""The public API: `from episodes import EpisodeReader, SamplerConfig, load_spec` (loaded on
first use); every package and module of `episodes`, `splits`, `learners` and `beam_pipelines` declares its public names
(`__all__`) and the other packages import only those; the modules and names that moved are
importable from their old path, as the very same objects, with a DeprecationWarning naming the
new one and the version in which the old path goes (issue 35: the version is real, 0.2.0)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import episodes
from episodes.util.moved_modules import MOVED
from episodes.util.release import REMOVAL_VERSION, VERSION
from tests.fixtures.paths import REPO
from tests.fixtures.project_modules import PACKAGES, module_names


def test_public_names_are_the_implementations():
    from episodes import EpisodeReader, SamplerConfig, load_spec
    from episodes.reading.reader import EpisodeReader as reader_class
    from episodes.records.dataset_spec import load_spec as loader
    from episodes.sampling.sampler_config import SamplerConfig as config_class

    assert (EpisodeReader, SamplerConfig, load_spec) == (reader_class, config_class, loader)
    assert {"EpisodeReader", "SamplerConfig", "load_spec"} <= set(episodes.__all__)
    assert all(getattr(episodes, name) is not None for name in episodes.__all__)
    with pytest.raises(AttributeError, match="no attribute 'EpisodeReaders'"):
        episodes.EpisodeReaders  # noqa: B018


def test_importing_the_package_stays_light():
    code = "import sys, episodes; print(sorted(m for m in ('numpy', 'episodes.reading.reader') if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_imports_from_its_old_path_with_a_warning(old):
    new = MOVED[old]
    assert not (REPO / (old.replace(".", "/") + ".py")).exists()  # nothing shadows the alias
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}: import it from there"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_warning_points_at_the_users_import_line_and_shows_by_default():
    code = "import episodes.dataset_spec as d\nprint(d.load_spec.__module__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "episodes.records.dataset_spec"
    assert "<string>:1: DeprecationWarning: episodes.dataset_spec moved to " in done.stderr
    sys.modules.pop("episodes.dataset_spec", None)
    with pytest.warns(DeprecationWarning, match="goes in version 0.3.0"):
        from episodes.dataset_spec import DatasetSpec  # noqa: F401 (the old `from` form too)


# ----------------------------------------------------------------------------------------------
# Names that left a module that stays (a command module, an old command name)

MOVED_NAMES = [
    ("episodes.read", "EpisodeReader", "episodes.reading.reader"),
    ("episodes.read", "load_dataset", "episodes.sampling.sampler_factory"),
    ("episodes.read", "ARRAY_FIELDS", "episodes.sampling.episode"),
    ("episodes.fixml", "MixedSampler", "episodes.sampling.fixml"),
    ("episodes.fixml", "FixedSupportPool", "episodes.sampling.fixml_records"),
    ("episodes.fetch", "require_local_dataset", "episodes.records.local_dataset"),
    ("episodes.glyph_dataset", "generate", "beam_pipelines.glyph_dataset"),
    ("splits.published", "load_published", "episodes.records.published_splits"),
    ("splits.atg", "run_atg", "splits.methods.atg.algorithm"),
    ("splits.atg", "ATGConfig", "splits.methods.atg.config"),
    ("splits.random", "random_split", "splits.methods.random.algorithm"),
    ("splits.semantic", "dag_split", "splits.methods.semantic.algorithm"),
    ("beam_pipelines.conversion", "convert", "beam_pipelines.conversion.pipeline"),
]


@pytest.mark.parametrize("old_module, name, new_module", MOVED_NAMES)
def test_a_moved_name_imports_from_its_old_module_with_a_warning(old_module, name, new_module):
    module = importlib.import_module(old_module)
    note = rf"{old_module}.{name} moved to {new_module}.{name}: .*goes in version 0\.3\.0"
    with pytest.warns(DeprecationWarning, match=note):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new_module), name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_renamed_names_import_as_their_new_name_with_a_warning():
    from episodes.sampling.episode_cli import add_sampling_mode_arguments
    from splits.methods.atg.config import ATGConfig

    with pytest.warns(DeprecationWarning, match="ATGParameters moved to .*config.ATGConfig"):
        from splits.methods.atg import ATGParameters
    assert ATGParameters is ATGConfig
    with pytest.warns(DeprecationWarning, match="add_mixing_arguments moved to"):
        from episodes.read import add_mixing_arguments
    assert add_mixing_arguments is add_sampling_mode_arguments


def test_every_deprecation_note_names_the_version_in_which_the_old_name_goes():
    from episodes.util import cli_style, moved_modules

    # the notes of moved commands: tests/episodes/test_glyph_dataset.py, tests/splits/test_make.py
    assert REMOVAL_VERSION in moved_modules.moved_note("episodes.dataset_spec")
    assert cli_style.OLD_SPELLINGS_UNTIL == f"version {REMOVAL_VERSION}"
    stale = []
    for path in sorted(REPO.glob("*/**/*.py")):
        if path.parts[len(REPO.parts)] in (*PACKAGES, "tests", "benchmarks"):
            text = path.read_text()
            if re.search(r"(next|one) release", text):
                stale.append(str(path.relative_to(REPO)))
    assert not stale, f"deprecations without a version: {stale}"


# ----------------------------------------------------------------------------------------------
# The version


def test_the_version_is_one_number_in_setup_the_package_and_the_changelog():
    done = subprocess.run(
        [sys.executable, "setup.py", "--version"], cwd=REPO, capture_output=True, text=True
    )
    assert done.stdout.strip().splitlines()[-1] == VERSION == episodes.__version__
    import beam_pipelines
    import splits

    assert beam_pipelines.__version__ == splits.__version__ == VERSION
    changelog = (REPO / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[?(\d+\.\d+\.\d+)", changelog, re.MULTILINE)
    assert released[:2] == [VERSION, "0.1.0"]
    assert f"go in {REMOVAL_VERSION}" in changelog and "tag `vX.Y.Z`" in changelog


# ----------------------------------------------------------------------------------------------
# Public names: declared, and the only ones the other packages use


def _declared(path: Path) -> list[str] | None:
    """The literal `__all__` of a module file (None when it has none)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return None


DECLARING = ("episodes", "splits", "learners", "beam_pipelines")
MODULES = {
    name: path
    for name, path in module_names(REPO, DECLARING).items()
    if not name.endswith("__main__")
}


@pytest.mark.slow
def test_every_module_and_package_declares_its_names():
    missing = sorted(name for name, path in MODULES.items() if _declared(path) is None)
    assert not missing, f"no __all__: {missing}"
    for name, path in MODULES.items():
        if path.name != "__init__.py":  # a module's names are its own top-level definitions
            tree = ast.parse(path.read_text())
            defined = {
                target.id
                for node in tree.body
                for target in (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [getattr(node, "target", node)]
                )
                if isinstance(target, ast.Name)
            }
            defined |= {
                node.name
                for node in tree.body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            }
            defined |= {
                (alias.asname or alias.name).split(".")[0]
                for node in tree.body
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names
            }
            unknown = sorted(set(_declared(path)) - defined)
            assert not unknown, f"{name}.__all__ names what it does not define: {unknown}"


@pytest.mark.parametrize(
    "package", sorted(n for n, p in MODULES.items() if p.name == "__init__.py")
)
def test_a_packages_declared_names_resolve(package):
    module = importlib.import_module(package)
    for name in module.__all__:  # a name, or a submodule (a package whose modules are its API)
        if f"{package}.{name}" in MODULES:
            importlib.import_module(f"{package}.{name}")
        assert getattr(module, name) is not None, f"{package}.{name}"


@pytest.mark.slow
def test_the_other_packages_import_only_declared_names():
    """`from episodes.X import name` outside `episodes` (and the same for `splits`) names one of
    X's `__all__`, or a submodule: what a package declares is what the others use."""
    found = []
    for importer, path in module_names(REPO, (*PACKAGES, "benchmarks")).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            owner = node.module.split(".")[0]
            if owner not in DECLARING or owner == importer.split(".")[0]:
                continue
            declared = _declared(MODULES[node.module]) or []
            for alias in node.names:
                if alias.name not in declared and f"{node.module}.{alias.name}" not in MODULES:
                    found.append(f"{importer}: {node.module}.{alias.name}")
    assert not found, "imports of undeclared names:\n" + "\n".join(sorted(found))
