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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"


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


def load_recipe(name: str) -> Recipe:
    """The recipe `family/name` (or a path to a .toml file); ValueError naming the file and the
    key on a malformed one."""
    path = Path(name) if name.endswith(".toml") else RECIPES_DIR / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"--recipe {name}: no such recipe; expected one of {recipe_names()}")
    try:
        import tomllib  # Python 3.11+; the rest of the package runs on 3.10
    except ModuleNotFoundError:
        raise ValueError("--recipe needs Python 3.11 or later (tomllib)") from None
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML ({error})") from None
    values, sources = {}, {}
    for key, entry in data.get("options", {}).items():
        if not isinstance(entry, dict) or "value" not in entry or "source" not in entry:
            raise ValueError(f"{path}: [options.{key}] needs a value and its source")
        values[key], sources[key] = entry["value"], str(entry["source"])
    for field in ("description", "reference"):
        if not isinstance(data.get(field), str):
            raise ValueError(f"{path}: needs a '{field}' line")
    if "method" not in values:
        raise ValueError(f"{path}: needs [options.method]")
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


def _given(action: argparse.Action, argv: Sequence[str]) -> bool:
    flags = list(action.option_strings)
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
            raise ValueError(f"recipe {recipe.name}: no flag --{key.replace('_', '-')}")
        if action.choices is not None and value not in action.choices:
            raise ValueError(f"recipe {recipe.name}: --{key} {value} is not one of its choices")
        action.required = False
        if _given(action, argv):
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
