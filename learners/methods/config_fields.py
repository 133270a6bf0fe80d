"""Fields of the learners' config dataclasses, declared on the toolkit's one config layer.

`option(default, help, ...)` is `episodes.util.config_flags.config_field` with the learners'
one extra key, `at_evaluation` (options `learners.evaluate` may change on a trained run): the
same metadata drives the generated flags (`learners.methods.config_flags`) and the check before
any work starts (`check_fields`: one line naming the flag and the bad value, as every command's).
`MethodConfig` is the base of each method's own options, declared beside the method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar

from episodes.util.config_flags import check_value, config_field, field_kinds, flag_fields, flag_of
from learners import LearnerConfigError

__all__ = [
    "MethodConfig",
    "at_evaluation",
    "check_fields",
    "cli_fields",
    "flag_name",
    "option",
]

Config = TypeVar("Config", bound="MethodConfig")


def option(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
    choices: Sequence[str] | None = None,
    cli: bool = True,
    at_evaluation: bool = False,
) -> Any:
    """A config field (`episodes.util.config_flags.config_field`): `minimum`, `maximum`
    (inclusive), `above` and `below` (exclusive) bound numbers, `choices` lists the allowed
    strings; `cli=False` for values the tools fill in themselves; `at_evaluation=True` for
    options `learners.evaluate` may change on a trained run (how episodes are inferred, not
    what was trained)."""
    return config_field(
        default,
        help=help,
        minimum=minimum,
        maximum=maximum,
        above=above,
        below=below,
        choices=choices,
        cli=cli,
        metadata={"at_evaluation": at_evaluation},
    )


def flag_name(field_name: str) -> str:
    """The command-line flag of a config field: `knn_k` -> `--knn-k`."""
    return flag_of(field_name)


def cli_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields of a config dataclass that a user sets (those with `cli=False` excluded)."""
    return flag_fields(config_class)


def at_evaluation(field: dataclasses.Field) -> bool:
    """Whether `learners.evaluate` may change this option on a trained run (`option`'s
    `at_evaluation`: how episodes are inferred, not what was trained)."""
    return bool(field.metadata.get("at_evaluation"))


def check_fields(config: Any) -> None:
    """LearnerConfigError naming the flag and value of the first field off its type or bounds
    (the one layer's `check_value`; None is allowed where the default is None). Values are left
    as given (an integer learning rate stays an integer in a run's config.json)."""
    kinds = field_kinds(type(config))
    for field in dataclasses.fields(config):
        check_value(field, kinds[field.name], getattr(config, field.name), LearnerConfigError)


@dataclass
class MethodConfig:
    """A method's own options (subclassed beside each method); saved in a run's config.json
    under `learner.options`. `legacy_defaults` are the values of options added later that runs
    saved without them ran with (their behaviour before the option existed)."""

    legacy_defaults: ClassVar[dict[str, Any]] = {}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls: type[Config], values: dict[str, Any]) -> Config:
        """The options from saved values; keys of other methods or older versions are ignored,
        options missing from older versions take their `legacy_defaults`."""
        values = {**cls.legacy_defaults, **values}
        known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def resolved(self: Config, method: str) -> Config:
        """The options that actually run under the registered name `method` (defaults that
        depend on the method filled in); the base class has none to fill."""
        return self

    def check(self) -> None:
        check_fields(self)
