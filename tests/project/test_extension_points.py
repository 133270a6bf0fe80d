"""CONTRIBUTING.md's promise: a source, a learner, a split method or a sampling mode is added by
writing its one module (plus, for a source, its fixture and its test), never by editing a list
elsewhere.

Each test writes a throw-away module into a temporary folder put on its package's `__path__`,
then finds it through the registry and uses it through the real command, flags included. The
last tests check that every existing one has the files CONTRIBUTING.md lists.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import tests.beam_pipelines.sources
from beam_pipelines import sources as source_registry
from beam_pipelines.sources.base import Source
from episodes.records.dataset_spec import load_spec
from episodes.records.split_file import SplitFile
from episodes.util.cli_errors import UserError
from tests.fixtures.learner_runs import TINY
from tests.fixtures.paths import REPO
from tests.fixtures.source_test_case import SourceTestCase


def _plant(monkeypatch, tmp_path: Path, package, name: str, code: str) -> str:
    """Write `code` as module `name` in a folder added to `package`'s search path; it and the
    module are gone after the test."""
    folder = tmp_path / f"extra_{package.__name__.replace('.', '_')}"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(code))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    module = f"{package.__name__}.{name}"
    monkeypatch.setitem(sys.modules, module, None)  # undone last: the import is forgotten
    monkeypatch.delitem(sys.modules, module)
    return module


TOY_SOURCE = '''
    """A throw-away source: `images/<class>/*.png`, split by seed (no published list)."""

    from dataclasses import dataclass

    from beam_pipelines.sources._lib.listed_split_source import ClassFolderSource
    from beam_pipelines.sources._lib.published_splits import ListedSplitConfig
    from beam_pipelines.sources._lib.source_config import option


    @dataclass(frozen=True)
    class ToyFoldersConfig(ListedSplitConfig):
        toy_folders_note: str = option("", "an option of its own, recorded nowhere")


    class ToyFoldersSource(ClassFolderSource):
        name = "toy_folders"
        layout = "images/<class>/*.png"
        config_class = ToyFoldersConfig
        meta_dataset_pixels = False
'''


def test_a_source_is_one_module(monkeypatch, tmp_path, capsys):
    from beam_pipelines import convert

    module = _plant(monkeypatch, tmp_path, source_registry, "toy_folders", TOY_SOURCE)
    found = source_registry._discover()
    assert found["toy_folders"].__module__ == module
    monkeypatch.setitem(source_registry.SOURCES, "toy_folders", found["toy_folders"])
    assert "--toy-folders-note" in convert.build_parser("toy_folders").format_help()
    assert "toy_folders" in convert.list_sources()

    raw = tmp_path / "raw"
    rng = np.random.default_rng(0)
    for c in range(10):
        (raw / "images" / f"class{c}").mkdir(parents=True)
        for k in range(2):
            pixels = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(raw / "images" / f"class{c}" / f"{k}.png")
    out = tmp_path / "out"
    argv = ["--source", "toy_folders", "--input", str(raw), "--output", str(out)]
    assert convert.main([*argv, "--toy-folders-note", "x", "--split-seed", "3"]) == 0
    spec = load_spec(out)
    assert sorted(spec.class_names) == [f"class{c}" for c in range(10)]
    assert spec.total_images == 20
    assert [len(spec.classes(s)) for s in ("train", "valid", "test")] == [8, 1, 1]
    capsys.readouterr()


TOY_SPLIT_METHOD = '''
    """A throw-away split method: the first classes in sorted order to train, the rest to test."""

    from dataclasses import dataclass

    from episodes.records.split_file import SplitFile
    from splits.methods import register_method
    from episodes.util.config_flags import check_fields, config_field
    from splits.split_method import PlannedSplit, SplitInputs, SplitMethod


    @dataclass(frozen=True)
    class ToyHeadParameters:
        train_classes: int = config_field(
            2, minimum=1, help="how many classes (sorted by name) train"
        )

        def __post_init__(self):
            check_fields(self)  # the declared type and bounds, in one line naming the flag


    @register_method
    class ToyHeadMethod(SplitMethod):
        name = "toy_head"
        summary = "the first classes by name to train, the rest to test"
        Parameters = ToyHeadParameters
        reads = ("class_names",)

        def plan(self, inputs: SplitInputs) -> list[PlannedSplit]:
            names = sorted(inputs.classes().names)
            k = self.parameters.train_classes
            split = SplitFile(
                dataset=inputs.name("toy"), method=self.name, train=names[:k], test=names[k:]
            )
            return [PlannedSplit(split.dataset, "toy_head.json", lambda: split)]

        def describe(self, split, seconds):
            return f"toy head: {len(split.train)} train classes"
'''


def test_a_split_method_is_one_module(monkeypatch, tmp_path, capsys):
    import splits.methods
    from splits import make

    _plant(monkeypatch, tmp_path, splits.methods, "toy_head", TOY_SPLIT_METHOD)
    monkeypatch.setattr(splits.methods.METHODS, "classes", dict(splits.methods.METHODS.classes))
    assert "toy_head" in splits.methods.method_names()
    assert "--train-classes" in make.build_parser("toy_head").format_help()

    names = tmp_path / "names.txt"
    names.write_text("delta\nalpha\ncharlie\nbravo\n")
    out = tmp_path / "split.json"
    argv = ["--method", "toy_head", "--class-names", str(names), "--output", str(out)]
    assert make.main([*argv, "--train-classes", "3"]) == 0
    split = SplitFile.load(out)
    assert (split.method, split.train, split.test) == (
        "toy_head",
        ["alpha", "bravo", "charlie"],
        ["delta"],
    )
    assert make.main([*argv, "--train-classes", "0", "--overwrite"]) == 2
    assert "--train-classes 0: expected an integer >= 1" in capsys.readouterr().err


TOY_SAMPLING_MODE = '''
    """A throw-away sampling mode: Meta-Dataset's episodes 0 .. PERIOD-1, over and over."""

    from dataclasses import dataclass, replace

    from episodes.sampling.modes import register_mode
    from episodes.sampling.sampler import EpisodeSampler, EpisodeStream
    from episodes.sampling.sampling_mode import SamplingMode, mode_option


    @dataclass(frozen=True)
    class ToyRepeatOptions:
        toy_period: int = mode_option(help="episodes before the stream repeats", metavar="N")


    class Repeating(EpisodeStream):
        def __init__(self, inner, period):
            self.inner, self.period = inner, period

        def episode(self, index):
            return replace(self.inner.episode(index % self.period), episode_index=index)


    @register_mode
    class ToyRepeatMode(SamplingMode):
        name = "toy_repeat"
        summary = "a few episodes, repeated"
        Options = ToyRepeatOptions
        recorded = ("toy_period",)

        def sampler(self, specs, split, config, seed):
            inner = EpisodeSampler(specs[0], split, config, seed)
            return Repeating(inner, self.options.toy_period)

        def record(self):
            return {"toy_period": self.options.toy_period}
