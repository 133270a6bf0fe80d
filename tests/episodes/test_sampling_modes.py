"""Sampling modes as plug-ins (issue 35): the registry, the flags every sampling command gets
from it, and the same episodes as the samplers the modes adapt."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from episodes.read import main as read_main
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import Split
from episodes.records.reader_errors import ReaderError
from episodes.sampling.episode_cli import (
    add_episode_source_arguments,
    add_sampler_arguments,
    sampler_config_from_args,
    sampling_mode_from_args,
)
from episodes.sampling.fixml import MixedSampler
from episodes.sampling.modes import (
    DEFAULT_MODE,
    get_mode,
    manifest_fields,
    mode_class,
    mode_from_json,
    mode_names,
)
from episodes.sampling.sampler import EpisodeSampler, MultiSourceSampler, SamplerConfig
from episodes.sampling.sampler_config import SamplerError
from episodes.sampling.sampler_factory import make_sampler
from episodes.util.cli_errors import UserError
from episodes.util.cli_style import command_parser
from tests.fixtures.dataset_specs import mini_spec
from tests.fixtures.reader_datasets import write_dataset

FIXED = SamplerConfig.fixed(ways=3, shots=2, query=3)


def _args(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("test", "a command that samples episodes")
    add_episode_source_arguments(parser)
    add_sampler_arguments(parser)
    return parser.parse_args(["--dataset", "D", "--split", "test", *argv])


def test_the_registry_finds_each_mode_by_its_module_name():
    assert mode_names() == ["meta_dataset", "mixed"]
    assert DEFAULT_MODE in mode_names()
    for name in mode_names():
        assert mode_class(name).name == name
        assert mode_class(name).__module__ == f"episodes.sampling.modes.{name}"
    with pytest.raises(SamplerError, match="unknown sampling mode 'nope': expected one of"):
        get_mode("nope")


def test_each_mode_draws_the_episodes_of_the_sampler_it_adapts():
    spec = mini_spec()
    other = dataclasses.replace(spec, name="other")
    config = SamplerConfig.fixed(ways=5, shots=1, query=4)
    mixed = get_mode("mixed", lam=0.4, base_split="train")
    built = mixed.sampler([spec], Split.TEST, config, 7)
    direct = MixedSampler(spec, "train", "test", 0.4, config, 7)
    assert built.descriptions(0, 20) == direct.descriptions(0, 20)
    one = get_mode().sampler([spec], Split.TEST, config, 7)
    assert one.descriptions(0, 20) == EpisodeSampler(spec, "test", config, 7).descriptions(0, 20)
    several = get_mode().sampler([spec, other], Split.TEST, config, 7)
    assert isinstance(several, MultiSourceSampler)
    with pytest.raises(ReaderError, match="one dataset at a time"):
        mixed.sampler([spec, other], Split.TEST, config, 7)


def test_the_older_mix_lambda_arguments_are_the_mixed_mode():
    spec = mini_spec()
    old = make_sampler([spec], Split.TEST, None, 3, mix_lambda=0.5, base_split="valid")
    new = make_sampler(
        [spec], Split.TEST, None, 3, sampling=get_mode("mixed", lam=0.5, base_split="valid")
    )
    assert old.descriptions(0, 10) == new.descriptions(0, 10)
    assert old.config == SamplerConfig.fixed()  # the mode's default config


def test_a_mode_round_trips_through_json_and_records_its_options():
    mixed = get_mode("mixed", lam=0.25, base_split="valid")
    assert mode_from_json(mixed.to_json()) == mixed
    assert hash(mode_from_json(mixed.to_json())) == hash(mixed)
    assert mode_from_json(None) == get_mode(DEFAULT_MODE)
    # every manifest has the keys of every mode, None but for the mode's own
    assert manifest_fields(mixed) == {"lambda": 0.25, "base_split": "valid"}
    assert manifest_fields(get_mode()) == {"lambda": None, "base_split": None}


def test_flags_choose_the_mode_and_its_sampler_defaults():
    assert sampling_mode_from_args(_args([])) == get_mode()
    mixed = sampling_mode_from_args(_args(["--lambda", "0.5"]))
    assert mixed == get_mode("mixed", lam=0.5, base_split="train")
    assert sampling_mode_from_args(_args(["--sampling", "mixed", "--lambda", "1"])) == get_mode(
        "mixed", lam=1.0
    )
    # FIX-ML's episodes are fixed 5-way 5-shot 15-query unless the sampler flags say otherwise
    assert sampler_config_from_args(_args(["--lambda", "0.5"])).mode == "fixed"
    assert sampler_config_from_args(_args(["--lambda", "0.5", "--mode", "variable"])).mode == (
        "variable"
    )
    assert sampler_config_from_args(_args([])).mode == "variable"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--base-split", "valid"], "--base-split needs --lambda (sampling mode mixed)"),
        (["--sampling", "mixed"], "--sampling mixed needs --lambda"),
        (
            ["--sampling", "meta_dataset", "--lambda", "0.5"],
            "--lambda (sampling mode mixed) cannot be used with --sampling meta_dataset",
        ),
    ],
)
def test_flags_that_do_not_fit_together_are_one_error(argv, message, tmp_path):
    with pytest.raises(SamplerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sampling_mode_from_args(_args(argv))
    toy = write_dataset(tmp_path / "toy")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_main(["--dataset", str(toy.root), "--split", "test", *argv])


def test_the_reader_takes_a_mode_and_checks_the_splits_it_reads(tmp_path):
    toy = write_dataset(tmp_path / "toy")
    mixed = get_mode("mixed", lam=0.5, base_split="train")
    assert mixed.splits_read(Split.TEST) == (Split.TEST, Split.TRAIN)
    with EpisodeReader(toy.root, "test", FIXED, 2, image_size=8, sampling=mixed) as reader:
        new = [reader.describe(i) for i in range(8)]
    with EpisodeReader(toy.root, "test", FIXED, 2, image_size=8, mix_lambda=0.5) as reader:
        assert [reader.describe(i) for i in range(8)] == new
    with pytest.raises(ReaderError, match="not both"):
        EpisodeReader(toy.root, "test", FIXED, sampling=mixed, mix_lambda=0.5)
