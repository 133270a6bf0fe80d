"""`make demo`'s torch commands give the same weights on any x86-64 machine with AVX2 (issue 25).

torch chooses its kernels' instruction set when a process starts (oneDNN convolutions:
ONEDNN_MAX_CPU_ISA; ATen's vector kernels: ATEN_CPU_CAPABILITY; MKL: MKL_ENABLE_INSTRUCTIONS)
and its thread count from the cores it may use. Two machines are emulated on this one: the
machine as it is, and one limited to AVX2 on a single core. A few steps of real training
(`learners.train --synthetic`) differ between them unpinned, and must be bit-identical under the
Makefile's DEMO_ENV.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent

# What a machine decides without being asked; DEMO_ENV must make it irrelevant.
MACHINE_KNOBS = (
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)
AVX2_MACHINE = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="DEMO_ENV pins x86-64 instruction sets"
)


def demo_env() -> dict[str, str]:
    """The x86-64 DEMO_ENV assignments of the Makefile, with its DEMO_THREADS default."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    threads = re.search(r"^DEMO_THREADS \?= *(\S+)", text, re.M).group(1)
    x86 = text.split("ifeq ($(shell uname -m),x86_64)", 1)[1].split("else", 1)[0]
    assignments = re.search(r"^DEMO_ENV \?= *(.*)$", x86, re.M).group(1)
    pairs = dict(word.split("=", 1) for word in assignments.split())
    return {key: value.replace("$(DEMO_THREADS)", threads) for key, value in pairs.items()}


def start_training(output: Path, machine: dict[str, str], pin: dict[str, str], one_core: bool):
    """`learners.train` for 3 multiclass steps on generated images, as a given machine would."""
    env = {k: v for k, v in os.environ.items() if k not in MACHINE_KNOBS}
    env.update(machine)
    env.update(pin)
    env["PYTHONPATH"] = str(REPO)
    cores = sorted(os.sched_getaffinity(0))
    command = [sys.executable, "-m", "learners.train", "--method", "multiclass"]
    command += ["--backbone", "cnn4", "--synthetic", "--image-size", "28", "--episodes", "3"]
    command += ["--batch-size", "64", "--validation-episodes", "0", "--seed", "0"]
    command += ["--no-progress", "--output", str(output)]
    return subprocess.Popen(
        command,
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores[:1])) if one_core else None,
    )


def trained_weights(runs: list[tuple[Path, subprocess.Popen]]) -> list[dict[str, torch.Tensor]]:
    weights = []
    for output, process in runs:
        log, _ = process.communicate(timeout=300)
        assert process.returncode == 0, log
        payload = torch.load(output / "checkpoints" / "last.pt", weights_only=True)
        weights.append(payload["model"])
    return weights


def differing(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    assert a.keys() == b.keys()
    return [name for name in a if not torch.equal(a[name], b[name])]


def test_demo_env_gives_the_same_weights_on_an_avx512_and_an_avx2_single_core_machine(tmp_path):
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        pytest.skip("without AVX-512 this machine cannot stand in for a wider one")
    pin = demo_env()
    assert pin["ONEDNN_MAX_CPU_ISA"] == "AVX2" and pin["ATEN_CPU_CAPABILITY"] == "avx2"
    # Two at a time: the pinned runs use DEMO_THREADS threads, the unpinned ones the machine's.
    pinned = trained_weights(
        [
            (tmp_path / "pinned_here", start_training(tmp_path / "pinned_here", {}, pin, False)),
            (
                tmp_path / "pinned_avx2",
                start_training(tmp_path / "pinned_avx2", AVX2_MACHINE, pin, True),
            ),
        ]
    )
    unpinned = trained_weights(
        [
            (tmp_path / "here", start_training(tmp_path / "here", {}, {}, False)),
            (tmp_path / "avx2", start_training(tmp_path / "avx2", AVX2_MACHINE, {}, True)),
        ]
    )
    # The emulated machines really differ (else the pinned comparison proves nothing) ...
    assert differing(*unpinned), "unpinned runs agree: the machine emulation has no effect"
    # ... and DEMO_ENV makes every tensor bit-identical.
    assert differing(*pinned) == []
