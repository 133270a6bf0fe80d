"""Shared test set-up: quiet TensorFlow, no GPU, the fixtures every package's tests may ask for.

Helpers live in tests/fixtures/ (imported by name); the pytest fixtures below and the plugins
listed in `pytest_plugins` are available to every test without an import.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from tests.fixtures.local_runner import make_local_runner  # noqa: E402
from tests.fixtures.paths import PAPERS, REFERENCE_DATA, shared_path  # noqa: E402

pytest_plugins = (
    "tests.fixtures.object_store",  # s3: a moto server on 127.0.0.1
    "tests.fixtures.jpeg_records",  # jpeg_dataset: JPEG records of 6 training classes
    "tests.fixtures.conversion_processes",  # slow_raw: a conversion that runs tens of seconds
)


@pytest.fixture(scope="session")
def reference_data() -> Path:
    """Meta-Dataset's published specs and split lists (shared/reference-data), or a skip."""
    return shared_path(REFERENCE_DATA)


@pytest.fixture(scope="session")
def papers() -> Path:
    """The four papers as text (shared/papers), or a skip."""
    return shared_path(PAPERS)


@pytest.fixture
def local_runner():
    return make_local_runner
