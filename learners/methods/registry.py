"""Method names -> learner classes and their option dataclasses, filled by `@register_learner`.

Each module of `learners.methods` decorates its learner class once per name it answers to
(`@register_learner("protonet", options=ProtoNetConfig)`); multiclass pre-training is also
registered as `knn`, `finetune`, ... with its inference fixed by `fixed=`. The package is
imported on first use, so adding a method is adding one module (as timm's `@register_model`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from learners import LearnerConfigError
from learners.methods.config_fields import MethodConfig, flag_name
from learners.methods.learner_config import LearnerConfig
from learners.nn.backbones import canonical_backbone_name
from learners.optim.lr_schedule import check_schedule_options

if TYPE_CHECKING:
    from learners.methods.learner import Learner

__all__ = [
    "build_learner",
    "canonical_method",
    "episodic_methods",
    "foreign_options_message",
    "INTERFACE_MODULES",
    "is_episodic",
    "learner_config",
    "learner_config_from_dict",
    "LearnerClass",
    "LEGACY_FLAT_DEFAULTS",
    "method_entry",
    "method_names",
    "method_option_classes",
    "MethodEntry",
    "METHODS_PACKAGE",
    "methods_sharing",
    "methods_with_option",
    "register_learner",
    "registered",
    "resolved_config",
    "unfixed_method",
]

METHODS_PACKAGE = "learners.methods"
# The modules of METHODS_PACKAGE that define what a method is, not a method (never discovered).
INTERFACE_MODULES = frozenset(
    ("config_fields", "config_flags", "learner", "learner_config", "registry")
)
# Options every run saved before per-method configs took when they were missing from config.json.
LEGACY_FLAT_DEFAULTS = {"pretrain_augment": False}
LearnerClass = TypeVar("LearnerClass", bound=type)


@dataclass(frozen=True)
class MethodEntry:
    """One registered name: its learner class, its options dataclass, the options the name
    fixes (`knn` fixes inference="knn"), and other spellings it accepts."""

    name: str
    learner: type
    options: type[MethodConfig]
    fixed: Mapping[str, Any]
    spellings: tuple[str, ...]

    @property
    def episodic(self) -> bool:
        """Trained on episodes (else on batches of images, as multiclass pre-training)."""
        return getattr(self.learner, "stream", "episodes") == "episodes"


_ENTRIES: dict[str, MethodEntry] = {}
_SPELLINGS: dict[str, str] = {}
_discovered = False


def _key(name: str) -> str:
    return name.lower().replace("-", "_")


def register_learner(
    name: str,
    *,
    options: type[MethodConfig],
    fixed: Mapping[str, Any] | None = None,
    spellings: Sequence[str] = (),
) -> Callable[[LearnerClass], LearnerClass]:
    """Class decorator: `python -m learners.train --method NAME` builds this learner with
    `options` (a MethodConfig dataclass) and the option values `fixed` by the name."""
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - {f.name for f in fields(options)})
    if unknown:
        raise RuntimeError(f"method {name!r} fixes {unknown}, not fields of {options.__name__}")

    def decorate(cls: LearnerClass) -> LearnerClass:
        key = _key(name)
        known = _ENTRIES.get(key)
        if known is not None and known.learner is not cls:
            raise RuntimeError(f"two learners registered as {name!r}: {known.learner}, {cls}")
        _ENTRIES[key] = MethodEntry(
            key, cls, options, MappingProxyType(fixed), tuple(_key(s) for s in spellings)
        )
        for spelling in spellings:
            _SPELLINGS[_key(spelling)] = key
        return cls

    return decorate


def _discover() -> None:
    """Import every method module of `learners.methods` (their decorators fill the registry)."""
    global _discovered
    if _discovered:
        return
    package = importlib.import_module(METHODS_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("_") and info.name not in INTERFACE_MODULES:
            importlib.import_module(f"{METHODS_PACKAGE}.{info.name}")
    _discovered = True


def registered() -> dict[str, MethodEntry]:
    """Every registered method name (alphabetical) -> its entry."""
    _discover()
    return dict(sorted(_ENTRIES.items()))


def method_names() -> tuple[str, ...]:
    return tuple(registered())


def episodic_methods() -> tuple[str, ...]:
    return tuple(name for name, entry in registered().items() if entry.episodic)


def method_entry(name: str) -> MethodEntry:
    """The entry of a method name or one of its spellings (`MatchingNet`, `fo-MAML`)."""
    entries = registered()
    key = _key(name)
    key = _SPELLINGS.get(key, key)
    if key not in entries:
        raise LearnerConfigError(f"unknown method {name!r}; expected one of {tuple(entries)}")
    return entries[key]


def canonical_method(name: str) -> str:
    return method_entry(name).name


def is_episodic(method: str) -> bool:
    return method_entry(method).episodic


def methods_sharing(options: type[MethodConfig]) -> list[str]:
    """The method names whose options are this dataclass (MAML's five variants share one)."""
    return [name for name, entry in registered().items() if entry.options is options]


def method_option_classes() -> list[type[MethodConfig]]:
    """Each options dataclass once, in the order of the first method name using it."""
    classes: list[type[MethodConfig]] = []
    for entry in registered().values():
        if entry.options not in classes:
            classes.append(entry.options)
    return classes


def methods_with_option(field_name: str) -> list[str]:
    """The method names whose options have a field `field_name`."""
    return [
        name
        for name, entry in registered().items()
        if field_name in entry.options.__dataclass_fields__
    ]


def unfixed_method(method: str) -> str:
    """The name of the same learner with nothing fixed (`knn` -> `multiclass`)."""
    entry = method_entry(method)
    if not entry.fixed:
        return entry.name
    for other in registered().values():
        if other.learner is entry.learner and other.options is entry.options and not other.fixed:
            return other.name
    raise ValueError(f"method {entry.name!r} has no registration without its fixed options")


def resolved_config(config: LearnerConfig) -> LearnerConfig:
    """The config of what actually runs (what run folders save): canonical method and backbone
    names, the method's options (its defaults when None) with the values its name fixes (`knn`
    runs k-NN) and its method-dependent defaults (MAML's step size). Raises ValueError naming
    the flag of an option outside its bounds, an unknown method or backbone."""
    entry = method_entry(config.method)
    options = config.options if config.options is not None else entry.options()
    if not isinstance(options, entry.options):
        raise ValueError(
            f"method {entry.name} takes {entry.options.__name__} options, "
            f"not {type(options).__name__}"
        )
    options = replace(options, **entry.fixed).resolved(entry.name)
    config = replace(
        config,
        method=entry.name,
        backbone=canonical_backbone_name(config.backbone),
        options=options,
    )
    config.check()
    options.check()
    return config


def build_learner(config: LearnerConfig) -> Learner:
    """Construct the learner for `config.method` (weights initialised from torch's RNG)."""
    config = resolved_config(config)
    return method_entry(config.method).learner(config)


def learner_config(method: str, **values: Any) -> LearnerConfig:
    """A LearnerConfig from flat keyword values (`learner_config("knn", knn_k=3, lr=1e-3)`):
    shared options go to LearnerConfig, the method's to its options dataclass. ValueError on an
    option of another method, an unknown option, or a value the method's name fixes otherwise."""
    entry = method_entry(method)
    shared_names = {f.name for f in fields(LearnerConfig)} - {"method", "options"}
    own_names = {f.name for f in fields(entry.options)}
    foreign = sorted(set(values) - shared_names - own_names)
    if foreign:
        raise LearnerConfigError(foreign_options_message(foreign, entry.name))
    check_schedule_options(values.get("lr_schedule", LearnerConfig.lr_schedule), values)
    for name, value in entry.fixed.items():
        if name in values and values[name] != value:
            raise LearnerConfigError(
                f"--method {entry.name} runs {name} {value}, not {flag_name(name)} {values[name]}"
            )
    options = entry.options(**{k: v for k, v in values.items() if k in own_names})
    shared = {k: v for k, v in values.items() if k in shared_names}
    return LearnerConfig(method=entry.name, options=options, **shared)


def foreign_options_message(names: Sequence[str], method: str) -> str:
    """One line: these options are not `method`'s (and whose they are)."""
    parts = []
    for name in names:
        owners = methods_with_option(name)
        whose = f"options of {', '.join(owners)}" if owners else "no method's option"
        parts.append(f"{flag_name(name)} ({whose})")
    return f"{' and '.join(parts)}: not options of --method {method}"


def learner_config_from_dict(values: Mapping[str, Any]) -> LearnerConfig:
    """A LearnerConfig from config.json's "learner" or a checkpoint's "config": shared options
    at the top level and the method's under "options", or the flat layout of runs saved before
    (every method's options side by side, of which the method's own are kept)."""
    entry = method_entry(str(values.get("method", LearnerConfig.method)))
    shared = {f.name: values[f.name] for f in fields(LearnerConfig) if f.name in values}
    if "options" in values:
        saved = values["options"] or {}
    else:
        saved = {**LEGACY_FLAT_DEFAULTS, **values}
    shared["options"] = entry.options.from_dict(dict(saved))
    return LearnerConfig(**shared)
