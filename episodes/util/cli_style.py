"""One style for every `python -m` command: kebab-case flags, `--output` for what a command
writes, `--dataset DIR` (repeatable) for the converted datasets it reads.

`command_parser()` builds an `argparse` parser whose `add_argument` (on the parser, its argument
groups and its sub-command parsers) also takes `renamed_from=("--out",)`: the old spellings
keep working until the version after this one (`episodes.util.release`), each with a one-line note on stderr, and are not shown in
`--help`. `add_old_positional` does the same for a positional argument that became an option
(`fetch URL LOCAL` -> `--dataset URL --output LOCAL`). Beam's own pipeline flags (`--direct_num_workers`, `--runner` ...) keep Beam's
spelling: they are Beam's, passed through to its `PipelineOptions`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from episodes.util.cli_errors import UsageError
from episodes.util.release import REMOVAL_VERSION

__all__ = [
    "CommandParser",
    "OLD_SPELLINGS_UNTIL",
    "add_dataset_argument",
    "command_parser",
    "finite_float",
    "single_dataset",
]

OLD_SPELLINGS_UNTIL = f"version {REMOVAL_VERSION}"


class _RenamesMixin:
    """`add_argument(..., renamed_from=(...))` records old spellings on the owning parser."""

    def _owner(self) -> CommandParser:
        raise NotImplementedError

    def add_argument(self, *names: str, renamed_from: Iterable[str] = (), **kwargs: Any):
        action = super().add_argument(*names, **kwargs)  # type: ignore[misc]
        longest = max(action.option_strings, key=len, default=None)
        for old in renamed_from:
            if longest is None:
                raise ValueError(f"renamed_from={old!r} needs an option, not a positional")
            self._owner().renamed[old] = longest
        return action


class _OwnedGroupMixin(_RenamesMixin):
    """A group of a CommandParser: its old spellings are recorded on that parser."""

    def __init__(self, owner: CommandParser, *args: Any, **kwargs: Any):
        super().__init__(owner, *args, **kwargs)  # type: ignore[call-arg]
        self._command_parser = owner

    def _owner(self) -> CommandParser:
        return self._command_parser


class _Group(_OwnedGroupMixin, argparse._ArgumentGroup):
    """`add_argument_group` of a CommandParser."""

    def add_mutually_exclusive_group(self, **kwargs: Any) -> argparse._MutuallyExclusiveGroup:
        """Exclusive options shown in this group, their old spellings kept on the parser."""
        group = _Exclusive(self, **kwargs)
        group._command_parser = self._command_parser
        self._mutually_exclusive_groups.append(group)
        return group


class _Exclusive(_OwnedGroupMixin, argparse._MutuallyExclusiveGroup):
    """`add_mutually_exclusive_group` of a CommandParser."""


class CommandParser(_RenamesMixin, argparse.ArgumentParser):
    """The parser of a toolkit command (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.renamed: dict[str, str] = {}
        self.old_positionals: list[tuple[str, str]] = []

    def _owner(self) -> CommandParser:
        return self

    def error(self, message: str) -> NoReturn:
        """A usage error is one line, as git, cargo and pip print it: what is wrong and where
        the options are listed (argparse would print the whole usage first, 30-60 lines)."""
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    def add_argument_group(self, *args: Any, **kwargs: Any) -> argparse._ArgumentGroup:
        group = _Group(self, *args, **kwargs)
        self._action_groups.append(group)
        return group

    def add_mutually_exclusive_group(self, **kwargs: Any) -> argparse._MutuallyExclusiveGroup:
        group = _Exclusive(self, **kwargs)
        self._mutually_exclusive_groups.append(group)
        return group

    def add_old_positional(self, name: str, option: str) -> None:
        """Accept the old form whose leading positional `name` is now `option`: the first
        words before any option (after the sub-command name) are read as the old positionals
        in the order they were added, each with a one-line note."""
        self.old_positionals.append((name, option))

    def parse_known_args(self, args: Sequence[str] | None = None, namespace=None):
        given = list(sys.argv[1:] if args is None else args)
        given = self.old_positional_form(given)
        return super().parse_known_args(self.new_spellings(given), namespace)

    def old_positional_form(self, args: Sequence[str]) -> list[str]:
        """`args` with leading old positionals turned into their options (a note for each)."""
        out: list[str] = []
        position = 0
        for name, option in self.old_positionals:
            if position >= len(args) or args[position].startswith("-"):
                break
            print(
                f"note: the positional {name.upper()} is now {option} {name.upper()}; the old "
                f"form goes in {OLD_SPELLINGS_UNTIL}",
                file=sys.stderr,
            )
            out += [option, args[position]]
            position += 1
        return out + list(args[position:])

    def new_spellings(self, args: Sequence[str]) -> list[str]:
        """`args` with every old spelling replaced by the current one (a note for each)."""
        out: list[str] = []
        for position, arg in enumerate(args):
            if arg == "--":
                return out + list(args[position:])
            name, eq, value = arg.partition("=")
            new = self.renamed.get(name)
            if new is not None:
                print(
                    f"note: {name} is now {new}; the old spelling goes in {OLD_SPELLINGS_UNTIL}",
                    file=sys.stderr,
                )
                arg = new + eq + value
            out.append(arg)
        return out


def command_parser(prog: str, description: str | None = None, **kwargs: Any) -> CommandParser:
    """The parser of `python -m prog`; sub-command parsers share its class."""
    kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    return CommandParser(prog=f"python -m {prog}", description=description, **kwargs)


def finite_float(text: str) -> float:
    """argparse `type` of a float option: 'nan' and 'inf' are refused like any bad number
    (float() accepts them, and a NaN then passes every `<` bound check)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
    return value


def add_dataset_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    required: bool = True,
    several: bool = True,
    help: str | None = None,
    renamed_from: Iterable[str] = (),
) -> argparse.Action:
    """`--dataset DIR`: a converted dataset folder; repeat it for several (`several=False`
    commands refuse a second one in `single_dataset`)."""
    text = help or (
        "converted dataset folder (repeat --dataset for several)"
        if several
        else "converted dataset folder"
    )
    return parser.add_argument(
        "--dataset",
        action="append",
        metavar="DIR",
        required=required,
        help=text,
        renamed_from=renamed_from,
    )


def single_dataset(folders: Sequence[str] | None) -> str | None:
    """The one `--dataset` of a command that reads a single dataset (None when not given)."""
    if not folders:
        return None
    if len(folders) > 1:
        raise UsageError(
            f"--dataset given {len(folders)} times ({', '.join(folders)}): expected one"
        )
    return folders[0]
