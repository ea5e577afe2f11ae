"""`tbuild sweep`: rows validated before training, run and tabulated; finished rows skipped."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder import SpecError
from tbuild.engine.sweep.plan import minutes_left, plan
from tbuild.engine.sweep.result import RESULT, RowResult, SplitScores, read_result, write_result
from tbuild.engine.sweep.spec import load_sweep
from tbuild.engine.sweep.table import group_trends, trend
from tests.conftest import REPO, tiny_train_spec

runner = CliRunner()


def _sweep(tmp_path: Path, tiny_corpus: Path, rows: str) -> Path:
    base = tiny_train_spec(tiny_corpus, tmp_path / "unused", max_steps=3, validate_every=3, checkpoint_every=3)
    base.pop("output_dir")
    base["decode"] = {"beam": 2, "max_len_a": 1.0, "max_len_b": 5}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"base: base.yaml\noutput_dir: {tmp_path / 'out'}\nrows:\n{rows}")
    return sweep


TWO_ROWS = """\
  - {name: base, label: base, paper: {ppl: 4.92, bleu: 25.8}}
  - name: h1
    label: A
    set: {model.encoder.heads: 1, model.decoder.heads: 1}
    paper: {ppl: 5.29, bleu: 24.9}
"""


def test_two_rows_train_score_and_tabulate(tmp_path: Path, tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    sweep = _sweep(tmp_path, tiny_corpus, TWO_ROWS)
    dry = runner.invoke(app, ["sweep", str(sweep), "--dry-run"], env={"COLUMNS": "200"})
    assert dry.exit_code == 0, dry.output
    assert "2 rows" in dry.output and not (tmp_path / "out").exists()
    result = runner.invoke(app, ["sweep", str(sweep)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert len(folders) == 2 and folders[0].startswith("base-") and folders[1].startswith("h1-")
    table = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["row"] for r in table] == ["base", "h1"] and [r["h"] for r in table] == [2, 1]
    assert all(r["train steps"] == 3 and r["dev BLEU"] is not None and r["test BLEU"] is not None for r in table)
    assert table[1]["paper BLEU"] == 24.9 and table[1]["trend"] in ("held", "not held", "held (≈)")
    assert (tmp_path / "out" / "results.md").read_text().startswith("| row | label | N |")
    assert (tmp_path / "out" / "results.csv").read_text().splitlines()[0].startswith("row,label,N,")
    assert (tmp_path / "out" / "results.png").read_bytes()[:4] == b"\x89PNG"
    assert "A: " in result.output and "held" in result.output  # the trend of group A, in one line
    again = runner.invoke(app, ["sweep", str(sweep), "--set", "train.threads=1"], env={"COLUMNS": "250"})
    assert again.exit_code == 0, again.output  # threads do not make another experiment
    assert again.output.count("finished earlier") == 2 and "training in" not in again.output


@pytest.mark.slow
def test_a_killed_sweep_resumes_its_row_and_skips_the_finished_one(tmp_path: Path, tiny_corpus: Path) -> None:
    """SIGKILL while the second row trains; the same command then skips the first row and resumes
    the second from its last checkpoint."""
    import signal
    import subprocess
    import sys
    import time

    from tbuild.engine.run.directory import RunDir

    rows = "  - {name: first}\n  - {name: second, set: {train.max_steps: 150, train.checkpoint_every: 2}}\n"
    sweep = _sweep(tmp_path, tiny_corpus, rows)
    command = [sys.executable, "-c", "from tbuild.cli.app import main; main()", "sweep", str(sweep)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = tmp_path / "out"
    deadline = time.monotonic() + 180
    second = []
    while time.monotonic() < deadline and not (second and len(RunDir(second[0]).step_checkpoints()) >= 2):
        second = sorted(out.glob("second-*")) if out.exists() else []
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = RunDir(second[0]).step_checkpoints()
    assert saved and not (second[0] / "sweep_row.json").exists()
    again = subprocess.run([*command], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "250"})
    assert again.returncode == 0, again.stderr
    assert "first: finished earlier" in again.stdout and "resumed from step_" in again.stdout
    assert json.loads((second[0] / "sweep_row.json").read_text())["steps"] == 150


def test_a_row_trains_on_the_threads_it_asks_for(tmp_path: Path, tiny_corpus: Path) -> None:
    import torch

    from tbuild.cli.app import app

    before = torch.get_num_threads()
    sweep = _sweep(tmp_path, tiny_corpus, "  - {name: one, set: {train.threads: 1}}\n")
    try:
        result = runner.invoke(app, ["sweep", str(sweep)], env={"COLUMNS": "250"})
    finally:
        torch.set_num_threads(before)
    assert result.exit_code == 0, result.output
    assert re.search(r"device (cpu|cuda), 1 thread\n", result.output), result.output  # auto: CUDA where present


def test_a_search_on_validation_scores_no_test(tmp_path: Path, tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    sweep = _sweep(tmp_path, tiny_corpus, "  - {name: one}\n")
    sweep.write_text(sweep.read_text() + "splits: [valid]\n")
    result = runner.invoke(app, ["sweep", str(sweep)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "one: valid BLEU" in result.output and "one: test BLEU" not in result.output
    table = json.loads((tmp_path / "out" / "results.json").read_text())
    assert table[0]["dev BLEU"] is not None and table[0]["test BLEU"] is None


def test_a_bad_row_is_refused_with_its_line_before_training(tmp_path: Path, tiny_corpus: Path) -> None:
    from tbuild.cli.app import app

    sweep = _sweep(tmp_path, tiny_corpus, TWO_ROWS + "  - {name: bad, set: {model.encoder.hedas: 2}}\n")
    result = runner.invoke(app, ["sweep", str(sweep)])
    assert result.exit_code == 2
    line = sweep.read_text().splitlines().index("  - {name: bad, set: {model.encoder.hedas: 2}}") + 1
    assert f"row bad: {sweep}:{line}:" in result.output
    assert "unknown key 'hedas' (did you mean 'heads'?)" in result.output
    assert not (tmp_path / "out").exists()
    unknown = runner.invoke(app, ["sweep", str(sweep), "--only", "nope"])
    assert unknown.exit_code == 2 and "no such row" in unknown.output


def test_sweep_file_errors_name_the_line(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("name: b\n")
    bad = tmp_path / "s.yaml"
    bad.write_text("base: base.yaml\nrows:\n  - {name: a, lable: A}\n")
    with pytest.raises(SpecError, match=r"s\.yaml:3:15: rows\.0\.lable: unknown key 'lable' \(did you mean"):
        load_sweep(bad)
    twice = tmp_path / "t.yaml"
    twice.write_text("base: base.yaml\nrows:\n  - {name: a}\n  - {name: a}\n")
    with pytest.raises(SpecError, match="names must differ"):
        load_sweep(twice)


def test_grid_crosses_rows(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("name: b\n")
    sweep = tmp_path / "g.yaml"
    sweep.write_text("base: base.yaml\nrows: [{name: r}]\ngrid: {train.label_smoothing: [0.0, 0.1], "
                     "model.d_model: [256, 512]}\n")
    rows = plan(load_sweep(sweep))
    assert [p.row.name for p in rows] == ["r-label_smoothing=0.0-d_model=256", "r-label_smoothing=0.0-d_model=512",
                                          "r-label_smoothing=0.1-d_model=256", "r-label_smoothing=0.1-d_model=512"]
    assert rows[3].loaded.spec.model.d_model == 512 and rows[3].loaded.spec.train.label_smoothing == 0.1
    assert len({p.folder for p in rows}) == 4


def test_table3_rows_match_the_papers_params() -> None:
    rows = plan(load_sweep(REPO / "specs" / "sweeps" / "table3.yaml"))
    assert len(rows) == 20
    for p in rows:
        paper = p.row.paper.params if p.row.paper else None
        if paper is not None and p.row.name != "big":  # big: 218M, not the printed 213M (see specs/big.yaml)
            assert round(p.params / 1e6) == paper, p.row.name


def test_table3_small_plan_prints_its_budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.cli.app import app

    monkeypatch.chdir(tmp_path)  # runs/sweeps/table3-small/ here: nothing finished
    result = runner.invoke(app, ["sweep", str(REPO / "specs" / "sweeps" / "table3-small.yaml"), "--dry-run"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "20 rows" in result.output and result.output.count("│ 600 steps") == 19
    assert result.output.count("1,200 steps") == 1 and "to train" in result.output


def test_time_left_comes_from_the_finished_rows_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sweep = load_sweep(REPO / "specs" / "sweeps" / "table3-small.yaml")
    rows = plan(sweep, only=["base", "A-h1", "big"])
    assert minutes_left(rows) is None  # step budgets: no speed known yet
    rows[0].folder.mkdir(parents=True)
    write_result(rows[0].folder, RowResult("base", "base", steps=600, train_minutes=6.0, wall_minutes=7.0,
                                           params=rows[0].params))
    base, h1, big = rows
    assert h1.flops_per_token == base.flops_per_token  # one head of 128 costs what eight of 16 do
    assert minutes_left([base, h1]) == pytest.approx(6.0)
    assert minutes_left(rows) == pytest.approx(6.0 + 12.0 * big.flops_per_token / base.flops_per_token)
    timed = plan(sweep, ["train.max_steps=null", "train.max_minutes=10"], ["A-h1", "A-h4"])
    assert minutes_left(timed) == 20.0


def test_threads_do_not_change_a_rows_folder() -> None:
    sweep = load_sweep(REPO / "specs" / "sweeps" / "table3-small.yaml")
    one, two = plan(sweep, ["train.threads=1"], ["base"]), plan(sweep, ["train.threads=2"], ["base"])
    assert one[0].loaded.spec.train.threads == 1 and one[0].folder == two[0].folder
    assert plan(sweep, ["train.seed=2"], ["base"])[0].folder != one[0].folder


def test_table3_small_scales_every_row() -> None:
    rows = {p.row.name: p.loaded.spec for p in plan(load_sweep(REPO / "specs" / "sweeps" / "table3-small.yaml"))}
    assert len(rows) == 20 and rows["base"].model.dropout.residual == 0.1 and rows["big"].model.dropout.residual == 0.3
    for name, spec in rows.items():
        enc = spec.model.encoder
        if name.startswith("A-"):  # h · d_k = d_model, as in the paper's (A) rows
            assert enc.heads * enc.d_k == spec.model.d_model
        assert spec.train.max_steps == (1200 if name == "big" else 600) and spec.train.max_minutes is None


def test_trend() -> None:
    assert trend(20.0, 24.9, 21.0, 25.8) == "held"  # worse than the reference, as in the paper
    assert trend(22.0, 24.9, 21.0, 25.8) == "not held"
    assert trend(21.05, 25.7, 21.0, 25.8) == "held (≈)"  # the paper's "nearly identical"
    assert trend(None, 24.9, 21.0, 25.8) == ""
    table = [{"label": "base", "trend": ""}, {"label": "A", "trend": "held"}, {"label": "A", "trend": "not held"},
             {"label": "E", "trend": "held (≈)"}]
    assert group_trends(table) == {"A": "1/2 held", "E": "1/1 held"}


def test_submitit_runs_each_row_as_a_job(tmp_path: Path, tiny_corpus: Path) -> None:
    pytest.importorskip("submitit", reason="the submitit extra is not installed")
    from tbuild.cli.app import app

    sweep = _sweep(tmp_path, tiny_corpus, TWO_ROWS)
    result = runner.invoke(app, ["sweep", str(sweep), "--launcher", "submitit", "--cluster", "local",
                                 "--slurm", "timeout_min=10"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert result.output.count("submitted as job") == 2 and result.output.count(": finished") == 2
    table = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all(r["train steps"] == 3 and r["dev BLEU"] is not None for r in table)
    again = runner.invoke(app, ["sweep", str(sweep), "--launcher", "submitit", "--cluster", "local"])
    assert again.exit_code == 0 and again.output.count("finished earlier") == 2


def test_rows_call_after_step_every_step(tmp_path: Path, tiny_corpus: Path) -> None:
    """The process's heap trim runs during a row's training, as in `tbuild train` (resident memory grew
    by gigabytes per row without it)."""
    from tbuild.engine.sweep.run import run_local

    rows = plan(load_sweep(_sweep(tmp_path, tiny_corpus, TWO_ROWS)), [], ["base"])
    steps: list[int] = []
    assert run_local(rows, lambda _: (lambda kind, data: None), lambda line: None, after_step=steps.append)
    assert steps == [1, 2, 3]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "specs" / "sweeps").glob("*.yaml")))
def test_every_shipped_sweep_plans(name: str) -> None:
    rows = plan(load_sweep(REPO / "specs" / "sweeps" / name))
    assert rows and len({r.folder for r in rows}) == len(rows)  # distinct experiments
    if name == "multi30k-recipe.yaml":
        assert all(r.splits == ("valid",) for r in rows)  # a search on validation


def test_a_rows_result_is_one_typed_record(tmp_path: Path) -> None:
    """sweep_row.json is written and read in one place, in the layout it always had; an unreadable or
    foreign file reads as not finished."""
    result = RowResult("h1", "A", steps=3, train_minutes=0.5, wall_minutes=0.75, params=1234,
                       scores={"valid": SplitScores(bleu=1.5, bleu_lowercase=1.75, chrf=20.0, ppl=40.0)})
    path = write_result(tmp_path, result)
    assert path == tmp_path / RESULT and read_result(tmp_path) == result
    assert json.loads(path.read_text()) == {
        "row": "h1", "label": "A", "steps": 3, "train_minutes": 0.5, "wall_minutes": 0.75, "params": 1234,
        "scores": {"valid": {"bleu": 1.5, "bleu_lowercase": 1.75, "chrf": 20.0, "ppl": 40.0}}}
    assert result.score("valid", "ppl") == 40.0 and result.score("test", "bleu") is None
    for text in ("{", "[]", '{"steps": 600}', '{"row": "h1", "scores": {"valid": {"bleu": 1}}}'):
        path.write_text(text)
        assert read_result(tmp_path) is None, text
    assert read_result(tmp_path / "missing") is None


def test_the_table_reads_the_rows_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.engine.sweep.table import results

    monkeypatch.chdir(tmp_path)
    rows = plan(load_sweep(REPO / "specs" / "sweeps" / "table3-small.yaml"), only=["base", "A-h1"])
    scores = {"valid": SplitScores(bleu=5.0, bleu_lowercase=5.5, chrf=30.0, ppl=9.0),
              "test": SplitScores(bleu=4.0, bleu_lowercase=4.5, chrf=29.0, ppl=9.5)}
    write_result(rows[0].folder, RowResult("base", "base", 600, 6.0, 7.0, rows[0].params, scores))
    base, h1 = results(rows)
    assert (base["train steps"], base["dev PPL"], base["dev BLEU"], base["test BLEU"], base["train min"]) == (
        600, 9.0, 5.0, 4.0, 6.0)
    assert h1["train steps"] is None and h1["dev BLEU"] is None and h1["trend"] == ""


def test_each_row_gets_its_process_settings_before_it_trains(tmp_path: Path, tiny_corpus: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry point sets each row's threads (library code sets none): before_row runs before the row
    trains, for every unfinished row, in order."""
    from tbuild.engine.sweep import run

    rows = plan(load_sweep(_sweep(tmp_path, tiny_corpus, TWO_ROWS)), ["train.threads=1"])
    events: list[str] = []
    monkeypatch.setattr(run, "run_row", lambda planned, *a: events.append(f"train {planned.row.name}")
                        or run.RowOutcome(planned, False))
    assert run.run_local(rows, lambda _: (lambda kind, data: None), lambda line: None,
                         before_row=lambda p: events.append(f"configure {p.row.name}"))
    assert events == ["configure base", "train base", "configure h1", "train h1"]


