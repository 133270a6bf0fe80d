"""One error model for every `python -m` command (issue 35 item 2): a fault the user can fix is a
`UserError` (or an OSError of a path) and ends in one `error:` line; anything else is a bug and
keeps its traceback. The tests walk every command (tests/fixtures/command_walk.py) and every exception
class of the packages.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import re

import pytest

from episodes.util.cli_errors import UserError, run_main
from tests.fixtures.command_walk import REPO, command_module, commands

# Exceptions that are no user fault, each with why.
NOT_USER_FAULTS = {
    "learners.training.distributed.PeerLost": "a rank's collective failed; the rank that stopped says why",
}


class InjectedBug(ValueError):
    """A plain ValueError raised below a command, as a numpy shape mismatch would be."""


def _bug(*args, **kwargs):
    raise InjectedBug("shapes (3,) and (4,) not aligned")


@pytest.mark.parametrize("command", commands())
def test_a_bug_below_a_command_keeps_its_traceback(command, monkeypatch, capsys):
    """Every command parses its flags first: argparse raising a plain ValueError is a bug under
    the command, which must reach the user with its traceback, not as one line and status 2."""
    module = command_module(command)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", _bug)
    with pytest.raises(InjectedBug):
        run_main(module.main, ["--help"])
    assert "error:" not in capsys.readouterr().err


def test_a_user_error_below_a_command_is_one_line(monkeypatch, capsys):
    from episodes import read

    def fault(*args, **kwargs):
        raise UserError("--split nope: expected train, valid or test")

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", fault)
    assert run_main(read.main, ["--help"]) == 2
    assert capsys.readouterr().err == "error: --split nope: expected train, valid or test\n"


def _sources(package: str):
    for path in sorted((REPO / package).rglob("*.py")):
        yield path, path.read_text()


@pytest.mark.parametrize("package", ["episodes", "beam_pipelines", "splits", "learners"])
def test_commands_end_in_error_one_way(package):
    """`main` raises and `run_main` / `@user_faults` print: no hand-written `error:` line, no
    `parser.exit`, no per-command list of built-in exceptions (`extra_errors=`,
    `@user_faults(ValueError, ...)`)."""
    found = []
    handwritten = re.compile(r"print\(\s*f?[\"']error: ")
    for path, text in _sources(package):
        where = path.relative_to(REPO)
        if where.as_posix() in ("episodes/util/cli_errors.py", "episodes/util/cli_style.py"):
            continue  # the one place that prints, and the parser's usage line
        for number, line in enumerate(text.splitlines(), 1):
            if handwritten.search(line) or "parser.exit(" in line or "extra_errors" in line:
                found.append(f"{where}:{number}: {line.strip()}")
            if re.search(r"@user_faults\(", line):
                found.append(f"{where}:{number}: {line.strip()} (no types: @user_faults)")
    assert not found, "\n".join(found)


def test_every_command_runs_through_run_main():
    for command in commands():
        module = command_module(command)
        text = inspect.getsource(importlib.import_module(module.__name__))
        if not re.search(r"sys\.exit\(run_main\(main\b", text):
            main = REPO / (command.replace(".", "/") + "/__main__.py")
            assert main.is_file() and "run_main(main" in main.read_text(), command


def _exception_classes(package: str):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, Exception)
                and not issubclass(value, Warning)
                and value.__module__ == module.__name__
                and name == value.__name__
            ):
                yield f"{module.__name__}.{name}", value


@pytest.mark.slow
@pytest.mark.parametrize("package", ["episodes", "beam_pipelines", "splits", "learners"])
def test_every_exception_of_the_packages_is_a_user_error(package):
    """One root: each exception class a package defines derives from UserError (the ones that
    are no user fault are listed with their reason), and keeps a built-in base beside it where
    it had one, so that `except ValueError` / `except OSError` around a call still works."""
    outside = set()
    for name, cls in _exception_classes(package):
        if issubclass(cls, UserError) or name in NOT_USER_FAULTS:
            continue
        outside.add(name)
    assert outside == set()


def test_the_merged_errors_keep_both_old_bases():
    from episodes.records.tfrecord_io import CorruptRecordError
    from episodes.util.cli_errors import OutputExistsError

    assert issubclass(CorruptRecordError, ValueError) and issubclass(
        CorruptRecordError, RuntimeError
    )
    assert issubclass(OutputExistsError, FileExistsError)


def test_no_command_catches_a_built_in_exception_around_its_work():
    """A `try` around a command's work that turns every ValueError or OSError into one line
    hides bugs: `except (ValueError, OSError)` whose handler raises a UserError is refused in a
    command module (a narrow catch around one call of a library that raises ValueError for the
    user's input is fine, and is written against that call)."""
    found = []
    for command in commands():
        path = REPO / (command.replace(".", "/") + ".py")
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            names = {
                n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)
            }  # ValueError, OSError, ...
            raises_one_line = any(
                isinstance(n, ast.Raise) and "UserError" in ast.unparse(n) for n in node.body
            ) or any(
                isinstance(n, ast.Call) and ast.unparse(n.func) == "parser.exit"
                for n in ast.walk(node)
            )
            if names & {"ValueError", "OSError", "Exception"} and raises_one_line:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found