'''


def test_a_sampling_mode_is_one_module(monkeypatch, tmp_path, capsys):
    import episodes.sampling.modes as modes
    from beam_pipelines import episodes as shards_cli
    from episodes import read
    from tests.fixtures.reader_datasets import write_dataset

    for name in modes.mode_names():  # the shipped modes registered first, in the kept registry
        modes.mode_class(name)
    _plant(monkeypatch, tmp_path, modes, "toy_repeat", TOY_SAMPLING_MODE)
    monkeypatch.setattr(modes.MODES, "classes", dict(modes.MODES.classes))
    assert "toy_repeat" in modes.mode_names()
    for parser in (read.build_parser(), shards_cli.build_parser()):
        assert "--toy-period" in parser.format_help()
    toy = write_dataset(tmp_path / "toy")
    argv = ["--dataset", str(toy.root), "--split", "test", "--episodes", "4", "--ways", "2"]
    argv += ["--no-use-dag-hierarchy", "--no-use-bilevel-hierarchy", "--decode-processes", "0"]
    assert read.main([*argv, "--toy-period", "2"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if "  name" not in line]
    table = [line.split()[:2] for line in printed if line.startswith("      ")]
    assert table[:4] == table[4:8] and table[:2] != table[2:4]  # episodes 2, 3 repeat 0, 1
    mode = modes.get_mode("toy_repeat", toy_period=2)
    assert modes.manifest_fields(mode) == {"lambda": None, "base_split": None, "toy_period": 2}
    with pytest.raises(UserError, match="options of different sampling modes"):
        read.main([*argv, "--toy-period", "2", "--lambda", "0.5"])


TOY_LEARNER = '''
    """A throw-away learner: prototypes compared by cosine similarity times a learnt scale."""

    from dataclasses import dataclass

    import torch
    import torch.nn.functional as F

    from learners.methods.config_fields import MethodConfig, option
    from learners.methods.learner import Learner, embed_episode
    from learners.nn.prototypes import class_prototypes
    from learners.methods.registry import register_learner


    @dataclass
    class ToyCosineConfig(MethodConfig):
        toy_initial_scale: float = option(10.0, "the cosine scale before training", above=0.0)


    @register_learner("toy_cosine", options=ToyCosineConfig)
    class ToyCosine(Learner):
        def add_modules(self) -> None:
            self.scale = torch.nn.Parameter(torch.tensor(self.options.toy_initial_scale))

        def query_logits(self, ep):
            support, query = embed_episode(self.backbone, ep)
            prototypes = class_prototypes(support, ep.support_labels, ep.ways)
            return self.scale * F.normalize(query, dim=1) @ F.normalize(prototypes, dim=1).T
