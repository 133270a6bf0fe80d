"""Commands of this repository run as a user runs them: `python -m MODULE ...` in a child
process (one CPU thread, no GPU), from the repository's root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The smallest learner the commands accept quickly: CNN4 at a quarter width on 28 px images.
TINY = ["--backbone", "cnn4", "--width", "0.25", "--image-size", "28", "--no-progress"]


def child_env() -> dict[str, str]:
    """The test process's environment, one CPU thread and no GPU."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def python_m(module: str, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run `python -m module args` to its end (5 minutes at most), output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def start_python_m(module: str, *args: str, **kwargs: Any) -> subprocess.Popen:
    """Start `python -m module args` (for signals and concurrent runs), output piped as text
    unless `kwargs` (passed on to Popen) say otherwise."""
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=child_env(),
        text=True,
        **{**streams, **kwargs},
    )
