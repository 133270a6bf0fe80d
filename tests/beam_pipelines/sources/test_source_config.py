"""Typed source options: one frozen dataclass per source, its fields the CLI flags (kebab-case,
old underscore spellings with a note), checked before any work; each flag declared once."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import ClassVar

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion.options import add_source_arguments, conversion_parser
from beam_pipelines.convert_all import build_parser as build_all_parser
from beam_pipelines.sources import SOURCES
from beam_pipelines.sources._lib.source_config import ConfigError, SourceConfig, flag_of, option
from beam_pipelines.sources.base import Source
from beam_pipelines.sources.ilsvrc import IlsvrcSource
from beam_pipelines.sources.quickdraw import QuickDrawConfig, QuickDrawSource

REQUIRED = ["--input", "raw", "--output", "out"]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_field_is_a_flag_and_no_flag_keeps_the_defaults(name):
    source_cls = SOURCES[name]
    parser = convert_cli.build_parser(name)
    flags = {o for action in parser._actions for o in action.option_strings}
    fields = source_cls.config_class.flag_fields()
    assert fields and {flag_of(f) for f in fields} <= flags
    assert all("_" not in flag for flag in flags if flag != "--direct_num_workers")
    args, rest = parser.parse_known_args(["--source", name, *REQUIRED])
    assert rest == []
    values = {"tfds_name": "x"} if name == "tfds" else {}
    config = source_cls.config_class.from_args(args, **values)
    assert config == source_cls.config_class(**values)
    assert dataclasses.is_dataclass(config) and config.__dataclass_params__.frozen


def test_flags_become_typed_fields_and_old_spellings_still_parse(capsys):
    parser = convert_cli.build_parser("quickdraw")
    argv = ["--source", "quickdraw", *REQUIRED, "--quickdraw_max_per_class", "3"]
    argv += ["--jpeg-quality", "80", "--random-split", "--split-seed=4"]
    source = QuickDrawSource.from_args(parser.parse_known_args(argv)[0])
    assert source.config == QuickDrawConfig(
        quickdraw_max_per_class=3, jpeg_quality=80, random_split=True, split_seed=4
    )
    assert source.image_options().jpeg_quality == 80
    assert capsys.readouterr().err.splitlines() == [
        "note: --quickdraw_max_per_class is now --quickdraw-max-per-class; "
        "the old spelling goes in version 0.3.0"
    ]
    ilsvrc = convert_cli.build_parser("ilsvrc_2012")
    for flag, expected in (
        ([], True),
        (["--no-ilsvrc-remove-duplicates"], False),
        (["--no-ilsvrc_remove_duplicates"], False),
        (["--ilsvrc_remove_duplicates"], True),
    ):
        args = ilsvrc.parse_known_args(["--source", "ilsvrc_2012", *REQUIRED, *flag])[0]
        assert IlsvrcSource.from_args(args).config.ilsvrc_remove_duplicates is expected


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(quickdraw_max_per_class=0), "--quickdraw-max-per-class 0: expected an integer >= 1"),
        (dict(quickdraw_chunk_rows=2.5), "--quickdraw-chunk-rows 2.5: expected an integer >= 1"),
        (dict(jpeg_quality=101), "--jpeg-quality 101: expected an integer in 1..100"),
        (dict(image_format="gif"), "--image-format gif: expected one of jpeg, png"),
        (dict(random_split="yes"), "--random-split yes: expected true or false"),
        (dict(resize=0), "--image-size 0: expected an integer in 1..13377"),
    ],
)
def test_bad_values_are_refused_with_the_flag_and_value(values, message):
    with pytest.raises(ConfigError, match=message):
        QuickDrawSource(**values)


def test_tuples_and_cross_field_checks():
    from beam_pipelines.sources.emnist import EmnistConfig
    from beam_pipelines.sources.ilsvrc import IlsvrcConfig

    assert EmnistConfig(split_fractions=[0.6, 0.2, 0.2]).split_fractions == (0.6, 0.2, 0.2)
    with pytest.raises(ConfigError, match="--split-fractions 0.6 0.4: expected 3 numbers"):
        EmnistConfig(split_fractions=[0.6, 0.4])
    with pytest.raises(ConfigError, match="--emnist-parts 'train,dev': expected train, test"):
        EmnistConfig(emnist_parts="train,dev")
    assert EmnistConfig(emnist_parts="test, train").parts == ["train", "test"]
    with pytest.raises(ConfigError, match="--ilsvrc-is-a and --ilsvrc-words must be given"):
        IlsvrcConfig(ilsvrc_words="words.txt")
    with pytest.raises(TypeError, match="DTDSource takes a ListedSplitConfig, got SourceConfig"):
        SOURCES["dtd"](SourceConfig())


def test_bad_value_stops_the_cli_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--source", "quickdraw", "--input", str(tmp_path / "missing"), "--output", str(out)]
    assert convert_cli.main(argv + ["--quickdraw-max-per-class", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --quickdraw-max-per-class 0: expected an integer >= 1\n"
    assert not out.exists()
    assert (
        convert_cli.main(
            ["--all", "--input", str(tmp_path), "--output", str(out), "--lfw-min-images", "-1"]
        )
        == 2
    )
    assert capsys.readouterr().err == "error: --lfw-min-images -1: expected an integer >= 0\n"


def test_convert_all_declares_each_flag_once():
    parser = build_all_parser()
    flags = [o for action in parser._actions for o in action.option_strings]
    assert len(flags) == len(set(flags))
    every = {flag_of(f) for cls in SOURCES.values() for f in cls.config_class.flag_fields()}
    assert every <= set(flags)
    titles = [g.title for g in parser._action_groups]
    assert any(t.startswith("published class split (aircraft, cu_birds, dtd,") for t in titles)


def test_a_flag_declared_twice_is_refused_not_resolved():
    @dataclasses.dataclass(frozen=True)
    class FirstConfig(SourceConfig):
        chunk_rows: int = option(10, "rows per unit")

    @dataclasses.dataclass(frozen=True)
    class SecondConfig(SourceConfig):
        chunk_rows: int = option(20, "rows per unit")

    def source(name: str, config: type) -> type[Source]:
        return type(name, (Source,), {"name": name, "config_class": config})

    sources = [source("first", FirstConfig), source("second", SecondConfig)]
    parser = conversion_parser("demo", "demo")
    with pytest.raises(
        ValueError, match="--chunk-rows is declared by both FirstConfig and SecondConfig"
    ):
        add_source_arguments(parser, sources)

    @dataclasses.dataclass(frozen=True)
    class SharedConfig(SourceConfig):
        chunk_rows: int = option(10, "rows per unit")
        title: ClassVar[str] = "shared"

    parser = conversion_parser("demo", "demo")
    add_source_arguments(parser, [source("a", SharedConfig), source("b", SharedConfig)])
    assert [g.title for g in parser._action_groups][-1] == "shared (a, b)"


@pytest.mark.slow
def test_convert_and_convert_all_import_without_a_cycle():
    """convert_all does not import convert (they share beam_pipelines.conversion.options)."""
    code = "import sys, beam_pipelines.convert_all; print('beam_pipelines.convert' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
