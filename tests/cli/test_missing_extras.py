"""A missing optional package (one of pyproject.toml's extras) stops every command that needs it with one
line naming the extra, as installed from an index and from a clone: exit 2, no traceback, nothing written.
The package is hidden by a ``None`` in ``sys.modules``, which makes its import fail as if it were absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.errors import TbuildError
from tbuild.engine.extras import check_installed, install_hint, require
from tests.cli.test_lm import train_llama_like
from tests.conftest import tiny_train_spec

runner = CliRunner()
SENTENCE = "A dog runs in the snow.\n"


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``import module`` fail for each of ``modules`` until the test ends."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def assert_one_line_naming(result: Result, package: str, extra: str, *, alone: bool = True) -> None:
    """``result`` ends with one error line naming ``package`` and how to install ``extra`` (``alone``: the only
    line), exit 2 and no traceback."""
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert "Traceback" not in result.output and [x for x in lines if x.startswith("error:")] == lines[-1:], lines
    line = lines[-1]
    assert len(lines) == 1 or not alone, lines
    assert f"needs the {package} package" in line, line
    assert line.endswith(f"pip install 'tbuild[{extra}]' (from a clone: pip install -e '.[{extra}]')"), line


def test_the_hint_names_the_extra_both_ways_and_a_plugins_package_as_it_is() -> None:
    assert install_hint("tbuild[serve]") == "pip install 'tbuild[serve]' (from a clone: pip install -e '.[serve]')"
    assert install_hint("tbuild-wandb>=1") == "pip install 'tbuild-wandb>=1'"


def test_require_imports_or_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert require("json", "tbuild[x]", "p").dumps(1) == "1"
    hide(monkeypatch, "yaml")
    with pytest.raises(TbuildError, match=r"^p needs the yaml package: pip install 'tbuild\[x\]' "):
        require("yaml", "tbuild[x]", "p")
    with pytest.raises(TbuildError, match=r"^p needs the yaml package: "):
        check_installed("yaml", "tbuild[x]", "p")


def test_a_package_that_is_installed_but_broken_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "tbuild_broken", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Broken(), *sys.meta_path])
    with pytest.raises(TbuildError, match=r"needs the tbuild_broken package, which fails to import \(No module named "
                                          r"'tbuild_no_such_dependency'\): pip install"):
        require("tbuild_broken", "tbuild[x]", "p")


class _Broken:
    """A meta path finder whose module ``tbuild_broken`` is found but imports a package that is not."""

    def find_spec(self, name: str, path: object, target: object = None):  # noqa: ANN201
        import importlib.machinery

        if name != "tbuild_broken":
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: object) -> None:
        return None

    def exec_module(self, module: object) -> None:
        import tbuild_no_such_dependency  # noqa: F401


@pytest.mark.parametrize(("to", "package"), [("ctranslate2", "ctranslate2"), ("hf", "transformers")])
def test_export_without_its_runtime(to: str, package: str, tiny_run: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, package)
    fits = ["--set", "model.norm.eps=1e-5"] if to == "hf" else []  # MarianMTModel's; refused before the package
    result = runner.invoke(app, ["export", str(tiny_run), "--to", to, "--check", "none", "-o", str(tmp_path / "x"),
                                 *fits])
    assert_one_line_naming(result, package, "export")
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def lm_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny LM that both runtimes can hold (SwiGLU, RMSNorm, untied), trained 4 steps."""
    return train_llama_like(tiny_corpus, tmp_path_factory.mktemp("lm-extras"))


@pytest.mark.parametrize(("to", "package"), [("ctranslate2", "ctranslate2"), ("ctranslate2", "transformers"),
                                             ("hf", "transformers")])
def test_export_of_a_language_model_without_its_runtime(to: str, package: str, lm_run: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, package)
    result = runner.invoke(app, ["export", str(lm_run), "--to", to, "--check", "none", "-o", str(tmp_path / "x")])
    assert_one_line_naming(result, package, "export")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("command", ["decode", "evaluate"])
def test_the_ctranslate2_engine_without_ctranslate2(command: str, tiny_run: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "ctranslate2")
    result = runner.invoke(app, [command, str(tiny_run), "--engine", "ctranslate2"], input=SENTENCE)
    assert_one_line_naming(result, "ctranslate2", "export")
    assert not list(tiny_run.glob("ctranslate2-*"))


@pytest.mark.parametrize("package", ["fastapi", "uvicorn"])
def test_serve_without_fastapi_or_uvicorn(package: str, tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, package)
    result = runner.invoke(app, ["serve", str(tiny_run), "--port", "0"])
    assert_one_line_naming(result, package, "serve")


@pytest.mark.parametrize("package", ["tensorboard", "mlflow"])
def test_a_tracker_without_its_package(package: str, tiny_corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, package)
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", log=["jsonl", package])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "spec.yaml")])
    assert_one_line_naming(result, package, package)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # nothing trained


def _base(tiny_corpus: Path, tmp_path: Path) -> None:
    base = tiny_train_spec(tiny_corpus, tmp_path / "unused", max_steps=3, validate_every=3, checkpoint_every=3)
    base.pop("output_dir")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))


def _study(tiny_corpus: Path, tmp_path: Path) -> Path:
    _base(tiny_corpus, tmp_path)
    (tmp_path / "study.yaml").write_text(f"base: base.yaml\noutput_dir: {tmp_path / 'study'}\n"
                                         "space: {train.schedule.lr: {choice: [1.0e-3, 2.0e-3]}}\n"
                                         "budget: {trials: 1, trial_steps: 3}\n")
    return tmp_path / "study.yaml"


def test_tune_without_optuna_dry_runs_and_stops_before_a_trial(tiny_corpus: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "optuna")
    study = _study(tiny_corpus, tmp_path)
    assert runner.invoke(app, ["tune", str(study), "--dry-run"]).exit_code == 0
    assert_one_line_naming(runner.invoke(app, ["tune", str(study)]), "optuna", "tune")
    assert not (tmp_path / "study" / "trials").exists()


def test_tune_workers_without_submitit(tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("optuna", reason="the tune extra (Optuna) is not installed")
    hide(monkeypatch, "submitit")
    result = runner.invoke(app, ["tune", str(_study(tiny_corpus, tmp_path)), "--launcher", "submitit"])
    assert_one_line_naming(result, "submitit", "submitit", alone=False)  # after the study's plan
    assert not (tmp_path / "study" / "submitit").exists()


def test_a_sweep_without_submitit(tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "submitit")
    _base(tiny_corpus, tmp_path)
    (tmp_path / "sweep.yaml").write_text(f"base: base.yaml\noutput_dir: {tmp_path / 'out'}\nrows:\n  - {{name: a}}\n")
    result = runner.invoke(app, ["sweep", str(tmp_path / "sweep.yaml"), "--launcher", "submitit"])
    assert_one_line_naming(result, "submitit", "submitit")
    assert not (tmp_path / "out" / "submitit").exists()
