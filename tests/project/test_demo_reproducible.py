"""`make demo` gives the same numbers on any x86-64 machine with AVX2 (issues 25 and 30).

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
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.fixtures.demo_env import MACHINE_KNOBS, REPO, demo_env

# What a machine decides without being asked; DEMO_ENV must make it irrelevant.
AVX2_MACHINE = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="DEMO_ENV pins x86-64 instruction sets"
)


def start_training(output: Path, machine: dict[str, str], pin: dict[str, str], one_core: bool):
    """`learners.train` for 3 multiclass steps on generated images, as a given machine would."""
    env = {k: v for k, v in os.environ.items() if k not in MACHINE_KNOBS}
    env.update(machine)
    env.update(pin)
    env["PYTHONPATH"] = str(REPO)
    cores = sorted(os.sched_getaffinity(0))
    command = [sys.executable, "-m", "learners.train", "--method", "multiclass"]
    command += ["--backbone", "cnn4", "--synthetic", "--image-size", "28", "--steps", "3"]
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


# Without AVX-512 here, the other machine is one without AVX2 (ATen's default kernels, oneDNN's
# SSE4.1 ones, MKL's SSE4.2 code path), also on one core.
OLDER_MACHINE = {
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
}


@pytest.mark.slow
def test_demo_env_gives_the_same_weights_on_this_and_another_single_core_machine(tmp_path):
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX512", "AVX2"):
        pytest.skip(f"a {capability} machine cannot stand in for an AVX2 one")
    other = AVX2_MACHINE if capability == "AVX512" else OLDER_MACHINE
    pin = demo_env()
    assert pin["ONEDNN_MAX_CPU_ISA"] == "AVX2" and pin["ATEN_CPU_CAPABILITY"] == "avx2"
    # Two at a time: the pinned runs use DEMO_THREADS threads, the unpinned ones the machine's.
    pinned = trained_weights(
        [
            (tmp_path / "pinned_here", start_training(tmp_path / "pinned_here", {}, pin, False)),
            (
                tmp_path / "pinned_avx2",
                start_training(tmp_path / "pinned_avx2", other, pin, True),
            ),
        ]
    )
    unpinned = trained_weights(
        [
            (tmp_path / "here", start_training(tmp_path / "here", {}, {}, False)),
            (tmp_path / "avx2", start_training(tmp_path / "avx2", other, {}, True)),
        ]
    )
    # The emulated machines really differ (else the pinned comparison proves nothing) ...
    assert differing(*unpinned), "unpinned runs agree: the machine emulation has no effect"
    # ... and DEMO_ENV makes every tensor bit-identical.
    assert differing(*pinned) == []


# numpy and OpenBLAS pick their kernels too: numpy its SIMD dispatch (X86_V3 = AVX2, X86_V4 and
# AVX512_* where present), OpenBLAS a kernel per CPU generation, both threads. An older machine
# (numpy without X86_V3, OpenBLAS's Sandybridge kernels, one core) is emulated on this one.
OLDER_NUMPY_MACHINE = {
    "NPY_DISABLE_CPU_FEATURES": "X86_V3,X86_V4,AVX512_ICL,AVX512_SPR",
    "OPENBLAS_CORETYPE": "Sandybridge",
}
NUMPY_KNOBS = ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")
# A demo stage that runs on numpy and OpenBLAS: the PCA of class embeddings behind the demo's
# pca_*.png pictures (splits.analyze), on 200 seeded random embeddings.
PCA_STAGE = """
import hashlib, numpy as np
from splits.analyze import pca_projection
from splits.atg import normalise_rows
embeddings = np.random.default_rng(0).standard_normal((200, 64)).astype(np.float32)
projected, _ = pca_projection(normalise_rows(embeddings))
print(hashlib.sha256(projected.tobytes()).hexdigest())
"""


def numpy_stage_digest(machine: dict[str, str], pin: dict[str, str], one_core: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k not in MACHINE_KNOBS + NUMPY_KNOBS}
    env.update(machine)
    env.update(pin)
    env["PYTHONPATH"] = str(REPO)
    cores = sorted(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "-c", PCA_STAGE],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores[:1])) if one_core else None,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_demo_env_pins_numpy_and_openblas_kernels():
    import numpy as np

    if not np._core._multiarray_umath.__cpu_features__.get("X86_V3"):
        pytest.skip("without AVX2 this machine cannot stand in for a newer one")
    pin = demo_env()
    assert pin["NPY_DISABLE_CPU_FEATURES"].split(",")[:2] == ["X86_V3", "X86_V4"]
    assert pin["OPENBLAS_CORETYPE"] == "Haswell" and pin["OPENBLAS_NUM_THREADS"] == "1"
    here, older = (
        numpy_stage_digest({}, {}, False),
        numpy_stage_digest(OLDER_NUMPY_MACHINE, {}, True),
    )
    assert here != older, "unpinned stages agree: the machine emulation has no effect"
    assert numpy_stage_digest({}, pin, False) == numpy_stage_digest(OLDER_NUMPY_MACHINE, pin, True)
