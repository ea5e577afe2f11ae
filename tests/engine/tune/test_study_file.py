"""A study file's validation: its own fields with file:line errors, the space's links, and every value
of the space checked against the spec's schema before anything trains; the space's sampling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder import SpecError
from tbuild.engine.tune.space import base_values, suggest
from tbuild.engine.tune.spec import Param, load_study
from tests.conftest import REPO

runner = CliRunner()
BASE = REPO / "specs" / "multi30k-v1.yaml"  # the base of specs/tune/multi30k.yaml


def _study(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(f"base: {BASE}\n{body}")
    return path


GOOD = """\
space:
  train.schedule.lr: {float: [1.0e-4, 3.0e-3], log: true}
  model.encoder.layers: {int: [1, 4]}
  model.decoder.layers: {same_as: model.encoder.layers}
  model.encoder.heads: {choice: [4, 8], when: {model.encoder.layers: [3, 4]}}
budget: {trials: 3, trial_steps: 100}
"""


def test_a_good_study_loads_with_its_defaults(tmp_path: Path) -> None:
    study = load_study(_study(tmp_path, GOOD))
    assert study.name == "study" and study.folder == Path("runs/tune/study")
    assert study.spec.objective.metric == "bleu" and study.spec.objective.maximize
    assert study.spec.sampler.kind == "tpe" and study.pruner.kind == "median"
    assert study.load({"model.encoder.layers": 2}).spec.model.encoder.layers == 2


@pytest.mark.parametrize(("body", "expected"), [
    (GOOD.replace("budget:", "budgett:"), "study.yaml:7:1: budgett: unknown key 'budgett' (did you mean 'budget'?)"),
    (GOOD.replace("[1, 4]", "[4, 1]"), "study.yaml:4:3: space.model.encoder.layers: the range's low (4) must be "
                                       "below its high (1)"),
    (GOOD.replace("{float: [1.0e-4, 3.0e-3], log: true}", "{float: [0.0, 1.0], log: true}"),
     "space.train.schedule.lr: log needs a float or int range with low > 0"),
    (GOOD.replace("{int: [1, 4]}", "{int: [1, 4], choice: [1]}"), "give exactly one of float, int, choice, same_as "
                                                                  "(got int, choice)"),
    (GOOD.replace("when: {model.encoder.layers", "when: {model.encoder.layer"),
     "study.yaml:6:3: space.model.encoder.heads: 'model.encoder.layer' is not another sampled parameter of the "
     "space (did you mean 'model.encoder.layers'?)"),
    (GOOD.replace("same_as: model.encoder.layers", "same_as: model.decoder.layers"),
     "'model.decoder.layers' is not another sampled parameter"),
    (GOOD.replace("budget: {trials: 3, trial_steps: 100}", "budget: {trial_steps: 100}"),
     "budget: give trials and/or minutes: the study needs a stop"),
    (GOOD + "pruner: {kind: threshold}\n", "pruner: threshold goes with kind: threshold, and only with it"),
    (GOOD + "objective: {metric: blue}\n", "study.yaml:8:13: train.select.metric: blue is not a metric of the "
                                           "translation task: choose one of ppl, bleu"),  # the task's metrics
    (GOOD + "objective: {metric: accuracy}\n", "study.yaml:8:13: train.select.metric: accuracy scores a tagger's "
                                             "labels or a classifier's"),  # the objective on a translator
    (GOOD + "speed: {lines: 10}\npruner: {kind: median}\n", "study.yaml:9:10: pruner.kind: median compares one "
                                                           "objective and this study has two (speed)"),
    (GOOD + "sampler: {kind: nsga2}\n", "study.yaml:8:11: sampler.kind: nsga2 searches two objectives; add a speed "
                                        "section"),
    (GOOD + "speed: {repeats: 0}\n", "study.yaml:8:9: speed.repeats: Input should be greater than or equal to 1"),
    (GOOD + "speed: {line: 10}\n", "speed.line: unknown key 'line' (did you mean 'lines'?)"),
])
def test_a_bad_study_file_is_refused_naming_file_line_and_field(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(SpecError) as e:
        load_study(_study(tmp_path, body))
    assert expected in str(e.value)


def test_a_speed_section_makes_two_objectives_and_drops_the_default_pruner(tmp_path: Path) -> None:
    one = load_study(_study(tmp_path, GOOD))
    assert one.directions == ["maximize"] and one.pruner.kind == "median" and one.spec.speed is None
    two = load_study(_study(tmp_path, GOOD + "speed: {lines: 100, threads: 2}\n"))
    assert two.directions == ["maximize", "minimize"] and two.pruner.kind == "none"  # Optuna prunes one objective
    assert (two.spec.speed.lines, two.spec.speed.repeats, two.spec.speed.threads) == (100, 3, 2)
    floor = load_study(_study(tmp_path, GOOD + "speed: {}\npruner: {kind: threshold, threshold: 5}\n"))
    assert floor.pruner.kind == "threshold" and floor.spec.sampler.kind == "tpe"
    ppl = load_study(_study(tmp_path, GOOD + "speed: {}\nobjective: {metric: ppl}\nsampler: {kind: nsga2}\n"))
    assert ppl.directions == ["minimize", "minimize"] and ppl.spec.sampler.population == 20


def test_a_speed_section_on_a_task_whose_decoding_is_not_timed_is_refused(tmp_path: Path) -> None:
    tagger = REPO / "specs" / "examples" / "graphs" / "pos-tagger.yaml"
    path = tmp_path / "study.yaml"
    path.write_text(f"base: {tagger}\nspace:\n  model.head.piece: {{choice: [first, last]}}\n"
                    "objective: {metric: accuracy}\nbudget: {trials: 2}\nspeed: {}\n")
    with pytest.raises(SpecError, match=r"study.yaml:6:1: speed: a decode-time objective times a translator's "
                                        r"\(or parser's\) decoding; the base spec is a tagger"):
        load_study(path)


def test_every_value_of_the_space_is_checked_against_the_spec_before_training(tmp_path: Path) -> None:
    body = GOOD.replace("{int: [1, 4]}", "{int: [0, 4]}").replace("model.encoder.heads:", "model.encoder.head:")
    with pytest.raises(SpecError) as e:
        load_study(_study(tmp_path, body))
    lines = str(e.value).splitlines()
    assert any("study.yaml:4:" in line and "(space.model.encoder.layers = 0)" in line for line in lines), lines
    assert any("study.yaml:6:" in line and "head" in line and "(space.model.encoder.head = 4)" in line
               for line in lines), lines


def test_the_grid_sampler_takes_choices_and_int_ranges_only(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="space.train.schedule.lr: the grid sampler takes choices and int ranges"):
        load_study(_study(tmp_path, GOOD + "sampler: {kind: grid}\n"))
    grid = GOOD.replace("{float: [1.0e-4, 3.0e-3], log: true}", "{choice: [1.0e-4, 1.0e-3]}")
    assert load_study(_study(tmp_path, grid + "sampler: {kind: grid}\n")).spec.sampler.kind == "grid"


def test_the_cli_refuses_a_bad_study_in_one_line_with_exit_2(tmp_path: Path) -> None:
    from tbuild.cli.app import app

    result = runner.invoke(app, ["tune", str(_study(tmp_path, GOOD.replace("[1, 4]", "[4, 1]"))), "--dry-run"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "space.model.encoder.layers: the range's low (4) must be below its high (1)" in result.output


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.cli.app import app

    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["tune", str(_study(tmp_path, GOOD)), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("study study: 4 parameters", "float (0.0001, 0.003) log", "= model.encoder.layers",
                 "model.encoder.layers in [3, 4]", "budget: 3 trials; each trial 100 steps",
                 "objective: validation bleu, maximize", "sqlite:///", "sampler: tpe"):
        assert text in result.output, (text, result.output)
    assert not (tmp_path / "runs").exists()


def test_the_tagger_study_dry_runs_on_validation_accuracy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.cli.app import app

    monkeypatch.chdir(tmp_path)
    study = REPO / "specs" / "tune" / "pos-tagger.yaml"
    result = runner.invoke(app, ["tune", str(study), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("study pos-tagger: 7 parameters", "model.head.piece", "one of ['first', 'last']",
                 "objective: validation accuracy, maximize (best weights; the pruner hears the whole validation "
                 "split's loss pass at each validation)", "budget: 30 training minutes; each trial 3 min"):
        assert text in result.output, (text, result.output)
    assert not (tmp_path / "runs").exists()


def test_the_speed_study_dry_runs_with_its_second_objective(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.cli.app import app

    monkeypatch.chdir(tmp_path)
    study = REPO / "specs" / "tune" / "multi30k-speed.yaml"
    result = runner.invoke(app, ["tune", str(study), "--dry-run"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for text in ("study multi30k-speed: 7 parameters", "model.encoder.layers", "int (3, 8)", "int (1, 4)",
                 "each validation scores 300 lines at beam 1 to pick the best weights; no pruner",
                 "second objective: decode seconds, minimize: the median of 3 decodes of the whole validation split "
                 "as `tbuild decode` runs them (beam 4, alpha 1.2", "threads: 2", "sampler: tpe", "pruner: none"):
        assert text in result.output, (text, result.output)
    assert not (tmp_path / "runs").exists()
    base = load_study(study).load({}).spec
    assert (base.model.encoder.layers, base.model.decoder.layers) == (3, 4)  # the recipe: its baseline trial


class FakeTrial:
    """Answers suggest_* with the low end (or the last choice) and records what was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float:
        self.asked.append(name)
        return low

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int:
        self.asked.append(name)
        return high

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        self.asked.append(name)
        return choices[-1]


