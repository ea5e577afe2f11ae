"""What every command shares: consoles, spec loading, one-line errors with exit codes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    from tbuild.builder.loader import LoadedSpec

console = Console()
err_console = Console(stderr=True)
state = {"debug": False}

F = TypeVar("F", bound=Callable[..., Any])

def _known_errors() -> dict[type[BaseException], int]:
    """User-facing error types and their exit codes (imported lazily: torch loads slowly). Every error
    a user can fix exits 2, as click's usage errors do; a failure of tbuild itself keeps its traceback."""
    from tbuild.builder.loader import SpecError
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.export.targets import UnsupportedExport

    return {SpecError: 2, UnsupportedExport: 2, TbuildError: 2}


def plain_flags(params: list[Any]) -> list[Any]:
    """``params`` with each flag's metavar emptied: a flag takes no value, so no type is shown beside it."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class Group(TyperGroup):
    """The `tbuild` command and its `data` group: flags shown without a value in their help, as in commands'."""

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_flags(super().get_params(ctx))


class Command(TyperCommand):
    """A tbuild command: ``--average`` may stand alone (given as 0, read as the spec's
    ``train.average_last``), which click's options cannot express; ``--debug`` (``ANYWHERE``) may come after
    the command too; and its help shows a flag without a value and arguments as ``SPEC``, ``TARGETS...``
    with any typer (0.29 prints ``--json <bool>`` and ``{spec}``)."""

    ANYWHERE = ("--debug",)  # the app's options a command also takes

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_flags(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, arg in enumerate(args):
            if arg == "--":
                out += args[i:]
                break
            if arg in self.ANYWHERE:
                state["debug"] = True
                continue
            out.append(arg)
            if arg == "--average" and (i + 1 == len(args) or not args[i + 1].isdigit()):
                out.append("0")
        return super().parse_args(ctx, out)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] SPEC [MORE]...``: an argument by its name in capitals, in brackets when optional."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = (param.metavar or param.name or "").upper()
                name = name if param.required else f"[{name}]"
                pieces.append(name + ("..." if param.nargs != 1 else ""))
        return pieces


def notify(message: str) -> None:
    """A side note of a command on stderr (dim), e.g. the precision it chose; ``warning: …`` in yellow."""
    if message.startswith("warning: "):
        err_console.print(f"[yellow]warning:[/] {message[9:]}", highlight=False, soft_wrap=True)
    else:
        err_console.print(f"[dim]{message}[/]", highlight=False, soft_wrap=True)


def guarded(fn: F) -> F:
    """Turn known errors into one red line on stderr and an exit code; tracebacks only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as e:
            if state["debug"]:
                raise
            for kind, code in _known_errors().items():
                if isinstance(e, kind):
                    for line in str(e).splitlines() or [type(e).__name__]:
                        # escaped: a message's brackets (pip install 'tbuild[serve]') are text, not rich markup
                        err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
                    raise typer.Exit(code) from None
            raise

    return wrapper  # type: ignore[return-value]


def load(spec: Path, sets: list[str] | None) -> LoadedSpec:
    """A spec file, or the resolved spec of a run directory or checkpoint, with --set overrides."""
    from tbuild.engine.run.directory import load_target

    refuse_overlay(spec)
    return load_target(spec, sets or [])


def refuse_overlay(path: Path) -> None:
    """A sweep or study file given where a spec belongs: one line pointing to ``tbuild sweep FILE --dry-run``
    or ``tbuild tune FILE --dry-run`` (exit 2) instead of an unknown-key error per key. Such a file is a
    mapping with ``base`` and only its own keys (a study's include ``space``); anything else is left to the
    spec loader, whose errors are the precise ones."""
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.sweep.spec import SweepSpec
    from tbuild.engine.tune.spec import StudySpec

    if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
        return
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    if not isinstance(data, dict) or "base" not in data:
        return
    if set(data) <= set(SweepSpec.model_fields):
        raise TbuildError(f"{path}: this is a sweep file, not a spec: run `tbuild sweep {path} --dry-run` to "
                          "validate every row and print its plan")
    if "space" in data and set(data) <= set(StudySpec.model_fields):
        raise TbuildError(f"{path}: this is a study file, not a spec: run `tbuild tune {path} --dry-run` to "
                          "validate every value of its space and print its plan")
