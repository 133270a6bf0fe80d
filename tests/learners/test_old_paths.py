"""The learners modules that moved into sub-packages in 0.2.0 (issue 31) import from their old
path until 0.3.0: the very same module object, with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from learners import MOVED
from learners.methods import registry
from tests.fixtures.paths import REPO


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_learners_module_imports_from_its_old_path_with_a_warning(old):
    new = MOVED[old]
    assert not (REPO / (old.replace(".", "/") + ".py")).exists()  # nothing shadows the alias
    assert (REPO / (new.replace(".", "/") + ".py")).is_file()
    sys.modules.pop(old, None)
    note = rf"{old} moved to {new}: import it from there \(the old path goes in version 0\.3\.0\)"
    with pytest.warns(DeprecationWarning, match=note):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_old_from_form_gives_the_same_objects(monkeypatch):
    import learners

    monkeypatch.delitem(sys.modules, "learners.registry", raising=False)
    monkeypatch.delattr(learners, "registry", raising=False)  # set by an earlier import
    with pytest.warns(DeprecationWarning, match="learners.registry moved to "):
        from learners import registry as old_registry
    assert old_registry is registry
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from learners.learner import Learner
        from learners.registry import build_learner
    from learners.methods.learner import Learner as new_learner

    assert (Learner, build_learner) == (new_learner, registry.build_learner)


@pytest.mark.slow
def test_an_old_script_runs_and_is_told_where_each_module_went():
    """A user's script of 0.1.0: the warning names its own line (shown by default there)."""
    code = (
        "from learners.registry import build_learner, learner_config\n"
        "import learners.checkpoint_file as c\n"
        "learner = build_learner(learner_config('protonet', width=0.125, image_size=28))\n"
        "print(type(learner).__module__, c.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["learners.methods.protonet", "learners.training.checkpoint_file"]
    assert "<string>:1: DeprecationWarning: learners.registry moved to learners.methods." in (
        done.stderr
    )
    assert "<string>:2: DeprecationWarning: learners.checkpoint_file moved to " in done.stderr


def test_episodes_old_paths_still_answer_beside_the_learners_table():
    sys.modules.pop("episodes.dataset_spec", None)
    with pytest.warns(DeprecationWarning, match="episodes.dataset_spec moved to "):
        module = importlib.import_module("episodes.dataset_spec")
    assert module is importlib.import_module("episodes.records.dataset_spec")
