"""A sampling mode: where the classes of a command's episodes come from, as one plug-in.

`SamplerConfig` says what an episode looks like (its `mode`, variable or fixed, is the episode
shape); a sampling mode says which sampler draws the episodes over which splits: Meta-Dataset's
over one or several datasets (`meta_dataset`, the default), FIX-ML's base/novel mixture
(`mixed`). A mode is one module of `episodes.sampling.modes`: a `SamplingMode` subclass
decorated `@register_mode`, its options a frozen dataclass (`Options`) whose fields, made with
`mode_option`, become flags of every command that samples (`episodes.sampling.episode_cli`),
and what the reader (`splits_read`), the sampler factory (`sampler`) and the episode-shards
manifest (`recorded`, `record`) need of it. Nothing else names a mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.sampling.sampler_config import SamplerConfig, SamplerError
from episodes.util.config_flags import config_field

__all__ = ["NoOptions", "SamplingMode", "mode_option"]


# A field of a mode's Options, with what its command-line flag needs (`help`; `flag`, by default
# `--` and the field name in kebab-case; `metavar`): the one config layer's `config_field`. A
# field without a default must be given when the mode is used.
mode_option = config_field


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a mode that has none."""


class SamplingMode:
    """How episodes are drawn from the datasets of a command (module docstring).

    Subclasses set `name` (their module's name), `summary` (one line for `--help`), `Options`
    and `recorded` (the keys `record()` writes), and define `sampler`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Options: ClassVar[type] = NoOptions
    recorded: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Any = None, /, **values: Any):
        if options is not None and values:
            raise TypeError("give an Options object or keyword values, not both")
        if options is None:
            try:
                options = self.Options(**values)
            except TypeError as exc:  # a required option missing, or an unknown one
                raise SamplerError(f"sampling mode {self.name!r}: {exc}") from None
        if not isinstance(options, self.Options):
            raise TypeError(
                f"{self.name}: options must be {self.Options.__name__}, "
                f"got {type(options).__name__}"
            )
        self.options = options

    def splits_read(self, split: Split) -> tuple[Split, ...]:
        """The splits whose classes the episodes of `split` use (the reader checks their
        records before the first episode)."""
        return (split,)

    def default_config(self) -> SamplerConfig:
        """The sampler config used when the caller gives none."""
        return SamplerConfig()

    def config_defaults(self) -> dict[str, Any]:
        """Sampler options a command fills in when its flags leave them unset."""
        return {}

    def sampler(
        self, specs: Sequence[DatasetSpec], split: Split, config: SamplerConfig, seed: int
    ) -> Any:
        """The episode stream (`.episode(i)`) of `split` over `specs`."""
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """What an episode-shards manifest records of this mode (the keys of `recorded`)."""
        return {}

    def to_json(self) -> dict[str, Any]:
        """{"mode": name, option: value, ...}: picklable, for jobs that rebuild it elsewhere."""
        return {"mode": self.name, **dataclasses.asdict(self.options)}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.options == self.options  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.name, self.options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"
