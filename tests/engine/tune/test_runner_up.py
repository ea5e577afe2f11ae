"""`tbuild tune`'s report: the best trial against the runner-up by paired bootstrap of the objective's metric on
the validation outputs the two trials kept (a trial without kept outputs is named instead); a study with seeds
trains each trial once per seed, its value their mean, and reports each trial's mean ± sd."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.cli.toy_tagger import tagger_spec
from tests.engine.tune.test_tune import _write_study

pytest.importorskip("optuna", reason="the tune extra (Optuna) is not installed")
runner = CliRunner()

WORDS = "cats dogs birds\nthe can rusts\nyou can can\nthe dogs can\nyou can rust\n"
TAGS = "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\nDT NNS MD\nPRP MD VBZ\n"


def _tagger_study(tmp_path: Path, extra: str = "") -> Path:
    """A two-trial grid study of a tiny tagger's learning rate, its objective the validation accuracy."""
    for split in ("train", "valid"):
        (tmp_path / f"{split}.words").write_text(WORDS)
        (tmp_path / f"{split}.tags").write_text(TAGS)
    base = tagger_spec("train", "valid", max_steps=100, schedule={"kind": "inverse_sqrt", "lr": 1e-3, "warmup": 2})
    return _write_study(tmp_path, base, """\
space:
  train.schedule.lr: {choice: [1.0e-4, 3.0e-3]}
objective: {metric: accuracy}
budget: {trials: 2, trial_steps: 6}
sampler: {kind: grid}
pruner: {kind: none}
""" + extra)


def test_the_report_compares_the_best_trial_with_the_runner_up(tmp_path: Path) -> None:
    from tbuild.cli.app import app
    from tbuild.engine.significance import accuracy_measure, paired_bootstrap, summary

    study = _tagger_study(tmp_path)
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = [json.loads(p.read_text()) for p in sorted((tmp_path / "study" / "trials").glob("*/trial.json"))]
    best, second = sorted(trials, key=lambda t: -t["value"])  # ties: the first trial, as Optuna's sort keeps it
    report = (tmp_path / "study" / "report.md").read_text()
    line = next(x for x in report.splitlines() if x.startswith("**Best against the runner-up**"))
    assert f"(trial {best['trial']} − trial {second['trial']}, validation)" in line
    outputs = [(tmp_path / "study" / "trials" / f"trial-{t['trial']:03d}" / "eval_valid.out").read_text().splitlines()
               for t in (best, second)]
    measure = accuracy_measure([tags.split() for tags in TAGS.splitlines()])
    again = paired_bootstrap(measure, [measure.statistics(outputs[0])], [measure.statistics(outputs[1])])
    assert summary(again) in line and again.system == pytest.approx(100 * best["value"])
    assert ("; significant (p < 0.05)" in line) == (again.p_value < 0.05) != ("not significant (p ≥ 0.05)" in line)
    assert re.search(r"sacreBLEU's paired bootstrap, 1,000 resamples", line)

    (tmp_path / "study" / "trials" / f"trial-{second['trial']:03d}" / "eval_valid.out").unlink()
    rewritten = runner.invoke(app, ["tune", str(study), "--report"])
    assert rewritten.exit_code == 0, rewritten.output
    assert f"not compared: trial {second['trial']} kept no validation outputs" in (
        tmp_path / "study" / "report.md").read_text()


def test_seeds_train_each_trial_per_seed_and_report_the_mean(tmp_path: Path) -> None:
    import statistics

    from tbuild.cli.app import app
    from tbuild.engine.significance import accuracy_measure, paired_bootstrap, summary

    study = _tagger_study(tmp_path, "seeds: [3, 4]\n")
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = tmp_path / "study" / "trials"
    report = (tmp_path / "study" / "report.md").read_text()
    measure = accuracy_measure([tags.split() for tags in TAGS.splitlines()])
    stats = {}
    for folder in sorted(trials.iterdir()):
        runs = [folder, folder / "seeds" / "seed-4"]
        assert [yaml.safe_load((r / "spec.yaml").read_text())["train"]["seed"] for r in runs] == [3, 4]
        accuracies = [json.loads((r / "eval_valid.json").read_text())["accuracy"] for r in runs]
        kept = json.loads((folder / "seeds.json").read_text())
        trial = json.loads((folder / "trial.json").read_text())
        assert kept["values"] == {"3": accuracies[0], "4": accuracies[1]}
        assert trial["value"] == kept["mean"] == pytest.approx(statistics.fmean(accuracies))
        assert kept["sd"] == pytest.approx(statistics.stdev(accuracies))
        assert f"trial {trial['trial']} {kept['mean']:.4g} ± {kept['sd']:.2g}" in report
        stats[trial["trial"]] = (trial["value"], [measure.statistics((r / "eval_valid.out").read_text().splitlines())
                                                  for r in runs])
    assert "**Seeds** 3, 4: each trial's accuracy is the mean over them" in report
    best, second = sorted(stats, key=lambda n: -stats[n][0])
    line = next(x for x in report.splitlines() if x.startswith("**Best against the runner-up**"))
    assert f"(trial {best} − trial {second}, validation, the mean over seeds 3, 4)" in line
    pooled = paired_bootstrap(measure, stats[best][1], stats[second][1])
    assert summary(pooled) in line and pooled.system == pytest.approx(100 * stats[best][0])
