"""Typed options of a source, as TFDS's `BuilderConfig`: one frozen dataclass per source.

A field is one option: its type, its default and (through `option()`, the sources' spelling of
`episodes.util.config_flags.config_field`) its help, its choices and its bounds. Its
command-line flag is the field name in kebab-case (`quickdraw_max_per_class` ->
`--quickdraw-max-per-class`; the underscore spelling still parses, with a note, until version
0.3.0). A config checks every field when it is made (`config_flags.check_fields`), so a bad
value stops the command with one line naming the flag and the value before any work starts.

`SourceConfig` holds the image options every source takes; a source's config subclasses it (or
a shared config such as the published-split one) and adds its own fields. `add_config_arguments`
turns fields into flags and `from_args` turns parsed flags back into a config.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable
from typing import Any, ClassVar

from beam_pipelines.conversion.pixel_conventions import PIXEL_CONVENTIONS
from episodes.images.image_size_limit import MAX_IMAGE_SIDE
from episodes.util import config_flags
from episodes.util.config_flags import ConfigError, check_fields, config_from_args, flag_of

__all__ = [
    "ConfigError",
    "SourceConfig",
    "SplitSeedConfig",
    "add_config_arguments",
    "declared_in",
    "flag_of",
    "option",
]


def option(
    default: Any,
    help: str,
    *,
    choices: Iterable[Any] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    metavar: str | tuple[str, ...] | None = None,
    flag: str | None = None,
    renamed_from: Iterable[str] = (),
    cli: bool = True,
) -> Any:
    """A config field: `default`, the `help` of its flag, allowed `choices`, inclusive
    `minimum` / `maximum`, its `flag` when not the field name's, old spellings beyond the
    underscore one; `cli=False` for a field set by the command itself, not by a flag
    (`episodes.util.config_flags.config_field`)."""
    return config_flags.config_field(
        default,
        help=help,
        flag=flag,
        choices=choices,
        minimum=minimum,
        maximum=maximum,
        metavar=metavar,
        renamed_from=renamed_from,
        cli=cli,
    )


@dataclasses.dataclass(frozen=True)
class SourceConfig:
    """The image options every source takes; `None` leaves the choice to the source (its own
    format and mode, or the reference converter's under the meta-dataset pixel convention)."""

    image_format: str | None = option(
        None, "stored encoding (default: the source's)", choices=("jpeg", "png")
    )
    image_mode: str | None = option(
        None, "stored colour mode (default: the source's)", choices=("RGB", "L")
    )
    jpeg_quality: int | None = option(
        None,
        "JPEG quality (default: 75, PIL's and so the reference's, under the meta-dataset pixel "
        "convention; 95 otherwise)",
        minimum=1,
        maximum=100,
    )
    resize: int | None = option(
        None,
        "image side in pixels: store images resized to N x N (default: their original size)",
        flag="--image-size",
        renamed_from=("--resize",),  # --resize is the reader's resampling method
        minimum=1,
        maximum=MAX_IMAGE_SIDE,  # the image size limit of converted datasets, for the output too
    )
    pixel_convention: str | None = option(
        None,
        "meta-dataset (default for Meta-Dataset sources): the reference converter's pixels, RGB "
        "JPEG, source JPEGs kept as they are, Omniglot inverted; original: the raw files' "
        "polarity and colour mode in the source's own format",
        choices=PIXEL_CONVENTIONS,
    )

    title: ClassVar[str] = "image options (every source)"

    def __post_init__(self) -> None:
        check_fields(self)
        self.validate()

    def validate(self) -> None:
        """Checks across fields, or of a field's text (ConfigError naming the flag)."""

    def changed(self) -> dict[str, Any]:
        """The fields that differ from their defaults."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default
        }

    @classmethod
    def flag_fields(cls) -> list[dataclasses.Field]:
        """The fields that are command-line flags."""
        return config_flags.flag_fields(cls)

    @classmethod
    def from_args(cls, args: argparse.Namespace, **values: Any) -> SourceConfig:
        """The config of the flags given in `args` (others keep their defaults) and `values`."""
        return config_from_args(cls, args, **values)


@dataclasses.dataclass(frozen=True)
class SplitSeedConfig(SourceConfig):
    """The seed of a source's seeded class split (`--random-split` of the published-split
    sources, `--split-fractions` of the others)."""

    split_seed: int = option(
        0, "seed of the seeded class split (--random-split, --split-fractions; default 0)"
    )

    title: ClassVar[str] = "seeded class split"


def declared_in(cls: type, name: str) -> type:
    """The class of `cls`'s MRO that declares field `name` (the most derived one)."""
    for klass in cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            return klass
    raise KeyError(name)


def add_config_arguments(
    container: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    fields: Iterable[dataclasses.Field] | None = None,
) -> None:
    """One flag per field of `cls` (or of `fields`): `config_flags.add_config_arguments`, with
    the old underscore spellings of the source options kept. A flag given is stored under the
    field's name; one not given leaves no attribute (the config's default applies)."""
    config_flags.add_config_arguments(container, cls, fields=fields, underscore_spellings=True)
