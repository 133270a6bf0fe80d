"""One contract for every split method (scikit-learn's `parametrize_with_checks`, for
`splits.methods`): each registered method declares a small case below, and every check runs on
every method. A method registered without a case fails `test_every_method_has_a_case`.

The checks: the interface (name, summary, frozen Parameters of config_fields, the inputs it
reads); a plan naming each file before any split is built, that `make` runs; train / valid / test disjoint and
non-empty where the method partitions; the same inputs give the same bytes (a fresh instance
too); a split survives its file; `python -m splits make` writes what the Python API makes; an
input the method does not read and a bad parameter end in one line before anything is written.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from episodes.records.split_file import SplitFile, read_split_file
from episodes.util.cli_errors import UserError
from splits import make
from splits.methods import get_method, method_class, method_names
from splits.split_method import PlannedSplit, SplitInputs, SplitMethod
from tests.fixtures.split_inputs import NAMES, write_split_inputs

INPUT_FIELDS = ("dataset", "class_names", "embeddings")


@dataclass(frozen=True)
class Case:
    """How to run one method: its parameters (keywords and the same as flags), its inputs
    (keywords of SplitInputs, values naming the `files` fixture's keys or plain values), the
    classes its splits must partition (None: it does not partition given classes), and a bad
    parameter value with a fragment of the one line that refuses it."""

    parameters: dict[str, Any]
    flags: dict[str, tuple[str, ...]]  # the same parameters as flags: flag -> its values
    inputs: dict[str, Any]
    partitions: list[str] | None
    bad: tuple[dict[str, Any], dict[str, tuple[str, ...]], str]
    unread_input: str | None = None  # an input of another method: refused by name


CASES = {
    "random": Case(
        parameters={"fractions": (0.6, 0.2, 0.2)},
        flags={"--fractions": ("0.6", "0.2", "0.2")},
        inputs={"class_names": "names", "seed": 3},
        partitions=NAMES,
        bad=({"fractions": (0.5, 0.5, 0.5)}, {"--fractions": ("0.5", "0.5", "0.5")}, "sum to 1"),
        unread_input="embeddings",
    ),
    "atg": Case(
        parameters={"target_divergences": (0.32,), "iterations": 300, "restarts": 2},
        flags={"--divergence": ("0.32",), "--iterations": ("300",), "--restarts": ("2",)},
        inputs={"embeddings": "embeddings"},
        partitions=NAMES,
        bad=({"target_divergences": (-1.0,)}, {"--divergence": ("-1",)}, "R must be a finite"),
    ),
    "semantic": Case(
        parameters={"kind": "superclass", "hierarchy": "builtin:cifar100", "preset": "fc100"},
        flags={
            "--kind": ("superclass",),
            "--hierarchy": ("builtin:cifar100",),
            "--preset": ("fc100",),
        },
        inputs={},
        partitions=None,  # the hierarchy's 100 classes, checked by count below
        bad=({"kind": "tree"}, {"--kind": ("tree",)}, "tree"),
        unread_input="embeddings",
    ),
    "published": Case(
        parameters={"name": "atg/cifar100_D0.32"},
        flags={"--name": ("atg/cifar100_D0.32",)},
        inputs={},
        partitions=None,
        bad=({"name": "nope/none"}, {"--name": ("nope/none",)}, "no published split 'nope/none'"),
        unread_input="embeddings",
    ),
}
EXPECTED_CLASSES = {"semantic": 100, "published": 100}  # CIFAR-100's classes, all split


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return write_split_inputs(tmp_path_factory.mktemp("contract"))


def _inputs(case: Case, files: dict[str, Path]) -> SplitInputs:
    values = {k: files.get(v, v) if isinstance(v, str) else v for k, v in case.inputs.items()}
    return SplitInputs(**values)


def _input_flags(case: Case, files: dict[str, Path]) -> list[str]:
    argv: list[str] = []
    for key, value in case.inputs.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag, str(files.get(value, value) if isinstance(value, str) else value)]
    return argv


def _argv(flags: dict[str, tuple[str, ...]]) -> list[str]:
    return [word for flag, values in flags.items() for word in (flag, *values)]


def _splits(made: SplitFile | list[SplitFile]) -> list[SplitFile]:
    return made if isinstance(made, list) else [made]


def _status(argv: list[str]) -> int:
    """`python -m splits make`'s exit status (argparse's refusals exit from inside main)."""
    try:
        return make.main(argv)
    except SystemExit as parse_exit:
        return int(parse_exit.code)


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


METHODS = method_names()
each_method = pytest.mark.parametrize("name", METHODS)


def test_every_method_has_a_case():
    assert sorted(CASES) == sorted(METHODS), "declare a Case for each registered split method"


@each_method
def test_the_interface(name):
    cls = method_class(name)
    assert issubclass(cls, SplitMethod) and cls.name == name and cls.summary.strip()
    assert dataclasses.is_dataclass(cls.Parameters) and cls.Parameters.__dataclass_params__.frozen
    for f in dataclasses.fields(cls.Parameters):
        assert f.metadata.get("help") and "cli" in f.metadata, f"{name}.{f.name}: config_field"
    assert set(cls.reads) <= set(INPUT_FIELDS)
    assert "make" not in vars(cls), "a method plans; SplitMethod.make runs the plan"


@each_method
def test_the_plan_names_each_file_and_builds_what_make_makes(name, files):
    """`plan` reads and checks the inputs and says which files it will write (the command
    refuses an existing one before any split is built); `make` runs exactly that plan."""
    case = CASES[name]
    method = get_method(name, **case.parameters)
    planned = method.plan(_inputs(case, files))
    assert planned and all(isinstance(p, PlannedSplit) for p in planned)
    assert all(p.file_name.endswith(".json") and p.dataset for p in planned)
    assert len({p.file_name for p in planned}) == len(planned)  # one file per split
    made = _splits(get_method(name, **case.parameters).make(_inputs(case, files)))
    assert [p.build().to_json() for p in planned] == [s.to_json() for s in made]


@each_method
def test_splits_are_disjoint_non_empty_and_cover_the_classes(name, files):
    case = CASES[name]
    for split in _splits(get_method(name, **case.parameters).make(_inputs(case, files))):
        parts = [split.train, split.valid, split.test]
        assert all(len(set(p)) == len(p) for p in parts)  # no class twice in one part
        assert not set(split.train) & set(split.valid)
        assert not set(split.train) & set(split.test)
        assert not set(split.valid) & set(split.test)
        assert split.train and split.test
        everything = sorted(set().union(*parts))
        if case.partitions is not None:
            assert everything == sorted(case.partitions)
        else:
            assert len(everything) == EXPECTED_CLASSES[name]


@each_method
def test_the_same_inputs_give_the_same_bytes(name, files):
    case = CASES[name]
    first = _splits(get_method(name, **case.parameters).make(_inputs(case, files)))
    again = _splits(get_method(name, **case.parameters).make(_inputs(case, files)))
    assert [s.to_json() for s in first] == [s.to_json() for s in again]


@each_method
def test_a_split_survives_its_file(name, files, tmp_path):
    case = CASES[name]
    for index, split in enumerate(
        _splits(get_method(name, **case.parameters).make(_inputs(case, files)))
    ):
        path = split.save(tmp_path / f"{index}.json")
        back = read_split_file(path)
        assert (back.train, back.valid, back.test) == (split.train, split.valid, split.test)
        assert json.loads(path.read_text()) == json.loads(split.to_json())


@each_method
def test_the_command_writes_what_the_api_makes(name, files, tmp_path, capsys):
    case = CASES[name]
    made = _splits(get_method(name, **case.parameters).make(_inputs(case, files)))[0]
    out = tmp_path / "split.json"
    argv = ["--method", name, *_argv(case.flags), *_input_flags(case, files)]
    argv += ["--output", str(out)]
    assert make.main(argv) == 0, capsys.readouterr().err
    written = read_split_file(out)
    assert (written.train, written.valid, written.test) == (made.train, made.valid, made.test)
    assert make.main(argv) == 2  # not overwritten without --overwrite
    assert "--overwrite" in _one_line(capsys.readouterr().err)


@each_method
def test_a_bad_parameter_is_one_line_before_anything_is_written(name, files, tmp_path, capsys):
    case = CASES[name]
    values, flags, fragment = case.bad
    with pytest.raises((UserError, ValueError), match=fragment.replace("(", r"\(")):
        get_method(name, **{**case.parameters, **values})
    out = tmp_path / "split.json"
    argv = ["--method", name, *_argv({**case.flags, **flags})]  # the bad value in place
    assert _status([*argv, *_input_flags(case, files), "--output", str(out)]) == 2
    assert fragment in _one_line(capsys.readouterr().err)
    assert not out.exists()


@each_method
def test_an_input_the_method_does_not_read_is_refused_by_name(name, files, tmp_path, capsys):
    case = CASES[name]
    if case.unread_input is None:
        pytest.skip(f"{name} reads every input kind it could be given")
    assert case.unread_input not in method_class(name).reads
    flag = "--" + case.unread_input.replace("_", "-")
    out = tmp_path / "split.json"
    argv = ["--method", name, *_argv(case.flags), *_input_flags(case, files)]
    argv += [flag, str(files[case.unread_input]), "--output", str(out)]
    assert make.main(argv) == 2
    assert f"{flag} is not an input of --method {name}" in _one_line(capsys.readouterr().err)
    assert not out.exists()
