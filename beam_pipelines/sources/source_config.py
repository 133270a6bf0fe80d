"""Typed options of a source, as TFDS's `BuilderConfig`: one frozen dataclass per source.

A field is one option: its type, its default and (in the field's metadata, through `option()`)
its help, its choices and its bounds. Its command-line flag is the field name in kebab-case
(`quickdraw_max_per_class` -> `--quickdraw-max-per-class`; the underscore spelling still parses,
with a note, until version 0.3.0). A config checks every field when it is made, so a bad value stops
the command with one line naming the flag and the value before any work starts.

`SourceConfig` holds the image options every source takes; a source's config subclasses it (or
a shared config such as the published-split one) and adds its own fields. `add_config_arguments`
turns fields into flags and `from_args` turns parsed flags back into a config.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Iterable
from typing import Any, ClassVar

from beam_pipelines.pixel_conventions import PIXEL_CONVENTIONS
from episodes.images.image_size_limit import MAX_IMAGE_SIDE


class ConfigError(ValueError):
    """A source option holds a value the source cannot use."""


def option(
    default: Any,
    help: str,
    *,
    choices: Iterable[Any] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    metavar: str | tuple[str, ...] | None = None,
    cli: bool = True,
) -> Any:
    """A config field: `default`, the `help` of its flag, allowed `choices`, inclusive
    `minimum` / `maximum`; `cli=False` for a field set by the command itself, not by a flag."""
    metadata = {
        "help": help,
        "choices": tuple(choices) if choices is not None else None,
        "minimum": minimum,
        "maximum": maximum,
        "metavar": metavar,
        "cli": cli,
    }
    return dataclasses.field(default=default, metadata=metadata)


def flag_of(name: str) -> str:
    """The flag of a field: `--` and the name in kebab-case."""
    return "--" + name.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class FieldKind:
    """What a field's annotation says: the element type, whether None is allowed, and the
    number of values (a fixed-length tuple)."""

    base: type
    optional: bool
    count: int | None = None


def field_kinds(cls: type) -> dict[str, FieldKind]:
    """The kind of every field of the config class `cls`, from its annotations."""
    hints = typing.get_type_hints(cls)
    kinds = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = type(None) in args
        if optional:
            (hint,) = [a for a in args if a is not type(None)]
        if typing.get_origin(hint) is tuple:
            members = typing.get_args(hint)
            kinds[f.name] = FieldKind(members[0], optional, len(members))
        else:
            kinds[f.name] = FieldKind(hint, optional)
    return kinds


def _expected(kind: FieldKind, meta: dict) -> str:
    noun = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    text = noun.get(kind.base, kind.base.__name__)
    if kind.count is not None:
        text = f"{kind.count} numbers" if kind.base is float else f"{kind.count} values"
    if meta.get("choices"):
        text = "one of " + ", ".join(str(c) for c in meta["choices"])
    low, high = meta.get("minimum"), meta.get("maximum")
    if low is not None and high is not None:
        text += f" in {low:g}..{high:g}"
    elif low is not None:
        text += f" >= {low:g}"
    elif high is not None:
        text += f" <= {high:g}"
    return text


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def _is_of(value: Any, base: type) -> bool:
    if base is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if base is float:
        return isinstance(value, (int, float))
    return isinstance(value, base)


def check_field(name: str, value: Any, kind: FieldKind, meta: dict) -> Any:
    """`value` as the field stores it (a list of a tuple field becomes a tuple, an integer of
    a float field a float), or ConfigError naming the flag, the value and what was expected."""
    if value is None and kind.optional:
        return None

    def refuse() -> ConfigError:
        return ConfigError(f"{flag_of(name)} {_shown(value)}: expected {_expected(kind, meta)}")

    items = value
    if kind.count is not None:
        if not isinstance(value, (list, tuple)) or len(value) != kind.count:
            raise refuse()
        items = tuple(value)
    for item in items if kind.count is not None else (value,):
        if not _is_of(item, kind.base):
            raise refuse()
        if isinstance(item, float) and not math.isfinite(item):
            raise refuse()
        if meta.get("choices") and item not in meta["choices"]:
            raise refuse()
        low, high = meta.get("minimum"), meta.get("maximum")
        if (low is not None and item < low) or (high is not None and item > high):
            raise refuse()
    if kind.count is not None:
        return tuple(float(v) if kind.base is float else v for v in items)
    return float(value) if kind.base is float else value


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
        "store images resized to RESIZE x RESIZE (default: original size)",
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
        kinds = field_kinds(type(self))
        for f in dataclasses.fields(self):
            value = check_field(f.name, getattr(self, f.name), kinds[f.name], dict(f.metadata))
            object.__setattr__(self, f.name, value)
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
        return [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]

    @classmethod
    def from_args(cls, args: argparse.Namespace, **values: Any) -> SourceConfig:
        """The config of the flags given in `args` (others keep their defaults) and `values`."""
        given = {
            f.name: getattr(args, f.name)
            for f in cls.flag_fields()
            if getattr(args, f.name, None) is not None
        }
        return cls(**{**given, **values})


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


_METAVARS = {int: "N", float: "X"}


def add_config_arguments(
    container: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type[SourceConfig],
    fields: Iterable[dataclasses.Field] | None = None,
) -> None:
    """One flag per field of `cls` (or of `fields`); a flag given is stored under the field's
    name, a flag not given leaves no attribute (so the config's default applies). `container`
    belongs to an `episodes.util.cli_style` parser (old underscore spellings are kept)."""
    kinds = field_kinds(cls)
    for f in cls.flag_fields() if fields is None else fields:
        kind, meta, flag = kinds[f.name], dict(f.metadata), flag_of(f.name)
        old = ("--" + f.name,) if "_" in f.name else ()
        shown = f.default if kind.count is None or f.default is None else _shown(f.default)
        text = meta["help"]
        if "default" not in text and f.default not in (None, False):
            text += f" (default {shown})"
        common = {"dest": f.name, "default": argparse.SUPPRESS, "help": text}
        if kind.base is bool:
            container.add_argument(
                flag, action="store_const", const=True, renamed_from=old, **common
            )
            if f.default:
                negated = "--no-" + flag[2:]
                container.add_argument(
                    negated,
                    action="store_const",
                    const=False,
                    dest=f.name,
                    default=argparse.SUPPRESS,
                    help=f"turn {flag} off",
                    renamed_from=("--no-" + f.name,) if old else (),
                )
            continue
        container.add_argument(
            flag,
            type=kind.base,
            nargs=kind.count,
            choices=meta["choices"],
            metavar=meta["metavar"] or (None if meta["choices"] else _METAVARS.get(kind.base)),
            renamed_from=old,
            **common,
        )
