"""Importing the toolkit's packages changes no process state (issue 35), with one documented
exception: the moved-modules finder on `sys.meta_path` (`episodes.util.moved_modules`).

A fresh interpreter imports every module of the four packages (commands too: their work is in
`main`) and compares what a library must leave alone: the root logger (its level, handlers and
filters), matplotlib's backend and the finders of ours on `sys.meta_path` (libraries the
modules import may add their own). The root logger filter that hides Beam's
"apitools not found" line is added only while a `python -m beam_pipelines.<command>` starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.paths import REPO
from tests.fixtures.project_modules import PACKAGES, module_names

PROBE = """
import importlib, json, logging, sys
import matplotlib

def state():
    root = logging.getLogger()
    return {
        "root level": root.level,
        "root handlers": [type(h).__name__ for h in root.handlers],
        "root filters": [type(f).__name__ for f in root.filters],
        "matplotlib backend": matplotlib.get_backend(),
        "our meta path finders": [
            type(f).__name__ for f in sys.meta_path if type(f).__module__.split(".")[0] in OURS
        ],
    }

before = state()
for name in MODULES:
    importlib.import_module(name)
print(json.dumps({"before": before, "after": state()}))
"""


def _probe(modules: list[str], argv0: str | None = None) -> dict:
    code = PROBE.replace("MODULES", repr(modules)).replace("OURS", repr(PACKAGES))
    if argv0 is not None:
        code = f"import sys; sys.argv[0] = {argv0!r}\n" + code
    env = {**os.environ, "MPLBACKEND": "svg", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _importable() -> list[str]:
    """Every module of the packages but the `__main__`s (importing one runs its command)."""
    return sorted(m for m in module_names(REPO, PACKAGES) if not m.endswith("__main__"))


@pytest.mark.slow
def test_importing_every_module_changes_no_process_state_but_the_finder():
    found = _probe(_importable())
    before, after = found["before"], found["after"]
    assert before["our meta path finders"] == []
    assert after["our meta path finders"] == ["MovedModuleFinder"]
    after["our meta path finders"] = []
    assert after == before


def test_a_starting_beam_command_quiets_beams_import_line():
    found = _probe(["beam_pipelines"], argv0="-m")
    assert found["after"]["root filters"] == ["GcpClientWarningFilter"]
    assert _probe(["beam_pipelines"])["after"]["root filters"] == []