'''


def test_a_learner_is_one_module(monkeypatch, tmp_path, capsys):
    import learners.methods
    from learners import train
    from learners.methods import registry
    from learners.training.checkpoint_file import load_checkpoint_learner

    registry.registered()  # the shipped methods registered first, in the registry kept after
    _plant(monkeypatch, tmp_path, learners.methods, "toy_cosine", TOY_LEARNER)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    monkeypatch.setattr(registry, "_SPELLINGS", dict(registry._SPELLINGS))
    monkeypatch.setattr(registry, "_discovered", False)
    assert "toy_cosine" in registry.method_names()
    assert "--toy-initial-scale" in train.build_parser().format_help()

    run = tmp_path / "run"
    argv = ["--method", "toy_cosine", "--synthetic", "--steps", "3", "--output", str(run)]
    assert train.main([*argv, *TINY, "--validation-episodes", "0", "--toy-initial-scale", "0"]) == 2
    assert "--toy-initial-scale" in capsys.readouterr().err
    assert train.main([*argv, *TINY, "--validation-episodes", "0", "--toy-initial-scale", "4"]) == 0
    learner, _, step = load_checkpoint_learner(run)
    assert step == 3
    assert type(learner).__name__ == "ToyCosine" and learner.options.toy_initial_scale == 4.0
    assert float(learner.scale.detach()) != 4.0  # the optimiser covers the module it added


# ---------------------------------------------------------------------------------------------
# The existing ones follow CONTRIBUTING.md


def _source_test_cases() -> dict[type[Source], type[SourceTestCase]]:
    cases = {}
    for info in pkgutil.iter_modules(tests.beam_pipelines.sources.__path__):
        if info.name.startswith("test_"):
            module = importlib.import_module(f"tests.beam_pipelines.sources.{info.name}")
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, SourceTestCase) and obj is not SourceTestCase:
                    cases[obj.SOURCE] = obj
    return cases


def test_every_source_has_its_declared_test_and_its_fixture():
    cases = _source_test_cases()
    for name, source in source_registry.SOURCES.items():
        assert source in cases, (
            f"{name}: no SourceTestCase in tests/beam_pipelines/sources/test_*.py"
        )
        fixture = getattr(cases[source].FIXTURE, "func", cases[source].FIXTURE)
        assert fixture.__module__.startswith("tests.fixtures.raw."), (name, fixture.__module__)


def test_every_split_method_and_learner_module_registers_itself():
    """Each module of splits/methods/ and learners/methods/ registers what it defines."""
    import splits.methods
    from learners.methods import registry

    for name in splits.methods.method_names():
        module = splits.methods.method_class(name).__module__
        assert module in (f"splits.methods.{name}", f"splits.methods.{name}.method"), module
    modules = {entry.learner.__module__ for entry in registry.registered().values()}
    package = REPO / "learners" / "methods"
    planted = {
        f"learners.methods.{p.stem}"
        for p in package.glob("*.py")
        if p.stem != "__init__" and p.stem not in registry.INTERFACE_MODULES
    }
    assert planted <= modules, planted - modules


def test_contributing_names_only_files_that_exist():
    """CONTRIBUTING.md names the module of each kind, and every concrete repository path it
    names (placeholders like <name> aside) exists."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    for template in (
        "beam_pipelines/sources/<name>.py",
        "tests/fixtures/raw/<name>.py",
        "tests/beam_pipelines/sources/test_<name>.py",
        "learners/methods/<name>.py",
        "splits/methods/<name>/method.py",
        "episodes/sampling/modes/<name>.py",
    ):
        assert f"`{template}`" in text, template
        assert (REPO / template[: template.index("<name>")].rsplit("/", 1)[0]).is_dir(), template
    named = set(re.findall(r"`([a-z_]+/[A-Za-z0-9_./]+)`", text))
    assert len(named) >= 10
    missing = sorted(n for n in named if not (REPO / n).exists())
    assert not missing, missing
