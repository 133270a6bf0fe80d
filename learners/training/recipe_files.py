"""Training recipes as data: `learners/recipes/<family>/<name>.toml`, one per baseline as its
authors ran it, each value with the reference file and line it comes from.

A recipe file holds `description` (one line: what a user gets), `reference` (repository and
commit), optional `notes` (what is not reproduced), and `[options.<flag_name>]` tables with
`value` and `source`; a note starts with "not reproduced:" where the toolkit differs. `learners.train --recipe NAME` turns the values into the parser's defaults
(so explicit flags override them) and records the recipe and every overridden value in the
run's config.json (`extra`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from episodes.util.cli_style import OLD_SPELLINGS_UNTIL
from learners import LearnerConfigError

__all__ = [
    "apply_recipe",
    "apply_recipe_value_check",
    "flag_text",
    "load_recipe",
    "Recipe",
    "recipe_listing",
    "recipe_names",
    "recipe_path",
    "recipe_record",
    "RECIPES_DIR",
    "RENAMED_KEYS",
]

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"
# Recipe keys of renamed flags (old -> new): a user's recipe with the old key still loads.
RENAMED_KEYS = {"episodes": "steps"}


@dataclass(frozen=True)
class Recipe:
    name: str  # e.g. meta_dataset/protonet
    description: str
    reference: str
    values: dict[str, Any]
    sources: dict[str, str]
    notes: tuple[str, ...] = ()


def recipe_names() -> list[str]:
    """Every shipped recipe, as `family/name`."""
    return sorted(p.relative_to(RECIPES_DIR).with_suffix("").as_posix() for p in _files())


def _files() -> list[Path]:
    return list(RECIPES_DIR.glob("*/*.toml"))


def recipe_path(name: str) -> Path:
    """The file of recipe `family/name`, or `name` itself when it is a path to a .toml file."""
    return Path(name) if name.endswith(".toml") else RECIPES_DIR / f"{name}.toml"


def _value_fault(action: argparse.Action, value: Any) -> str | None:
    """What is wrong with `value` as the value of `action`'s flag (None when it fits): a
    switch takes true or false, a number flag a TOML number its type accepts, any other a
    string. Flags of several values are left to argparse."""
    if action.nargs not in (None, 0):
        return None
    if action.nargs == 0:
        return None if isinstance(value, bool) else "expected true or false"
    if action.type in (None, str):
        return None if isinstance(value, str) else "expected a string"
    kind = "int" if action.type is int else "float"  # int, float or finite_float
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number ({kind})"
    try:
        action.type(str(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return f"expected a number ({kind})"
    return None


def apply_recipe_value_check(recipe: Recipe, key: str, action: argparse.Action) -> None:
    """One line naming the recipe's file and the key when the value's type is not the flag's."""
    fault = _value_fault(action, recipe.values[key])
    if fault is not None:
        raise LearnerConfigError(
            f"{recipe_path(recipe.name)}: [options.{key}] value {recipe.values[key]!r}: {fault} "
            f"(the value of --{key.replace('_', '-')})"
        )


def load_recipe(name: str) -> Recipe:
    """The recipe `family/name` (or a path to a .toml file); ValueError naming the file and the
    key on a malformed one."""
    path = recipe_path(name)
    if not path.is_file():
        raise LearnerConfigError(
            f"--recipe {name}: no such recipe; expected one of {recipe_names()}"
        )
    try:
        import tomllib  # Python 3.11+; the rest of the package runs on 3.10
    except ModuleNotFoundError:
        raise LearnerConfigError("--recipe needs Python 3.11 or later (tomllib)") from None
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise LearnerConfigError(f"{path}: not valid TOML ({error})") from None
    values, sources = {}, {}
    for key, entry in data.get("options", {}).items():
        if not isinstance(entry, dict) or "value" not in entry or "source" not in entry:
            raise LearnerConfigError(f"{path}: [options.{key}] needs a value and its source")
        if key in RENAMED_KEYS:  # a user's recipe written before the flag's rename
            print(
                f"note: {path}: [options.{key}] is now [options.{RENAMED_KEYS[key]}]; the old "
                f"key goes in {OLD_SPELLINGS_UNTIL}",
                file=sys.stderr,
            )
            key = RENAMED_KEYS[key]
        values[key], sources[key] = entry["value"], str(entry["source"])
    for field in ("description", "reference"):
        if not isinstance(data.get(field), str):
            raise LearnerConfigError(f"{path}: needs a '{field}' line")
    if "method" not in values:
        raise LearnerConfigError(f"{path}: needs [options.method]")
    label = (
        path.relative_to(RECIPES_DIR).with_suffix("").as_posix()
        if path.is_relative_to(RECIPES_DIR)
        else str(path)
    )
    return Recipe(
        label,
        data["description"],
        data["reference"],
        values,
        sources,
        tuple(data.get("notes", ())),
    )


def recipe_listing() -> str:
    """What `learners.train --list-recipes` prints: each recipe, its line, its values."""
    blocks = []
    for name in recipe_names():
        recipe = load_recipe(name)
        lines = [f"{name}: {recipe.description}", f"  reference: {recipe.reference}"]
        for key, value in recipe.values.items():
            lines.append(f"  {flag_text(key, value)}  ({recipe.sources[key]})")
        lines += [f"  note: {note}" for note in recipe.notes]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def flag_text(key: str, value: Any) -> str:
    """The command-line spelling of one recipe value (`--no-pretrain-augment` for False)."""
    flag = key.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    if isinstance(value, list):  # a flag taking several values (--cosine-cycle-epochs 40 80)
        return f"--{flag} {' '.join(str(v) for v in value)}"
    return f"--{flag} {value}"


def _given(action: argparse.Action, argv: Sequence[str], renamed: dict[str, str]) -> bool:
    """Whether `argv` gives `action`'s flag (or `--no-` form, or an old spelling of it)."""
    flags = list(action.option_strings)
    flags += [old for old, new in renamed.items() if new in action.option_strings]
    flags += [f"--no-{f[2:]}" for f in action.option_strings if f.startswith("--")]
    return any(arg in flags or arg.split("=", 1)[0] in flags for arg in argv)


def apply_recipe(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[Recipe | None, dict[str, Any]]:
    """Read `--recipe NAME` from argv and make its values the parser's defaults (flags the
    recipe sets are no longer required). Returns the recipe and the values the command line
    overrides (by option name); ValueError on a value no flag takes."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--recipe", default=None)
    known, _ = probe.parse_known_args(list(argv))
    if known.recipe is None:
        return None, {}
    recipe = load_recipe(known.recipe)
    actions = {a.dest: a for a in parser._actions}
    overridden = {}
    for key, value in recipe.values.items():
        action = actions.get(key)
        if action is None:
            raise LearnerConfigError(f"recipe {recipe.name}: no flag --{key.replace('_', '-')}")
        apply_recipe_value_check(recipe, key, action)
        if action.choices is not None and value not in action.choices:
            raise LearnerConfigError(
                f"recipe {recipe.name}: --{key} {value} is not one of its choices"
            )
        action.required = False
        if _given(action, argv, getattr(parser, "renamed", {})):
            overridden[key] = value
    parser.set_defaults(**recipe.values)
    return recipe, overridden


def recipe_record(recipe: Recipe, overridden: dict[str, Any], args: argparse.Namespace) -> dict:
    """What config.json records of a recipe run: its name and each value the command line
    changed (the recipe's and the one that ran)."""
    return {
        "recipe": recipe.name,
        "recipe_overrides": {
            key: {"recipe": value, "given": getattr(args, key)}
            for key, value in sorted(overridden.items())
        },
    }
