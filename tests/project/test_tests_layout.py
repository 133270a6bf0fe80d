"""The tests are laid out by package: tests/<package>/ for each of the project's packages,
tests/project/ for what spans them (commands' style and faults, layering, docs), and
tests/fixtures/ for every shared helper, so no test module imports another (issue 35)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fixtures.paths import REPO
from tests.fixtures.project_modules import PACKAGES

TESTS = REPO / "tests"
ROOT_FILES = {"__init__.py", "conftest.py"}
ROOT_FOLDERS = {"fixtures", "project", *PACKAGES}


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _tests_imports(path: Path) -> list[str]:
    """The `tests.` modules that `path` imports (at any depth of the file)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [n for n in names if n == "tests" or n.startswith("tests.")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("tests")]
    return found


def test_the_root_holds_only_the_package_folders_fixtures_and_project():
    entries = {p.name for p in TESTS.iterdir() if p.name != "__pycache__"}
    files = {n for n in entries if (TESTS / n).is_file()}
    folders = entries - files
    assert files == ROOT_FILES, files - ROOT_FILES
    assert folders == ROOT_FOLDERS, folders ^ ROOT_FOLDERS
    for package in PACKAGES:
        assert (REPO / package / "__init__.py").is_file(), f"tests/{package}/ names no package"


def test_every_folder_with_python_files_is_a_package():
    """Without __init__.py pytest would put tests/ on sys.path, and tests/learners would then
    shadow the real `learners` package."""
    folders = {p.parent for p in _python_files()}
    missing = sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, missing


def test_test_modules_live_beside_their_package_and_fixtures_hold_no_tests():
    for path in _python_files():
        top = path.relative_to(TESTS).parts[0]
        if path.name.startswith("test_"):
            assert top in ROOT_FOLDERS - {"fixtures"}, (
                f"{path}: a test module outside a package folder"
            )
        if top == "fixtures":
            tree = ast.parse(path.read_text())
            tests = [
                n.name
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
            ]
            assert not tests, f"{path}: tests in a fixtures module: {tests}"


def test_no_test_module_imports_another():
    offenders = []
    for path in _python_files():
        for name in _tests_imports(path):
            if any(part.startswith("test_") for part in name.split(".")):
                offenders.append(f"{path.relative_to(REPO)} imports {name}")
    assert not offenders, offenders
    # the rule has something to hold: shared helpers are imported from tests.fixtures
    users = [
        p for p in _python_files() if any(n.startswith("tests.fixtures") for n in _tests_imports(p))
    ]
    assert len(users) >= 40