def test_conditions_and_ties_decide_what_is_asked() -> None:
    space = {key: Param.model_validate(value) for key, value in yaml.safe_load(GOOD)["space"].items()}
    trial = FakeTrial()
    values = suggest(space, trial)
    assert values == {"train.schedule.lr": 1e-4, "model.encoder.layers": 4, "model.decoder.layers": 4,
                      "model.encoder.heads": 8}
    assert trial.asked == ["train.schedule.lr", "model.encoder.layers", "model.encoder.heads"]
    space["model.encoder.layers"] = Param.model_validate({"int": [1, 2]})
    assert "model.encoder.heads" not in suggest(space, FakeTrial())  # its condition fails: the base's value stays
    space["model.encoder.heads"] = Param.model_validate({"choice": [[1, 2], [3]]})
    assert suggest(space, FakeTrial())["model.encoder.heads"] == [3]  # a list choice goes by its index


def test_the_baseline_trial_takes_the_base_specs_values_inside_the_space(tmp_path: Path) -> None:
    study = load_study(_study(tmp_path, GOOD))
    base = study.load({}).spec.model_dump(mode="json")
    assert base_values(study.spec.space, base) == {"train.schedule.lr": 1e-3, "model.encoder.layers": 3,
                                                   "model.encoder.heads": 4}  # decoder layers: tied, not asked
    base["model"]["encoder"]["layers"] = 2  # heads' condition fails: heads left to the sampler
    assert "model.encoder.heads" not in base_values(study.spec.space, base)
    base["train"]["schedule"]["lr"] = 1.0  # outside the range
    assert "train.schedule.lr" not in base_values(study.spec.space, base)
    stepped = Param.model_validate({"int": [200, 1200], "step": 200})
    assert stepped.admits(1000) and not stepped.admits(1100) and not stepped.admits(1400)
    assert Param.model_validate({"float": [0.1, 0.3]}).admits(0.2)
    assert not Param.model_validate({"int": [1, 3]}).admits(1.5)


@pytest.mark.parametrize("path", sorted((REPO / "specs" / "tune").glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_studies_validate(path: Path) -> None:
    study = load_study(path)
    assert study.spec.budget.minutes
    assert study.spec.objective.metric == ("accuracy" if path.name.startswith("pos-tagger") else "bleu")


@pytest.mark.parametrize("path", sorted((REPO / "specs" / "tune" / "best").glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_best_specs_validate(path: Path) -> None:
    from tbuild.builder import load_spec

    loaded = load_spec(path)
    base = load_study(REPO / "specs" / "tune" / path.name).load({}).spec  # its study's base, as a trial
    assert loaded.spec.train.max_minutes == base.train.max_minutes  # the recipe's budget, not the trials'
    assert loaded.spec.data.train == base.data.train  # relative to the file
    assert loaded.spec.data.train.startswith(str(REPO / "data"))
