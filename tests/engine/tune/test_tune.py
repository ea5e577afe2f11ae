"""`tbuild tune` end to end on a tiny spec: trials train in run folders and are scored on validation,
a pruner prunes by its rule, the report matches the run folders, the best spec validates and trains,
a killed worker's trial is retried and resumes its run, and two processes share one storage."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder import load_spec
from tests.cli.toy_tagger import tagger_spec
from tests.conftest import tiny_train_spec

pytest.importorskip("optuna", reason="the tune extra (Optuna) is not installed")
runner = CliRunner()
TBUILD = [sys.executable, "-c", "from tbuild.cli.app import main; main()"]


def _study(tmp_path: Path, tiny_corpus: Path, extra: str = "", *, steps: int = 4, trials: int = 2) -> Path:
    base = tiny_train_spec(tiny_corpus, tmp_path / "unused", max_steps=1000, validate_every=2, checkpoint_every=2)
    base.pop("output_dir")
    base["decode"] = {"beam": 1, "max_len_a": 1.0, "max_len_b": 5}
    return _write_study(tmp_path, base, f"""\
space:
  train.schedule.lr: {{float: [1.0e-4, 3.0e-3], log: true}}
  model.dropout.residual: {{choice: [0.0, 0.1]}}
objective: {{metric: bleu, lines: 8}}
budget: {{trials: {trials}, trial_steps: {steps}}}
sampler: {{kind: random, seed: 3}}
{extra}""")


def _write_study(tmp_path: Path, base: dict, rest: str) -> Path:
    """study.yaml over base.yaml (``base``) in ``tmp_path``, trials in tmp_path/study; ``rest``: the study's
    space, objective, budget, sampler and pruner."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    study = tmp_path / "study.yaml"
    study.write_text(f"base: base.yaml\noutput_dir: {tmp_path / 'study'}\n{rest}")
    return study


