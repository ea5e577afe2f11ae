"""A two-objective study (validation BLEU and decode seconds, ``speed``): end to end through the CLI (the
front by its definition, the table, the plot, a chosen point as a spec that validates), the decode time
taken on `tbuild decode`'s own path (the engine, request and quantization a user runs, each repeat a
whole decode), its median, and the threshold floor that stands in for Optuna's pruners."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tbuild.builder import load_spec
from tbuild.engine.tasks.base import DecodeTime, DecodeTiming
from tests.conftest import tiny_train_spec
from tests.engine.tune.test_tune import _trials, _write_study

pytest.importorskip("optuna", reason="the tune extra (Optuna) is not installed")
runner = CliRunner()


def _speed_study(tmp_path: Path, corpus: Path, rest: str) -> Path:
    base = tiny_train_spec(corpus, tmp_path / "unused", max_steps=1000, validate_every=2, checkpoint_every=2)
    base.pop("output_dir")
    base["decode"] = {"beam": 2, "alpha": 0.8, "max_len_a": 1.0, "max_len_b": 5, "batch_tokens": 300}
    return _write_study(tmp_path, base, f"""\
space:
  model.decoder.layers: {{int: [1, 2]}}
  model.decoder.d_ff: {{choice: [32, 64]}}
objective: {{metric: bleu, lines: 8}}
speed: {{lines: 12, repeats: 2, threads: 1}}
{rest}""")


def _front_by_definition(points: dict[int, tuple[float, float]]) -> set[int]:
    """The trials no other trial matches on both objectives (BLEU up, seconds down) while beating on one."""
    return {n for n, (q, s) in points.items()
            if not any(q2 >= q and s2 <= s and (q2, s2) != (q, s) for m, (q2, s2) in points.items() if m != n)}


def test_a_two_objective_study_reports_its_pareto_front_and_each_point_is_a_spec(tmp_path: Path,
                                                                                 tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    study = _speed_study(tmp_path, tiny_corpus, "budget: {trials: 3, trial_steps: 4}\n"
                                                "sampler: {kind: nsga2, seed: 3, population: 2}\n")
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = _trials(tmp_path / "study")
    assert [t["state"] for t in trials.values()] == ["complete"] * 3
    for t in trials.values():
        timed = t["decode"]
        assert timed["lines"] == 12 and len(timed["repeats"]) == 2
        assert timed["seconds"] == pytest.approx(sum(timed["repeats"]) / 2)  # the median of two
        assert timed["sentences_per_second"] == pytest.approx(12 / timed["seconds"])
        assert (timed["beam"], timed["alpha"], timed["batch_tokens"], timed["threads"], timed["precision"]) == (
            2, 0.8, 300, 1, "fp32")  # the spec's decode section, the study's threads
    points = {t["trial"]: (t["value"], t["decode"]["seconds"]) for t in trials.values()}
    front = _front_by_definition(points)
    assert "the budget's 3 trials are done" in result.output and "Pareto front" in result.output

    folder = tmp_path / "study"
    header = (folder / "trials.csv").read_text().splitlines()[0]
    assert header.startswith("trial,state,bleu,decode_s,sentences_per_s,model.decoder.layers,model.decoder.d_ff")
    section = (folder / "report.md").read_text().split("## Pareto front")[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert {int(row[0].strip("| ").split()[0]) for row in rows} == front
    for row in rows:
        number = int(row[0].strip("| ").split()[0])
        assert float(row[2]) == pytest.approx(points[number][1], rel=1e-2)  # decode s, as timed
    assert "median of 2 decodes of the first 12 lines" in section and "![front](front.png)" in section
    assert (folder / "front.png").read_bytes()[:4] == b"\x89PNG"

    fastest = min(front, key=lambda n: points[n][1])
    out = tmp_path / "fast.yaml"
    chosen = runner.invoke(app, ["tune", str(study), "--trial", str(fastest), "-o", str(out)])
    assert chosen.exit_code == 0, chosen.output
    assert out.read_text().startswith(f"# Trial of study study ({study}): trial {fastest}, validation bleu")
    loaded = load_spec(out, [f"output_dir={tmp_path / 'fast-run'}"])
    values = trials[f"trial-{fastest:03d}"]["values"]
    assert loaded.spec.model.decoder.layers == values["model.decoder.layers"]
    assert loaded.spec.model.decoder.d_ff == values["model.decoder.d_ff"]
    assert loaded.spec.train.max_steps == 1000 and loaded.spec.name == f"study-trial-{fastest}"  # the base's budget

    written = runner.invoke(app, ["tune", str(study), "--front", "-o", str(tmp_path / "front")])
    assert written.exit_code == 0, written.output
    assert {p.name for p in (tmp_path / "front").iterdir()} == {f"trial-{n:03d}.yaml" for n in front}
    best = runner.invoke(app, ["tune", str(study), "--best"])
    assert best.exit_code == 2 and "has two objectives and no single best: --front writes" in best.output


def test_a_threshold_stops_a_two_objective_trial_below_the_floor_and_the_budget_counts_it(
        tmp_path: Path, tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    study = _speed_study(tmp_path, tiny_corpus, "budget: {trials: 2, trial_steps: 4}\n"
                                                "pruner: {kind: threshold, threshold: 1000}\n")
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    trials = _trials(tmp_path / "study")
    assert [t["state"] for t in trials.values()] == ["pruned", "pruned"]
    assert all(t["steps"] == 2 and "decode" not in t for t in trials.values())  # stopped before it was timed
    assert "pruned at step 2 (validation 0, beyond the threshold 1000)" in result.output
    assert "the budget's 2 trials are done" in result.output
    assert "No complete trial yet." in (tmp_path / "study" / "report.md").read_text()
    front = runner.invoke(app, ["tune", str(study), "--front"])
    assert front.exit_code == 2 and "no complete trial yet" in front.output


def test_the_floor_is_below_the_threshold_where_higher_is_better_and_above_it_otherwise(tmp_path: Path) -> None:
    from tbuild.engine.tune.spec import load_study
    from tbuild.engine.tune.trial import below_floor
    from tests.engine.tune.test_study_file import GOOD, _study

    bleu = load_study(_study(tmp_path, GOOD + "speed: {}\npruner: {kind: threshold, threshold: 5, warmup_steps: 10}\n"))
    assert below_floor(bleu, 10, 4.9) and not below_floor(bleu, 10, 5.0) and not below_floor(bleu, 9, 0.0)
    ppl = load_study(_study(tmp_path, GOOD + "speed: {}\nobjective: {metric: ppl}\npruner: {kind: threshold, "
                                             "threshold: 50}\n"))
    assert below_floor(ppl, 0, 50.1) and not below_floor(ppl, 0, 49.0)
    assert not below_floor(load_study(_study(tmp_path, GOOD + "speed: {}\n")), 100, 0.0)  # no pruner: no floor


def test_the_median_of_the_repeats_is_the_objective() -> None:
    odd = DecodeTime(6, [5.0, 1.0, 3.0], 4, 0.6, 4000, "fp32", 2)
    assert odd.seconds == 3.0 and odd.sentences_per_second == pytest.approx(2.0)
    even = DecodeTime(4, [3.0, 1.0, 2.0, 10.0], 4, 0.6, 4000, "fp32", 2)
    assert even.seconds == 2.5  # the mean of the two middle values
    assert json.loads(json.dumps(even.to_json()))["seconds"] == 2.5


def test_the_decode_time_is_taken_on_tbuild_decodes_own_path(tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each repeat is one whole decode of the lines by the engine `tbuild decode` loads (the spec's request and
    quantization), not an estimate: the spy sees every call, and every repeat lasts at least as long as it."""
    from tbuild.engine.decoding.native import NativeEngine
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.tasks.translation import Translation

    calls: list[tuple[Any, ...]] = []
    real = NativeEngine.translate

    def spy(self: NativeEngine, lines: list[str], request: Any, *rest: Any) -> Any:
        started = time.perf_counter()
        out = real(self, lines, request, *rest)
        calls.append((len(lines), request.beam, request.alpha, request.batch_tokens, self.quantization,
                      time.perf_counter() - started))
        return out

    monkeypatch.setattr(NativeEngine, "translate", spy)
    run = resolve_run(tiny_run)
    timed = Translation().decode_time(run, DecodeTiming(lines=7, repeats=3))
    assert [c[:5] for c in calls] == [(7, 3, 0.6, 4000, "float32")] * 3  # tiny_run decodes at beam 3
    assert all(seconds >= c[5] for seconds, c in zip(timed.repeats, calls, strict=True))
    assert timed.lines == 7 and timed.seconds == sorted(timed.repeats)[1] and timed.precision == "fp32"

    calls.clear()
    int8 = replace(run, spec=run.spec.model_copy(update={"decode": run.spec.decode.model_copy(
        update={"quantization": "int8", "beam": 1})}))
    timed = Translation().decode_time(int8, DecodeTiming(repeats=1))  # lines None: the whole split
    assert timed.precision == "int8" and [c[:5] for c in calls] == [(40, 1, 0.6, 4000, "int8")]
