"""The public API of `episodes`: `from episodes import EpisodeReader, SamplerConfig, load_spec`
(loaded on first use), and the modules that moved in the restructuring importable from their
old path as the very same module, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import episodes
from episodes.util.moved_modules import MOVED

REPO = Path(__file__).resolve().parents[1]


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
    from episodes.dataset_spec import DatasetSpec  # noqa: F401 (the old `from` form works too)