def _first_checkpoint(proc: subprocess.Popen, run: Path) -> Path:
    """Wait (up to 120 s) until the trial's run folder has a checkpoint or the process ended; the folder."""
    deadline = time.monotonic() + 120
    while not list(run.glob("checkpoints/step_*.safetensors")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    return run


def _trials(folder: Path) -> dict[str, dict]:
    return {p.name: json.loads((p / "trial.json").read_text()) for p in sorted((folder / "trials").iterdir())}


def test_a_two_trial_study_trains_reports_and_writes_a_best_spec_that_trains(tmp_path: Path,
                                                                             tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    study = _study(tmp_path, tiny_corpus, "pruner: {kind: none}\n")
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = _trials(tmp_path / "study")
    assert list(trials) == ["trial-000", "trial-001"]
    assert trials["trial-000"]["values"] == {"train.schedule.lr": 1e-3, "model.dropout.residual": 0.1}  # the base
    assert trials["trial-001"]["values"] != trials["trial-000"]["values"]
    assert all(t["state"] == "complete" and t["steps"] == 4 and set(t["validations"]) == {"2", "4"}
               for t in trials.values())
    for name, t in trials.items():  # the objective is the run's own validation score, kept in the run
        kept = json.loads((tmp_path / "study" / "trials" / name / "eval_valid.json").read_text())
        assert t["value"] == pytest.approx(kept["bleu"]) and kept["split"] == "valid"
    best = max(trials.values(), key=lambda t: t["value"])
    assert f"best: trial {best['trial']}, bleu {best['value']:.4g}" in result.output
    rows = (tmp_path / "study" / "trials.csv").read_text().splitlines()
    assert rows[0].startswith("trial,state,bleu,train.schedule.lr,model.dropout.residual,steps") and len(rows) == 3
    report = (tmp_path / "study" / "report.md").read_text()
    assert f"**Best**: trial {best['trial']}, bleu {best['value']:.4g}" in report and "Test was never scored" in report
    second = sorted(trials.values(), key=lambda t: -t["value"])[1]  # the runner-up, compared on the outputs kept
    assert f"**Best against the runner-up** (trial {best['trial']} − trial {second['trial']}, validation): BLEU " \
        f"{best['value'] - second['value']:+.2f} (95% interval" in report
    for png in ("history.png", "parallel.png", "importances.png"):
        assert (tmp_path / "study" / png).read_bytes()[:4] == b"\x89PNG", png

    out = tmp_path / "specs" / "best.yaml"
    out.parent.mkdir()
    written = runner.invoke(app, ["tune", str(study), "--best", "-o", str(out)])
    assert written.exit_code == 0, written.output
    text = out.read_text()
    assert text.startswith(f"# The best trial of study study ({study}): trial {best['trial']}")
    assert "train: ../corpus" not in text and "train.max_steps" not in text
    loaded = load_spec(out, [f"output_dir={tmp_path / 'best-run'}", "train.max_steps=2"])
    assert loaded.spec.train.schedule.lr == pytest.approx(best["values"]["train.schedule.lr"])
    assert loaded.spec.model.dropout.residual == best["values"]["model.dropout.residual"]
    assert loaded.spec.data.train == str(tiny_corpus / "train")  # relative to the spec file, resolved
    assert runner.invoke(app, ["train", str(out), "--set", f"output_dir={tmp_path / 'best-run'}",
                               "--set", "train.max_steps=2"]).exit_code == 0

    again = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert again.exit_code == 0 and "the budget's 2 trials are done" in again.output, again.output


def test_a_pruner_prunes_by_its_rule_and_the_folder_says_so(tmp_path: Path, tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    study = _study(tmp_path, tiny_corpus, "pruner: {kind: threshold, threshold: 1000}\n")  # BLEU never reaches it
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = _trials(tmp_path / "study")
    assert [t["state"] for t in trials.values()] == ["pruned", "pruned"]
    assert all(t["steps"] == 2 and list(t["validations"]) == ["2"] for t in trials.values())
    assert "trial 1 pruned at step 2" in result.output
    assert "| 0 (base) | pruned |" in (tmp_path / "study" / "report.md").read_text()
    best = runner.invoke(app, ["tune", str(study), "--best"])
    assert best.exit_code == 2 and "no complete trial yet" in best.output


@pytest.mark.slow
def test_a_worker_killed_mid_trial_loses_only_that_try_and_the_retry_resumes_its_run(tmp_path: Path,
                                                                                       tiny_corpus: Path) -> None:
    study = _study(tmp_path, tiny_corpus, "pruner: {kind: none}\nstorage: {heartbeat_seconds: 1}\n",
                   steps=60, trials=1)
    proc = subprocess.Popen([*TBUILD, "tune", str(study)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = _first_checkpoint(proc, tmp_path / "study" / "trials" / "trial-000")
    assert proc.poll() is None, "the trial ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = max(int(p.stem.split("_")[1]) for p in run.glob("checkpoints/step_*.safetensors"))
    time.sleep(2.5)  # the dead worker's heartbeat goes stale (2 x heartbeat_seconds)
    done = subprocess.run([*TBUILD, "tune", str(study)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming trial 0's run" in done.stdout
    record = json.loads((run / "trial.json").read_text())
    assert record["state"] == "complete" and record["trial"] == 1 and record["folder_trial"] == 0
    assert record["steps"] == 60 and "2" in record["validations"]  # the first try's validations kept
    assert f"resumed from step_{killed_at:08d}.safetensors (step {killed_at}," in done.stdout
    rows = (tmp_path / "study" / "trials.csv").read_text().splitlines()
    assert rows[1].startswith("0,fail,") and rows[2].startswith("1,complete,")


@pytest.mark.slow
def test_a_trial_stopped_with_ctrl_c_is_reported_interrupted_and_resumed(tmp_path: Path, tiny_corpus: Path) -> None:
    study = _study(tmp_path, tiny_corpus, "pruner: {kind: none}\n", steps=60, trials=1)
    proc = subprocess.Popen([*TBUILD, "tune", str(study)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = _first_checkpoint(proc, tmp_path / "study" / "trials" / "trial-000")
    assert proc.poll() is None, "the trial ended before it could be stopped"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert "trial 0 interrupted at step" in out, out
    assert json.loads((run / "trial.json").read_text())["state"] == "interrupted"
    assert (tmp_path / "study" / "trials.csv").read_text().splitlines()[1].startswith("0,interrupted,")
    done = subprocess.run([*TBUILD, "tune", str(study)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming trial 0's run" in done.stdout
    rows = (tmp_path / "study" / "trials.csv").read_text().splitlines()
    assert rows[1].startswith("0,interrupted,") and rows[2].startswith("1,complete,")


@pytest.mark.slow
def test_two_processes_share_a_storage_given_by_url(tmp_path: Path, tiny_corpus: Path) -> None:
    study = _study(tmp_path, tiny_corpus, "pruner: {kind: none}\n", steps=4, trials=3)
    url = f"sqlite:///{tmp_path / 'elsewhere' / 'shared.db'}"
    (tmp_path / "elsewhere").mkdir()
    procs = [subprocess.Popen([*TBUILD, "tune", str(study), "--storage", url], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert all("the budget's 3 trials are done" in out for out in outputs), outputs
    import optuna

    trials = optuna.load_study(study_name="study", storage=url).get_trials()
    assert 3 <= len(trials) <= 4 and all(t.state.name == "COMPLETE" for t in trials)  # a race may start one more
    assert not (tmp_path / "study" / "study.db").exists()
    assert len(_trials(tmp_path / "study")) == len(trials)


def test_a_tagger_study_scores_each_trial_on_its_fitted_spec(tmp_path: Path) -> None:
    """A tagger's labels are fitted from its data when it trains (``labels: from_data``): each trial is scored
    with its run's resolved spec (a study scored with the unfitted one failed every trial after training)."""
    from tbuild.cli.app import app

    words, tags = "cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n"
    for split in ("train", "valid"):
        (tmp_path / f"{split}.words").write_text(words)
        (tmp_path / f"{split}.tags").write_text(tags)
    base = tagger_spec("train", "valid", max_steps=100)
    study = _write_study(tmp_path, base, """\
space:
  model.head.piece: {choice: [first, last]}
objective: {metric: accuracy}
budget: {trials: 2, trial_steps: 4}
sampler: {kind: grid}
pruner: {kind: none}
""")
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = _trials(tmp_path / "study")
    assert [t["state"] for t in trials.values()] == ["complete", "complete"], trials
    for name, t in trials.items():
        kept = json.loads((tmp_path / "study" / "trials" / name / "eval_valid.json").read_text())
        assert t["value"] == pytest.approx(kept["accuracy"]) and 0 <= t["value"] <= 1 and kept["split"] == "valid"
