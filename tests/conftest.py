"""Shared test set-up: quiet TensorFlow, single-threaded torch, a local Beam runner factory."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

# The project's shared/ folder (papers, reference data) sits beside the repository checkout;
# FEWSHOT_SHARED overrides it.
SHARED = Path(
    os.environ.get("FEWSHOT_SHARED", Path(__file__).resolve().parents[1].parent / "shared")
)
REFERENCE_DATA = SHARED / "reference-data" / "meta-dataset"


@pytest.fixture(scope="session")
def reference_data() -> Path:
    if not REFERENCE_DATA.exists():
        pytest.fail(f"reference data not found at {REFERENCE_DATA} (set FEWSHOT_SHARED)")
    return REFERENCE_DATA


def make_local_runner(workers: int = 1):
    """The local Beam runner exactly as the CLIs build it."""
    from beam_pipelines.runners.options import make_runner

    return make_runner(argparse.Namespace(runner="DirectRunner", direct_num_workers=workers), [])


@pytest.fixture
def local_runner():
    return make_local_runner
