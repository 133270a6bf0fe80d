"""Fields of the learners' config dataclasses: help text and bounds beside each option.

`option(default, help, ...)` declares a field whose metadata drives both the generated command
line (`learners.methods.config_flags`: one `--kebab-case` flag per field, the help from here) and the
check before any work starts (`check_fields`: one line naming the flag and the bad value).
`MethodConfig` is the base of each method's own options, declared beside the method.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar

from learners import LearnerConfigError

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
    """A config field: `minimum`, `maximum` (inclusive), `above` and `below` (exclusive) bound
    numbers,
    `choices` lists the allowed strings; `cli=False` for values the tools fill in themselves;
    `at_evaluation=True` for options `learners.evaluate` may change on a trained run (how
    episodes are inferred, not what was trained)."""
    metadata = {
        "help": help,
        "minimum": minimum,
        "maximum": maximum,
        "above": above,
        "below": below,
        "choices": tuple(choices) if choices is not None else None,
        "cli": cli,
        "at_evaluation": at_evaluation,
    }
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def flag_name(field_name: str) -> str:
    """The command-line flag of a config field: `knn_k` -> `--knn-k`."""
    return "--" + field_name.replace("_", "-")


def cli_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields of a config dataclass that a user sets (those with `cli=False` excluded)."""
    return [f for f in dataclasses.fields(config_class) if f.metadata.get("cli", True)]


def at_evaluation(field: dataclasses.Field) -> bool:
    """Whether `learners.evaluate` may change this option on a trained run (`option`'s
    `at_evaluation`: how episodes are inferred, not what was trained)."""
    return bool(field.metadata.get("at_evaluation"))


def _bound_problem(field: dataclasses.Field, value: Any) -> str | None:
    meta = field.metadata
    if isinstance(value, float) and not math.isfinite(value):  # nan < 0 is False: say it first
        return "expected a finite number"
    if meta.get("choices") is not None and value not in meta["choices"]:
        return f"expected one of {', '.join(meta['choices'])}"
    numeric = [meta.get(k) for k in ("minimum", "above", "below", "maximum")]
    if all(bound is None for bound in numeric):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "expected a number"
    minimum, above, below, maximum = numeric
    if minimum is not None and value < minimum:
        return f"expected >= {minimum:g}"
    if maximum is not None and value > maximum:
        return f"expected <= {maximum:g}"
    if above is not None and not value > above:
        return f"expected > {above:g}"
    if below is not None and not value < below:
        return f"expected < {below:g}"
    return None


def check_fields(config: Any) -> None:
    """Raise ValueError naming the flag and value of the first field outside its bounds or not
    finite (None is allowed where the default is None)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None and field.default is None:
            continue
        problem = _bound_problem(field, value)
        if problem is not None:
            raise LearnerConfigError(f"{flag_name(field.name)} {value}: {problem}")


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
