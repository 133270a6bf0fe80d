"""The one layer from config dataclasses to flags (episodes.util.config_flags, issue 35 item 1):
what a field declares becomes its flag, its help and its check, and every config of the
toolkit that is a command's options (sampler, sampling modes, sources, download, split methods,
the learners' shared and per-method options) is declared through it."""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass

import pytest

from episodes.util.cli_errors import UsageError, UserError
from episodes.util.cli_style import command_parser
from episodes.util.config_flags import (
    ConfigError,
    add_config_arguments,
    check_fields,
    config_field,
    config_from_args,
    flag_fields,
    flag_of,
    given_values,
)


@dataclass(frozen=True)
class Toy:
    """Every kind of field the layer maps."""

    ways: int = config_field(help="classes per episode", minimum=1)
    rate: float | None = config_field(None, help="a rate in (0, 1)", above=0, below=1)
    mode: str = config_field("a", choices=("a", "b"), help="a mode")
    strict: bool = config_field(False, help="be strict")
    shuffle: bool = config_field(True, help="shuffle first")
    fractions: tuple[float, float, float] = config_field((0.6, 0.2, 0.2), help="three fractions")
    roots: tuple[str, ...] = config_field(
        ("x",), help="one or more roots", renamed_from=("--root",)
    )
    lam: float = config_field(1.0, flag="--weight", help="a weight", minimum=0)
    seed: int = config_field(0, help="set by the command", cli=False)

    def __post_init__(self) -> None:
        check_fields(self)


def _parser(**options) -> argparse.ArgumentParser:
    parser = command_parser("toy")
    add_config_arguments(parser.add_argument_group("toy"), Toy, **options)
    return parser


def test_each_field_is_one_flag_typed_by_its_annotation(capsys):
    parser = _parser()
    flags = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}
    assert flags == {
        "--ways", "--rate", "--mode", "--strict", "--shuffle", "--no-shuffle", "--fractions",
        "--roots", "--weight",
    }  # fmt: skip
    assert flag_of(dataclasses.fields(Toy)[7]) == "--weight" and flag_of("knn_k") == "--knn-k"
    assert [f.name for f in flag_fields(Toy)] == [f.name for f in dataclasses.fields(Toy)][:-1]
    given = "--ways 3 --rate 0.5 --mode b --strict --no-shuffle --fractions 0.5 0.25 0.25"
    config = config_from_args(Toy, parser.parse_args([*given.split(), "--root", "y", "z"]))
    assert config == Toy(3, 0.5, "b", True, False, (0.5, 0.25, 0.25), ("y", "z"))
    assert isinstance(config.fractions, tuple) and isinstance(config.roots, tuple)
    assert capsys.readouterr().err == (
        "note: --root is now --roots; the old spelling goes in version 0.3.0\n"
    )


def test_flags_not_given_leave_the_dataclass_defaults():
    args = _parser(dest_prefix="toy_").parse_args(["--ways", "2"])
    assert vars(args) == {"toy_ways": 2}  # nothing else: the defaults are the dataclass's
    assert given_values(Toy, args, dest_prefix="toy_") == {"ways": 2}
    assert config_from_args(Toy, args, dest_prefix="toy_", seed=7) == Toy(2, seed=7)


def test_required_fields_are_required_flags_unless_asked_otherwise():
    with pytest.raises(SystemExit):
        _parser().parse_args([])
    assert vars(_parser(require_missing=False).parse_args([])) == {}


