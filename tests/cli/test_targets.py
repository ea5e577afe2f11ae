"""One CLI: every command that names a model takes a spec, a run directory or a checkpoint; every
user error exits 2 with one line; option names mean one thing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()
SENTENCE = "A dog runs in the snow.\n"


def _serve_extra() -> bool:
    """Whether FastAPI and uvicorn import: without them serve says to install them before reading its target."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


SERVE = _serve_extra()
NO_SERVE = pytest.mark.skipif(not SERVE, reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")


@pytest.fixture(scope="module")
def trained(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the tiny run (the commands write into it) and the three ways to name it."""
    root = tmp_path_factory.mktemp("targets")
    run = root / "run"
    shutil.copytree(tiny_run, run)
    spec = yaml.safe_load((tiny_run.parent / "spec.yaml").read_text()) | {"output_dir": str(run)}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    return {"spec": root / "spec.yaml", "run": run, "checkpoint": run / "checkpoints" / "step_00000030.safetensors"}


# command, its arguments after the target, stdin, what its output says
COMMANDS = {
    "inspect": ([], None, "parameters per block"),
    "validate": ([], None, "d_model: 32"),
    "decode": ([], SENTENCE, None),
    "evaluate": (["--show", "0"], None, "BLEU"),
    "attention": (["--text", "A dog runs.", "--layers", "0", "--heads", "0"], None, "wrote"),
    "export": (["--check", "none"], None, "wrote"),
    "average": (["--last", "2"], None, "averaged step_00000020.safetensors, step_00000030.safetensors"),
    "plot": ([], None, "curves.png"),
    "data prepare": ([], None, "pairs"),
    "card": ([], None, "## Intended use and limits"),
}


@pytest.mark.parametrize("form", ["spec", "run", "checkpoint"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_every_target_form(command: str, form: str, trained: dict[str, Path]) -> None:
    args, stdin, says = COMMANDS[command]
    result = runner.invoke(app, [*command.split(), str(trained[form]), *args], input=stdin,
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert says is None or says in result.output
    if command == "decode":
        assert len(result.stdout.splitlines()) == 1


# decode's modes: its arguments after the target ("TARGET": the target again), stdin, output lines
DECODE_MODES = {
    "sampling": (["--sampling", "topk", "--topk", "3", "--nbest", "2", "--seed", "4"], SENTENCE, 2),
    "prefix": ([], "A dog runs in the snow.\tEin\n", 1),
    "no-repeat-ngram": (["--no-repeat-ngram", "2"], SENTENCE, 1),
    "jsonl": (["--format", "jsonl", "--align"], SENTENCE, 1),
    "ensemble": (["TARGET", "--combine", "prob"], SENTENCE, 1),
}


@pytest.mark.parametrize("form", ["spec", "run", "checkpoint"])
@pytest.mark.parametrize("mode", DECODE_MODES)
def test_every_decode_mode_takes_every_target_form(mode: str, form: str, trained: dict[str, Path]) -> None:
    args, stdin, lines = DECODE_MODES[mode]
    args = [str(trained[form]) if a == "TARGET" else a for a in args]
    result = runner.invoke(app, ["decode", str(trained[form]), *args], input=stdin)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == lines


# serve runs until stopped: tests/cli/test_serve.py
@pytest.mark.parametrize("command", [*COMMANDS, pytest.param("serve", marks=NO_SERVE)])
def test_a_missing_target_is_one_line_exit_2(command: str, tmp_path: Path) -> None:
    args, stdin, _ = COMMANDS.get(command, ([], None, None))
    result = runner.invoke(app, [*command.split(), str(tmp_path / "nope.yaml"), *args], input=stdin)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {tmp_path / 'nope.yaml'}: no such spec, run directory or "
                                                  "checkpoint"]


@pytest.mark.parametrize("command", ["average", "plot", "decode"])
def test_an_untrained_spec_says_to_train_it(command: str, tmp_path: Path) -> None:
    spec = tmp_path / "fresh.yaml"
    spec.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "run")}))
    result = runner.invoke(app, [command, str(spec)], input=SENTENCE)
    assert result.exit_code == 2
    assert "train" in result.output and len(result.output.strip().splitlines()) == 1


def test_user_errors_exit_2(trained: dict[str, Path], tmp_path: Path) -> None:
    cases = [
        (["decode", str(trained["run"]), "--input", str(tmp_path / "none.txt")], "input file not found"),
        (["evaluate", str(trained["run"]), "--split", "train"], "--split must be test or valid"),
        (["average", str(trained["run"]), "--last", "9"], "only 3 exist"),
        (["export", str(trained["run"]), "--to", "onnx"], "targets are"),
        (["inspect", str(trained["spec"]), "--set", "model.d_model", "64"], "did you forget the '='?"),
        (["decode", str(trained["run"]), "--bogus"], "No such option"),
        (["decode", str(trained["run"]), "--format", "xml"], "--format 'xml': choose one of text, jsonl"),
        (["decode", str(trained["run"]), "--align"], "--align writes alignments into --format jsonl"),
        (["decode", str(trained["run"]), "--profile", "nope"], "no such decode profile"),
        (["decode", str(trained["run"]), "--sampling", "beam"], "decode.sampling: Input should be"),
        (["decode", str(trained["run"]), "--weights", "1"], "--weights needs several runs"),
        (["decode", str(trained["run"]), str(trained["run"]), "--weights", "a,b"], "expected comma-separated numbers"),
        (["decode", str(trained["run"]), str(trained["run"]), "--combine", "max"], "--combine 'max': choose one of"),
        (["evaluate", str(trained["run"]), "--profile", "nope"], "no such decode profile"),
    ]
    if SERVE:
        cases.append((["serve", str(trained["run"]), "--max-lines", "0"], "--max-lines must be positive"))
    for args, says in cases:
        result = runner.invoke(app, args, input=SENTENCE, env={"COLUMNS": "200"})
        assert result.exit_code == 2, (args, result.output)
        assert says in result.output, (args, result.output)


def test_bare_average_uses_the_specs_average_last(trained: dict[str, Path]) -> None:
    result = runner.invoke(app, ["average", str(trained["run"]), "--set", "train.average_last=2"])
    assert result.exit_code == 0, result.output
    assert "averaged step_00000020.safetensors, step_00000030.safetensors" in result.output
    assert (trained["run"] / "averaged_last2.safetensors").exists()
    # decode's bare --average: average_last is 5 in this spec, and the run has only 3 checkpoints
    too_few = runner.invoke(app, ["decode", str(trained["run"]), "--average"], input=SENTENCE)
    assert too_few.exit_code == 2 and "asked for the newest 5 checkpoints but only 3 exist" in too_few.output
    bare = runner.invoke(app, ["decode", str(trained["run"]), "--average", "--set", "train.average_last=3"],
                         input=SENTENCE)
    given = runner.invoke(app, ["decode", str(trained["run"]), "--average", "3"], input=SENTENCE)
    # a run that keeps 3 (train.keep_last) averages at most 3, whatever average_last says
    kept = runner.invoke(app, ["decode", str(trained["run"]), "--average", "--set", "train.keep_last=3"],
                         input=SENTENCE)
    assert bare.exit_code == given.exit_code == kept.exit_code == 0, bare.output + kept.output
    assert bare.stdout == given.stdout == kept.stdout


def test_one_name_per_option() -> None:
    """-k is the beam only; outputs are -o/--output; --src is a file (evaluate), the sentence is --text."""
    import typer.main
    from typer.core import TyperOption

    seen: dict[str, set[str]] = {}

    def walk(cmd, name: str) -> None:  # noqa: ANN001 - typer's (vendored) click command or group
        for sub, child in getattr(cmd, "commands", {}).items():
            walk(child, f"{name} {sub}".strip())
        for param in cmd.params:
            if isinstance(param, TyperOption):
                for opt in param.opts + param.secondary_opts:
                    seen.setdefault(opt, set()).add(param.name or "")
                assert not {"--out", "--dest"} & set(param.opts), f"{name}: {param.opts}"
                if "--output" in param.opts:
                    assert "-o" in param.opts, name

    walk(typer.main.get_command(app), "")
    assert seen["-k"] == {"beam"} and seen["-o"] == {"output"}
    for opt, names in seen.items():
        assert len(names) == 1, f"{opt} means {names}"


def console_script() -> str | None:
    """The tbuild console script of the installed tbuild: beside this Python (a virtual environment), in the
    scripts folder of this Python's or its user's scheme, or in the bin folder of ``pip install --target DIR``
    (DIR/bin, with DIR on PYTHONPATH); None when it is in none of them."""
    import sysconfig
    from importlib.metadata import distribution

    folders = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts")),
               Path(sysconfig.get_path("scripts", f"{os.name}_user")),
               Path(str(distribution("tbuild").locate_file(""))) / "bin"]
    return shutil.which("tbuild", path=os.pathsep.join(map(str, folders)))


def test_version() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"tbuild {version('tbuild')}"


def test_the_console_script_prints_and_answers_completion() -> None:
    tbuild = console_script()
    if tbuild is None:
        pytest.skip("no tbuild console script beside this Python, in its scripts folders or in the install's bin "
                    "folder (tbuild reached through PYTHONPATH alone)")
    # the bash script named by the completion variable: --show-completion takes the shell it runs under (none
    # under a test runner started without one, "Shell  not supported.")
    source = os.environ | {"_TBUILD_COMPLETE": "source_bash"}
    script = subprocess.run([tbuild], capture_output=True, text=True, env=source)
    assert script.returncode == 0, script.stderr
    assert "complete -o default -F _tbuild_completion tbuild" in script.stdout
    for words, cword, expect in (("tbuild dec", 1, "decode"), ("tbuild decode run --bea", 3, "--beam")):
        env = os.environ | {"_TBUILD_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        done = subprocess.run([tbuild], capture_output=True, text=True, env=env)
        assert done.returncode == 0 and done.stdout.split() == [expect], done.stderr
