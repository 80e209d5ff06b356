"""The command line's load options: one flag per `LoadOptions` field, made from the field.

`add_option_flags(parser)` gives a subcommand that loads a program a flag per field (`seed`
-> `--seed`, `max_loop_trips` -> `--max-loop-trips`): its help is the field's documentation
(`shlo2jax.options.field_help`), the choices of a Literal-typed field (`--lowering`,
`--gradients`) its type's, a bool `--x/--no-x`. `options_from(args)` makes the parsed flags
one `LoadOptions`, which the command passes on (`load(path, options)`), never loose keywords.

A command may default a field otherwise than `LoadOptions` does (`info` loads not strict and
with placeholder data, to list everything a program has): the flag overrides it, and its help
says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from typing import Mapping, Optional

from shlo2jax.options import LoadOptions, field_choices, field_help

_DEST = "load_option_"  # the namespace attribute of field F: load_option_F


def flag(name: str) -> str:
    """The flag of field `name`: `max_loop_trips` -> `--max-loop-trips`."""
    return "--" + name.replace("_", "-")


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is out of range: must be at least 0")
    return value


def _loop_trips(text: str):
    """`N` (every loop) or `LOC=N` (the loop at LOC, as messages print its location)."""
    if re.fullmatch(r"\s*\d+\s*", text):
        return int(text)
    location, eq, bound = text.rpartition("=")
    if not eq or not location or not re.fullmatch(r"\s*\d+\s*", bound):
        raise argparse.ArgumentTypeError(f"{text!r}: write N (every loop) or LOC=N (the loop "
                                         "at LOC, as messages print it), e.g. "
                                         "--max-loop-trips 100")
    return location, int(bound)


class _LoopTrips(argparse.Action):
    """--max-loop-trips: one N, or LOC=N pairs (repeatable), never both."""

    def __call__(self, parser, namespace, value, option_string=None):
        given = getattr(namespace, self.dest, None)
        if isinstance(value, int):
            if given is not None:
                raise argparse.ArgumentError(self, "give one N, or LOC=N pairs, not both")
            setattr(namespace, self.dest, value)
            return
        if given is not None and not isinstance(given, dict):
            raise argparse.ArgumentError(self, "give one N, or LOC=N pairs, not both")
        setattr(namespace, self.dest, {**(given or {}), value[0]: value[1]})


def _help(name: str, default, own_default: bool, note: str) -> str:
    text = field_help()[name].replace("%", "%%")
    if note:  # (a sentence of the field's help goes on: "...; NOTE.")
        text, note = text.rstrip("."), note + "."
    if isinstance(default, bool):
        shown = flag(name) if default else "--no-" + flag(name)[2:]
    else:
        shown = "none" if default is None else str(default)
    where = "here" if own_default else ""
    return f"{text}{note} (default{' ' + where if where else ''}: {shown})"


def add_option_flags(parser, defaults: Optional[Mapping[str, object]] = None,
                     notes: Optional[Mapping[str, str]] = None,
                     names: Optional[Mapping[str, str]] = None) -> None:
    """A flag on `parser` per `LoadOptions` field (see the module docstring).

    `defaults`: this command's own default of some fields (the flag overrides it); `notes`:
    text added to a field's help for this command; `names`: a field's flag, where the
    command's own options already use the field's (`fuzz --seed` picks the programs, so its
    placeholder seed is `--placeholder-seed`)."""
    defaults, names = dict(defaults or {}), dict(names or {})
    notes = {"max_loop_trips": "; here N, or LOC=N (repeatable)", **(notes or {})}
    unknown = set(defaults) | set(notes) | set(names)
    unknown -= {f.name for f in dataclasses.fields(LoadOptions)}
    if unknown:
        raise ValueError(f"no LoadOptions field {sorted(unknown)}")
    group = parser.add_argument_group("how the program is loaded (shlo2jax.LoadOptions)")
    hints = typing.get_type_hints(LoadOptions)
    for field in dataclasses.fields(LoadOptions):
        name = field.name
        own = name in defaults
        default = defaults[name] if own else field.default
        LoadOptions.of(**{name: default})  # a command's own default is a valid value
        # (a command's own default is set apart: given to add_argument, argparse would add
        # its own "(default: ...)" to a --x/--no-x flag's help)
        kwargs = dict(dest=_DEST + name, default=None,
                      help=_help(name, default, own, notes.get(name, "")))
        choices = field_choices(name)
        if hints[name] is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif choices is not None:
            kwargs.update(choices=choices, metavar="{" + ",".join(choices) + "}")
        elif name == "max_loop_trips":
            kwargs.update(type=_loop_trips, action=_LoopTrips, metavar="N|LOC=N")
        elif hints[name] is int:
            kwargs.update(type=_non_negative_int, metavar="N")
        else:
            raise TypeError(f"LoadOptions.{name}: no command-line flag for its type "
                            f"{hints[name]!r}")
        group.add_argument(names.get(name, flag(name)), **kwargs)
        if own:
            parser.set_defaults(**{_DEST + name: default})


def options_from(args: argparse.Namespace) -> LoadOptions:
    """The `LoadOptions` the parsed flags give (`add_option_flags`): each flag given, or the
    command's own default, over `LoadOptions`' defaults."""
    given = {f.name: getattr(args, _DEST + f.name) for f in dataclasses.fields(LoadOptions)
             if getattr(args, _DEST + f.name, None) is not None}
    return LoadOptions.of(**given)


def flags_of(parser) -> dict:
    """{field: its flag} on `parser` (a check that every field has one)."""
    return {action.dest[len(_DEST):]: action.option_strings[0] for action in parser._actions
            if action.dest.startswith(_DEST)}