def test_help_text_carries_the_help_choices_and_defaults():
    text = _parser().format_help()
    assert "classes per episode" in text and "{a,b}" in text
    assert "(default 0.6 0.2 0.2)" in text and "(default 1.0)" in text
    assert "turn --shuffle off" in text


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(ways=0), "--ways 0: expected an integer >= 1"),
        (dict(ways=2.5), "--ways 2.5: expected an integer >= 1"),
        (dict(ways=True), "--ways True: expected an integer >= 1"),
        (dict(ways=2, rate=1.0), "--rate 1.0: expected a number in (0, 1)"),
        (dict(ways=2, rate=math.nan), "--rate nan: expected a finite number"),
        (dict(ways=2, mode="c"), "--mode c: expected one of a, b"),
        (dict(ways=2, strict="yes"), "--strict yes: expected true or false"),
        (dict(ways=2, fractions=(0.5, 0.5)), "--fractions 0.5 0.5: expected 3 numbers"),
        (dict(ways=2, roots=()), "--roots : expected one or more values"),
        (dict(ways=2, lam=-1), "--weight -1: expected a number >= 0"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(values, message):
    with pytest.raises(ConfigError) as raised:
        Toy(**values)
    assert str(raised.value) == message
    assert isinstance(raised.value, UsageError | UserError) and isinstance(raised.value, ValueError)


def test_values_are_stored_in_their_type():
    toy = Toy(2, lam=3, fractions=[0.5, 0.25, 0.25])
    assert toy.lam == 3.0 and isinstance(toy.lam, float)
    assert toy.fractions == (0.5, 0.25, 0.25)


def test_the_learners_options_are_checked_by_the_layer():
    """The learners' shared and per-method options (learners.methods.config_fields.option) are
    config_fields: a bad value is refused in the layer's words, as LearnerConfigError (a user
    fault), and the learners' own key `at_evaluation` rides in the metadata."""
    from learners import LearnerConfigError
    from learners.methods.learner_config import LearnerConfig
    from learners.methods.multiclass import MulticlassConfig

    with pytest.raises(LearnerConfigError, match=r"^--lr 0.0: expected a number > 0$"):
        LearnerConfig(lr=0.0).check()
    with pytest.raises(
        LearnerConfigError, match=r"^--optimizer rmsprop: expected one of adam, sgd$"
    ):
        LearnerConfig(optimizer="rmsprop").check()
    assert issubclass(LearnerConfigError, UserError)
    knn_k = {f.name: f for f in dataclasses.fields(MulticlassConfig)}["knn_k"]
    assert knn_k.metadata["at_evaluation"] is True
    config = LearnerConfig(lr=1)  # an integer rate stays as given (a run's config.json)
    config.check()
    assert config.lr == 1 and isinstance(config.lr, int)


def test_a_type_no_flag_can_hold_is_refused():
    @dataclass(frozen=True)
    class Odd:
        table: dict[str, int] | None = config_field(None, help="a dict")

    with pytest.raises(TypeError, match="no flag type"):
        add_config_arguments(command_parser("odd"), Odd)
    with pytest.raises(TypeError, match="immutable"):
        config_field({"a": 1}, help="a dict default")


def _configs():
    from beam_pipelines.download import DownloadConfig
    from beam_pipelines.sources import SOURCES
    from episodes.sampling.modes import mode_class, mode_names
    from episodes.sampling.sampler_config import SamplerConfig
    from splits.methods import method_class, method_names

    yield SamplerConfig
    yield DownloadConfig
    yield from (mode_class(name).Options for name in mode_names())
    yield from {SOURCES[name].config_class for name in sorted(SOURCES)}
    yield from (method_class(name).Parameters for name in method_names())
    yield from _learner_configs()


def _learner_configs():
    from learners.methods.learner_config import LearnerConfig
    from learners.methods.registry import method_option_classes

    yield LearnerConfig
    yield from method_option_classes()


@pytest.mark.parametrize("config", list(_configs()), ids=lambda c: c.__name__)
def test_every_command_config_is_declared_through_the_layer(config):
    """Each field of the sampler's, the modes', the sources', the download's and the split
    methods' configs says its help, and its flag is what the layer makes of it."""
    for field in dataclasses.fields(config):
        assert field.metadata.get("help"), f"{config.__name__}.{field.name} has no help"
        assert "cli" in field.metadata, f"{config.__name__}.{field.name}: not a config_field"
    parser = command_parser("any")
    add_config_arguments(parser, config, require_missing=False)
    flags = {o for a in parser._actions for o in a.option_strings}
    assert {flag_of(f) for f in flag_fields(config)} <= flags


def test_every_sampler_option_has_help_and_its_choices():
    from episodes.sampling import episode_cli
    from episodes.sampling.sampler_config import BASE_NOVEL_DRAWS, MODES, POOL_QUERY

    parser = command_parser("sampler")
    episode_cli.add_sampler_arguments(parser)
    actions = {a.dest: a for a in parser._actions if a.dest.startswith("sampler_")}
    assert len({a.dest for a in actions.values()}) == 21
    assert all(a.help and "(default None)" not in a.help for a in actions.values())
    assert actions["sampler_mode"].choices == MODES
    assert actions["sampler_pool_query"].choices == POOL_QUERY
    assert actions["sampler_base_novel_draw"].choices == BASE_NOVEL_DRAWS