def test_a_rows_process_takes_its_threads_else_every_core() -> None:
    import torch

    from tbuild.cli.sweep import row_process

    rows = plan(load_sweep(REPO / "specs" / "sweeps" / "table3-small.yaml"), ["train.threads=1"], ["base"])
    before = torch.get_num_threads()
    try:
        assert row_process(rows[0]).threads == 1 and torch.get_num_threads() == 1
        unset = plan(load_sweep(REPO / "specs" / "sweeps" / "table3-small.yaml"), ["train.threads=null"], ["base"])
        assert row_process(unset[0]).threads == len(os.sched_getaffinity(0)) == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_results_in_a_narrow_log_are_the_markdown_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns (a log, a pipe) the 20 columns would each collapse to '…': the Markdown table is
    printed instead, whole; a console wide enough gets the drawn table."""
    import io

    from rich.console import Console

    from tbuild.cli import sweep as command
    from tbuild.engine.sweep.table import COLUMNS, markdown

    table = [{c: (f"{c}-value" if c in ("row", "label") else 1.25) for c in COLUMNS}]
    for width, drawn in ((80, False), (400, True)):
        out = io.StringIO()
        monkeypatch.setattr(command, "console", Console(file=out, width=width))
        command._print_results("t3", table)
        text = out.getvalue()
        assert "…" not in text and "row-value" in text and "label-value" in text
        assert (markdown(table) in text) is not drawn and ("┃" in text or "|" in text)


def test_seeds_give_a_mean_and_sd_and_each_row_is_compared_with_the_reference(tmp_path: Path,
                                                                               tiny_corpus: Path) -> None:
    """``seeds: 2``: every row trained twice (train.seed 1 and 2; seed 1 in the folder the row has without
    seeds), the table's BLEU their mean with its standard deviation, and each row against the reference row:
    the difference of the means with its interval and p-value, resampled over the same sentences of every
    seed's outputs (here recomputed with sacreBLEU's corpus BLEU on each resample's lines). A row whose outputs
    were not kept is decoded again."""
    import statistics

    import numpy as np
    from sacrebleu.metrics import BLEU

    from tbuild.cli.app import app
    from tbuild.engine.significance import draws, spread

    rows = "  - {name: base, label: base}\n  - {name: wide, set: {model.d_model: 48}}\n"
    sweep = _sweep(tmp_path, tiny_corpus, rows)
    sweep.write_text(sweep.read_text() + "splits: [valid]\nset: {train.max_steps: 8, decode.max_len_b: 12}\n")
    unseeded = plan(load_sweep(sweep))
    sweep.write_text(sweep.read_text() + "seeds: 2\n")
    planned = plan(load_sweep(sweep))
    assert [(p.title, p.seed) for p in planned] == [("base (seed 1)", 1), ("base (seed 2)", 2),
                                                     ("wide (seed 1)", 1), ("wide (seed 2)", 2)]
    assert [p.loaded.spec.train.seed for p in planned] == [1, 2, 1, 2]
    assert planned[0].folder.name == unseeded[0].folder.name and planned[1].folder != planned[0].folder
    result = runner.invoke(app, ["sweep", str(sweep)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "wide (seed 2): valid BLEU" in result.output
    assert "Δ: a row's BLEU − the reference row's (base)" in result.output
    base, wide = json.loads((tmp_path / "out" / "results.json").read_text())
    found = {p.title: read_result(p.folder) for p in planned}
    assert [found[f"base (seed {s})"].seed for s in (1, 2)] == [1, 2]
    bleus = [found[f"wide (seed {s})"].score("valid", "bleu") for s in (1, 2)]
    assert wide["seeds"] == 2 and wide["dev BLEU"] == pytest.approx(statistics.fmean(bleus))
    assert wide["dev BLEU sd"] == pytest.approx(statistics.stdev(bleus)) and base["dev Δ"] is None
    assert wide["dev Δ"] == pytest.approx(wide["dev BLEU"] - base["dev BLEU"])
    refs = (tiny_corpus / "val.de").read_text().splitlines()
    outputs = {p.title: (p.folder / "eval_valid.out").read_text().splitlines() for p in planned}

    def mean_bleu(row: str, lines: np.ndarray) -> float:
        return statistics.fmean(BLEU().corpus_score([outputs[f"{row} (seed {s})"][i] for i in lines],
                                                     [[refs[i] for i in lines]]).score for s in (1, 2))

    samples = draws(len(refs), 1000)
    ours = np.array([mean_bleu("wide", r) for r in samples])
    theirs = np.array([mean_bleu("base", r) for r in samples])
    interval = spread(ours - theirs)
    assert wide["dev 95%"] == f"{interval.lower:+.2f} to {interval.upper:+.2f}"
    differences = np.abs(ours - theirs)
    by_hand = (np.sum(differences - differences.mean() > abs(wide["dev Δ"])) + 1) / 1001
    assert wide["dev p"] == pytest.approx(by_hand, abs=2 / 1001)
    (planned[3].folder / "eval_valid.out").unlink()
    again = runner.invoke(app, ["sweep", str(sweep)], env={"COLUMNS": "250"})
    assert again.exit_code == 0, again.output
    assert again.output.count("finished earlier") == 4 and "wide (seed 2): decoding valid again" in again.output
    assert json.loads((tmp_path / "out" / "results.json").read_text())[1] == wide
