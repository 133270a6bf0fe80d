"""Every `python -m` command of the repository and every parser it builds, for the tests that
hold all commands to one rule (tests/test_cli_style.py, test_command_faults.py,
test_flag_meanings.py, test_output_overlap.py)."""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("episodes", "beam_pipelines", "splits", "learners")
# `python -m` entry points that are not user commands (worker processes, moved-name shims).
NOT_COMMANDS = {
    "beam_pipelines.runners.local_worker",
    "episodes.reading.decode_processes",
    "episodes.util.worker_processes",
    "beam_pipelines.embed",
    "episodes.glyph_dataset",
}


def commands() -> list[str]:
    """The modules a user runs with `python -m` (NOT_COMMANDS aside)."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            module = module.removesuffix(".__main__")  # a package command: python -m package
            if module not in NOT_COMMANDS and '__name__ == "__main__"' in path.read_text():
                found.append(module)
    return found


def command_module(name: str):
    """The module `python -m name` runs (a package's `__main__`)."""
    module = importlib.import_module(name)
    if not hasattr(module, "build_parser") and hasattr(module, "__path__"):
        module = importlib.import_module(f"{name}.__main__")
    return module


def command_parsers(module_name: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of a command: its own, each sub-command's, and each source's (convert) or
    split method's (splits make)."""
    module = command_module(module_name)
    build = getattr(module, "build_parser", None)
    if build is None:
        return
    parameters = inspect.signature(build).parameters
    if "source" in parameters:
        from beam_pipelines.sources import SOURCES

        roots = [(f"{module_name} --source {name}", build(name)) for name in sorted(SOURCES)]
    elif "method" in parameters:  # splits make: each split method's flags
        from splits.methods import method_names

        roots = [(f"{module_name} --method {name}", build(name)) for name in method_names()]
    else:
        roots = [(module_name, build())]
    todo = list(roots)
    while todo:
        name, parser = todo.pop()
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
