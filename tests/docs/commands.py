"""A documented `tbuild …` line checked against the CLI itself (the typer app as click sees it): the command
exists, each option exists for it, a flag takes no value, --set has KEY=VALUE, and the arguments fit."""

from __future__ import annotations

import re
import shlex
from typing import Any

import typer

from tbuild.cli.app import app
from tbuild.cli.common import Command

ROOT = typer.main.get_command(app)
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(…|\.\.\.)?$|…|\|")  # TARGET, RUN…, a|b: a word standing for values
REDIRECT = re.compile(r"^\d?[<>]")


def words(command: str, synopsis: bool) -> list[str]:
    """The words after ``tbuild``: shell redirections dropped; a synopsis' optional brackets dropped too."""
    text = command.replace("\\|", "|")
    if synopsis:
        text = re.sub(r"(?<=\s)\[|\](?=\s|$)", " ", text)
    out: list[str] = []
    tokens = shlex.split(text)[1:]
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif REDIRECT.match(token):
            skip = REDIRECT.fullmatch(token) is not None or token in ("<", ">")
            skip = skip or token.rstrip("<>0123456789") == ""
        else:
            out.append(token)
    return out


def problems(command: str, synopsis: bool) -> list[str]:
    """What is wrong with a documented command line (empty when nothing is); ``synopsis``: an inline
    `tbuild …` that may leave out required arguments and use placeholders."""
    rest = words(command, synopsis)
    group: Any = ROOT
    path = ["tbuild"]
    while hasattr(group, "list_commands"):  # a group (typer's own click, or click's)
        while rest and rest[0].startswith("-"):
            error = _option_problem(group, rest, path)
            if error:
                return [error]
        if not rest:
            return []
        name = rest.pop(0)
        if PLACEHOLDER.search(name):
            return []  # `tbuild COMMAND --help`
        ctx = typer.Context(group)
        sub = group.get_command(ctx, name)
        if sub is None:
            return [f"{' '.join(path)}: no command {name!r}; commands: {', '.join(group.list_commands(ctx))}"]
        group, path = sub, [*path, name]
    return _command_problems(group, rest, path, synopsis)


def _command_problems(command: Any, rest: list[str], path: list[str], synopsis: bool) -> list[str]:
    positional: list[str] = []
    errors: list[str] = []
    while rest:
        if rest[0].startswith("-") and rest[0] != "-":
            error = _option_problem(command, rest, path)
            if error:
                errors.append(error)
        else:
            positional.append(rest.pop(0))
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    unbounded = any(a.nargs < 0 for a in arguments)
    most = sum(max(a.nargs, 0) for a in arguments)
    fewest = sum(1 for a in arguments if a.required)
    if not unbounded and len(positional) > most:
        errors.append(f"{' '.join(path)}: {len(positional)} arguments ({' '.join(positional)}), it takes {most}")
    if not synopsis and len(positional) < fewest:
        errors.append(f"{' '.join(path)}: {len(positional)} arguments, it needs {fewest}")
    return errors


def _option_problem(command: Any, rest: list[str], path: list[str]) -> str | None:
    """Consume the option at ``rest[0]`` (and its value); the problem with it, if any."""
    word = rest.pop(0)
    name, eq, value = word.partition("=")
    if name in Command.ANYWHERE:
        return None
    options = {opt: p for p in command.get_params(typer.Context(command)) if p.param_type_name == "option"
               for opt in [*p.opts, *p.secondary_opts]}
    if name not in options:
        known = ", ".join(sorted(o for o in options if o.startswith("--")))
        return f"{' '.join(path)}: no option {name}; options: {known}"
    param = options[name]
    if param.is_flag:
        return f"{' '.join(path)}: {name} is a flag and takes no value ({word})" if eq else None
    optional_value = param.metavar == "[K]"  # --average alone (cli/common.Command)
    if not eq:
        if not rest or rest[0].startswith("-") or (optional_value and not rest[0].isdigit()):
            return None if optional_value else f"{' '.join(path)}: {name} needs a value"
        value = rest.pop(0)
    return _value_problem(param, name, value, path)


def _value_problem(param: Any, name: str, value: str, path: list[str]) -> str | None:
    """--set's KEY=VALUE (the values' types are the command's own business: placeholders stand for them)."""
    if "--set" in param.opts and "=" not in value:
        return f"{' '.join(path)}: {name} {value}: expected KEY=VALUE"
    return None
