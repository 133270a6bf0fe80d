"""`python -m splits make`: one interface for the split methods, flags from their parameter
dataclasses, shared inputs defined once, checks before writing, and the old command names."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from episodes.records.split_file import SplitFile, read_split_file
from episodes.util.cli_style import command_parser
from episodes.util.config_flags import add_config_arguments, config_field, config_from_args
from splits import atg, make, published, semantic
from splits import random as random_cli
from splits.methods import get_method, method_class, method_names, register_method
from splits.methods.random.algorithm import random_split
from splits.methods.semantic.algorithm import HierarchyError
from splits.split_method import SplitInputs, SplitMethod
from tests.fixtures.paths import REPO
from tests.fixtures.split_inputs import NAMES, write_split_inputs

QUICK_ATG = ["--iterations", "300", "--restarts", "2", "--quiet"]


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """A converted-dataset spec folder, a name list and class embeddings of the same 30 classes."""
    return write_split_inputs(tmp_path)


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ----------------------------------------------------------------------------------------------
# Flags from a parameter dataclass


@dataclass(frozen=True)
class Demo:
    ways: int = config_field(help="ways")
    rate: float | None = config_field(None, help="rate")
    mode: str = config_field("a", choices=("a", "b"), help="mode")
    strict: bool = config_field(False, help="strict")
    shuffle: bool = config_field(True, help="shuffle")
    fractions: tuple[float, float, float] = config_field((0.6, 0.2, 0.2), help="fractions")
    roots: tuple[str, ...] = config_field(("x",), help="roots", renamed_from=("--root",))
    lam: float = config_field(1.0, flag="--lambda", help="weight")

    def __post_init__(self) -> None:
        if self.ways < 1:
            raise ValueError(f"ways must be >= 1, got {self.ways}")


def _demo_parser():
    parser = command_parser("demo")
    add_config_arguments(parser.add_argument_group("demo"), Demo)
    return parser


def test_flags_follow_the_field_types_and_defaults(capsys):
    args = _demo_parser().parse_args(["--ways", "5"])
    assert config_from_args(Demo, args) == Demo(ways=5)
    given = "--ways 3 --rate 0.5 --mode b --strict --no-shuffle --fractions 0.5 0.25 0.25"
    given += " --root y z --lambda 2"
    demo = config_from_args(Demo, _demo_parser().parse_args(given.split()))
    assert demo == Demo(3, 0.5, "b", True, False, (0.5, 0.25, 0.25), ("y", "z"), 2.0)
    assert isinstance(demo.fractions, tuple) and isinstance(demo.roots, tuple)
    assert "note: --root is now --roots" in capsys.readouterr().err
    help_text = _demo_parser().format_help()
    assert "--lambda" in help_text and "(default 0.6 0.2 0.2)" in help_text
    for bad in (["--mode", "c", "--ways", "1"], [], ["--ways", "1", "--fractions", "1", "0"]):
        with pytest.raises(SystemExit):
            _demo_parser().parse_args(bad)
    with pytest.raises(ValueError, match="ways must be >= 1"):
        config_from_args(Demo, _demo_parser().parse_args(["--ways", "0"]))


def test_unmappable_fields_are_refused():
    with pytest.raises(TypeError, match="immutable"):
        config_field({"a": 1}, help="a dict")

    @dataclass(frozen=True)
    class Odd:
        table: dict[str, int] = config_field(None, help="no flag for a dict")

    with pytest.raises(TypeError, match="no flag type for"):
        add_config_arguments(command_parser("odd"), Odd)


def test_the_old_parameter_flags_names_still_work_with_a_warning():
    import splits.parameter_flags as old

    with pytest.warns(DeprecationWarning, match="parameter moved to .*config_field.*0.3.0"):
        parameter = old.parameter
    assert parameter is config_field
    with pytest.warns(DeprecationWarning, match="setting moved to"):
        assert old.setting(3, help="x").metadata["cli"] is False
    with pytest.warns(DeprecationWarning, match="add_parameter_arguments moved to"):
        parser = command_parser("demo")
        old.add_parameter_arguments(parser, Demo, "demo")
    with pytest.warns(DeprecationWarning, match="parameters_from_args moved to"):
        assert old.parameters_from_args(Demo, parser.parse_args(["--ways", "2"])) == Demo(ways=2)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        old.nothing  # noqa: B018


# ----------------------------------------------------------------------------------------------
# The registry and the Python API


def test_every_method_is_registered_by_its_module_name():
    assert method_names() == ["atg", "published", "random", "semantic"]
    shared = {o for a in make.build_parser()._actions for o in a.option_strings}
    for name in method_names():
        cls = method_class(name)
        assert issubclass(cls, SplitMethod) and cls.name == name and cls.summary
        assert dataclasses.is_dataclass(cls.Parameters)
        assert cls.Parameters.__dataclass_params__.frozen
        assert all(f.metadata.get("help") for f in dataclasses.fields(cls.Parameters))
        own = {o for a in make.build_parser(name)._actions for o in a.option_strings} - shared
        assert own, name  # the method's flags are added on top of the shared ones
    with pytest.raises(ValueError, match="unknown split method 'nope': expected one of atg, "):
        method_class("nope")

    class Misnamed(SplitMethod):
        name = "other"

    with pytest.raises(TypeError, match="named 'other' in module"):
        register_method(Misnamed)


@pytest.mark.slow
def test_python_api_makes_the_same_split_as_the_functions(inputs):
    method = get_method("random", fractions=(0.7, 0.15, 0.15))
    split = method.make(SplitInputs(class_names=inputs["names"], seed=2))
    assert split == random_split(NAMES, (0.7, 0.15, 0.15), 2, "names")
    by_spec = method.make(SplitInputs(dataset=inputs["dataset"], seed=2))
    assert by_spec.dataset == "toyset" and by_spec.train == split.train
    sweep = get_method("atg", target_divergences=(0.04, 0.32), iterations=300, restarts=2)
    made = sweep.make(SplitInputs(embeddings=inputs["embeddings"]))
    assert [s.parameters["R"] for s in made] == [0.04, 0.32]
    one = get_method("atg", target_divergences=(0.32,), iterations=300, restarts=2)
    single = one.make(SplitInputs(embeddings=inputs["embeddings"]))
    assert isinstance(single, SplitFile) and single.to_json() == made[1].to_json()


def test_parameters_are_validated_when_a_method_is_built():
    with pytest.raises(ValueError, match="must sum to 1"):
        get_method("random", fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="R must be a finite number >= 0"):
        get_method("atg", target_divergences=(0.3, -1.0))
    with pytest.raises(HierarchyError, match="--preset apply to --kind superclass"):
        get_method("semantic", kind="dag", preset="fc100")
    with pytest.raises(ValueError, match="no published split 'x/y'"):
        get_method("published", name="x/y")
    params = method_class("random").Parameters()
    with pytest.raises(TypeError, match="not both"):
        get_method("random", params, fractions=(1.0, 0.0, 0.0))
    with pytest.raises(TypeError, match="parameters must be RandomParameters"):
        get_method("random", method_class("atg").Parameters(target_divergences=(0.1,)))


# ----------------------------------------------------------------------------------------------
# The command


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--method", "random", "--class-names", "NAMES", "--embeddings", "EMB"], "--embeddings is not an input of --method random"),
        (["--method", "random", "--dataset", "DATASET", "--class-names", "NAMES"], "--dataset DIR or --class-names FILE, not both"),
        (["--method", "random"], "no classes to split"),
        (["--method", "random", "--dataset", "DATASET", "--dataset", "DATASET"], "--dataset given 2 times"),
        (["--method", "random", "--class-names", "NAMES", "--fractions", "0.5", "0.5", "0.5"], "must sum to 1"),
        (["--method", "atg", "--dataset", "DATASET", "--divergence", "0.3"], "needs --embeddings"),
        (["--method", "atg", "--embeddings", "EMB", "--divergence", "0.1", "0.3", "--output", "OUT/x.json"], "is one file but 2 split files"),
        (["--method", "atg", "--embeddings", "EMB", "--divergence", "100", *QUICK_ATG], "R=100 is outside the reachable range"),
        (["--method", "semantic", "--kind", "dag", "--dataset", "DATASET", "--preset", "fc100"], "--preset apply to --kind superclass"),
        (["--method", "semantic", "--kind", "superclass", "--hierarchy", "builtin:cifar100"], "takes one of --preset, --assignment or --counts"),
        (["--method", "semantic", "--kind", "superclass", "--hierarchy", "builtin:cifar100", "--counts", "12", "4", "4"], "--counts needs --seed or --ordered"),
        (["--method", "semantic", "--kind", "dag", "--hierarchy", "builtin:cifar100", "--dataset", "DATASET"], "--dataset DIR or --hierarchy FILE, not both"),
        (["--method", "semantic", "--kind", "dag", "--dataset", "DATASET"], "has no class DAG"),
        (["--method", "published", "--name", "nope"], "no published split 'nope'"),
        (["--method", "published", "--name", "atg/cifar100_D0.32", "--embeddings", "EMB"], "--embeddings is not an input of --method published"),
    ],
)  # fmt: skip
def test_bad_invocations_end_in_one_line_and_write_nothing(
    inputs, tmp_path, monkeypatch, capsys, argv, message
):
    monkeypatch.chdir(tmp_path)  # the default output folder, splits/, would land here
    paths = {"DATASET": inputs["dataset"], "NAMES": inputs["names"], "EMB": inputs["embeddings"]}
    given = [str(paths.get(a, a)).replace("OUT", str(tmp_path / "out")) for a in argv]
    assert make.main(given) == 2
    assert message in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "splits").exists() and not (tmp_path / "out").exists()


def test_default_output_is_splits_dataset_and_the_method_file_name(inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert make.main(["--method", "random", "--dataset", str(inputs["dataset"])]) == 0
    assert read_split_file("splits/toyset/random_seed0.json").dataset == "toyset"
    fc100 = ["--kind", "superclass", "--hierarchy", "builtin:cifar100", "--preset", "fc100"]
    assert make.main(["--method", "semantic", *fc100, "--dataset-name", "c100"]) == 0
    assert read_split_file("splits/c100/semantic_superclass_fc100.json").source.startswith("FC100")
    assert make.main(["--method", "published", "--name", "meta_dataset/omniglot"]) == 0
    assert Path("splits/omniglot/meta_dataset_omniglot.json").is_file()
    argv = ["--method", "atg", "--embeddings", str(inputs["embeddings"]), "--divergence", "0.32"]
    assert make.main([*argv, "--dataset", str(inputs["dataset"]), *QUICK_ATG]) == 0
    assert read_split_file("splits/toyset/atg_symmetric_kl_R0.32_seed0.json").method == "atg"
    # A folder --output takes the method's file names; a .json path is the file itself.
    assert make.main(["--method", "random", "--class-names", str(inputs["names"]), "--seed", "4",
                      "--output", "mine"]) == 0  # fmt: skip
    assert read_split_file("mine/random_seed4.json").dataset == "names"


@pytest.mark.slow
def test_old_names_and_spellings_write_the_same_bytes_with_notes(inputs, tmp_path, capsys):
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    runs = [
        (
            random_cli.main,
            ["--classes-from", str(inputs["dataset"]), "--fractions", "0.7", "0.15", "0.15"]
            + ["--seed", "3", "--output", str(old_dir / "r.json")],
            ["--method", "random", "--dataset", str(inputs["dataset"])]
            + ["--fractions", "0.7", "0.15", "0.15", "--seed", "3", "--output", str(new_dir / "r.json")],
            ["python -m splits.random is now", "--classes-from is now --class-names"],
        ),
        (
            semantic.main,
            ["superclass", "--hierarchy", "builtin:cifar100", "--counts", "12", "4", "4"]
            + ["--seed", "1", "--dataset", "c100", "--output", str(old_dir / "s.json")],
            ["--method", "semantic", "--kind", "superclass", "--hierarchy", "builtin:cifar100"]
            + ["--counts", "12", "4", "4", "--seed", "1", "--dataset-name", "c100"]
            + ["--output", str(new_dir / "s.json")],
            ["python -m splits.semantic is now", "--dataset NAME of python -m splits.semantic"],
        ),
        (
            atg.main,
            ["--embeddings", str(inputs["embeddings"]), "--sweep", "0.04", "0.32", *QUICK_ATG]
            + ["--dataset", "toy", "--class-names-from", str(inputs["names"])]
            + ["--output-dir", str(old_dir)],
            ["--method", "atg", "--embeddings", str(inputs["embeddings"]), "--divergence", "0.04"]
            + ["0.32", *QUICK_ATG, "--dataset-name", "toy", "--class-names", str(inputs["names"])]
            + ["--output", str(new_dir)],
            ["--sweep is now --divergence", "--output-dir is now --output",
             "--class-names-from is now --class-names"],
        ),
        (
            published.main,
            ["show", "atg/cifar100_D0.32", "--output", str(old_dir / "p.json")],
            ["--method", "published", "--name", "atg/cifar100_D0.32", "--output", str(new_dir / "p.json")],
            ["python -m splits.published show --output is now python -m splits make --method "
             "published; the old name goes in version 0.3.0"],
        ),
    ]  # fmt: skip
    for old, old_argv, new_argv, notes in runs:
        assert old(old_argv) == 0
        err = capsys.readouterr().err
        assert all(f"note: {n}" in err or n in err for n in notes), err
        assert all(line.startswith("note: ") for line in err.splitlines()), err
        assert make.main(new_argv) == 0
        assert capsys.readouterr().err == ""
    written = sorted(p.name for p in old_dir.iterdir())
    assert written == sorted(p.name for p in new_dir.iterdir()) and len(written) == 5
    for name in written:
        assert (old_dir / name).read_bytes() == (new_dir / name).read_bytes(), name
    assert read_split_file(old_dir / "atg_symmetric_kl_R0.32_seed0.json").dataset == "toy"


def test_old_dataset_name_spelling_is_only_read_under_the_old_names(
    inputs, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    argv = ["--class-names", str(inputs["names"]), "--dataset", "toy"]
    assert make.main(["--method", "random", *argv, "--output", str(tmp_path / "n.json")]) == 2
    assert "not both" in _one_line(capsys.readouterr().err)
    assert make.main(["--method", "random", "--dataset", "toy"]) == 2
    assert "--dataset toy: no dataset spec found" in _one_line(capsys.readouterr().err)
    assert random_cli.main([*argv, "--output", str(tmp_path / "o.json")]) == 0
    assert read_split_file(tmp_path / "o.json").dataset == "toy"


def test_help_lists_the_methods_and_each_methods_flags():
    assert "methods: atg, published, random, semantic" in make.build_parser().format_help()
    atg_help = make.build_parser("atg").format_help()
    assert all(
        flag in atg_help for flag in ("--divergence R", "--penalty-weight", "--measure", "--seed")
    )
    assert "--sweep" not in atg_help and "--output-dir" not in atg_help
    assert make.build_parser("atg").format_help() == atg.build_parser().format_help()


def test_python_m_splits_make_runs_the_command(inputs, tmp_path):
    out = tmp_path / "r.json"
    run = [sys.executable, "-m", "splits", "make", "--method", "random"]
    done = subprocess.run(
        [*run, "--class-names", str(inputs["names"]), "--output", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"random split seed 0: 18/6/6 -> {out}"
    bare = subprocess.run(
        [sys.executable, "-m", "splits"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert bare.returncode == 2 and "python -m splits make --method {atg," in bare.stderr
    assert json.loads(out.read_text())["method"] == "random"
