"""What the CLI shows of itself: help that reads the same with any typer (a flag without a value, arguments in
capitals), --debug after the command, and a study file given to validate or inspect pointing to tune."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import REPO

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
COMMANDS = sorted(typer.main.get_command(app).list_commands(None))  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS), ["data", "fetch"]], ids=lambda c: " ".join(c))
def test_help_shows_flags_without_a_value_and_arguments_in_capitals(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage


def test_decode_usage_names_its_targets() -> None:
    usage = runner.invoke(app, ["decode", "--help"], env=WIDE).output
    assert "[OPTIONS] TARGETS..." in usage


def test_a_flag_given_a_value_is_refused() -> None:
    result = runner.invoke(app, ["inspect", str(REPO / "specs/base.yaml"), "--json", "true"])
    assert result.exit_code == 2


def test_debug_after_the_command_shows_the_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    quiet = runner.invoke(app, ["validate", missing])
    assert quiet.exit_code == 2 and "no such spec" in quiet.output
    for args in (["--debug", "validate", missing], ["validate", missing, "--debug"]):
        loud = runner.invoke(app, args)
        assert loud.exit_code != 0 and loud.exception is not None and "no such spec" in str(loud.exception)
    assert runner.invoke(app, ["validate", missing]).exception.__class__ is SystemExit  # not left on


@pytest.mark.parametrize("command", ["validate", "inspect"])
def test_a_study_file_points_to_tune_dry_run(command: str) -> None:
    study = REPO / "specs" / "tune" / "multi30k.yaml"
    result = runner.invoke(app, [command, str(study)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: {study}: this is a study file, not a spec: run `tbuild tune {study} --dry-run` to validate every "
        "value of its space and print its plan"]


def test_a_gpu_estimate_without_max_steps_says_how_to_give_it() -> None:
    result = runner.invoke(app, ["inspect", str(REPO / "specs/multi30k.yaml"), "--gpus", "8", "--set",
                                 "train.max_steps=null"], env=WIDE)
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].endswith("add --set train.max_steps=N")
    given = runner.invoke(app, ["inspect", str(REPO / "specs/multi30k.yaml"), "--gpus", "8", "--set",
                                "train.max_steps=6000"], env=WIDE)
    assert given.exit_code == 0 and "6,000 updates" in given.output


def test_no_help_text_holds_an_angle_bracketed_word() -> None:
    """The help is rendered as Markdown, where ``<name>`` is an HTML tag and disappears: write NAME."""
    root = typer.main.get_command(app)
    found = []
    for name in COMMANDS:
        command = root.get_command(None, name)  # type: ignore[attr-defined]
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        found += [f"{name}: {t}" for t in texts if re.search(r"<[A-Za-z_][\w.-]*>", t)]
    assert found == []
