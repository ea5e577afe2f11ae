"""CPU decoding's arithmetic measured once per run and recorded (engine/decoding/precision_record.py):
bf16 products only where they are faster at the same metric, int8 logits only where they hold it; the
record written once, reused, stale on another CPU or other weights; bf16 and int8 layers against
float32's outputs."""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.decoding import precision_record
from tbuild.engine.decoding.native import NativeEngine, check_decoding, engine_in_mode, load_native_engine
from tbuild.engine.decoding.packed import PackedLinear, pack_linears, packing_available
from tbuild.engine.decoding.precision_record import (
    BF16_LOGITS,
    FLOAT_LOGITS,
    INT8_LOGITS,
    Measured,
    choose,
    compare,
    ensure_record,
    read_record,
    record_key,
    recorded,
    score_of,
)
from tbuild.engine.decoding.quantize import Int8Linear
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.decoding.search import Hypothesis
from tbuild.engine.run.directory import Run, resolve_run
from tbuild.engine.run.weights import weights_files
from tests.conftest import tiny_model
from tests.engine.decoding.test_quantize import teacher_forced_and_stepped

runner = CliRunner()
needs_onednn = pytest.mark.skipif(not packing_available(), reason="this PyTorch has no oneDNN packed linear")
LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "A woman sings.", "Children run on a beach.",
         "A cat sleeps on a red sofa.", "People walk down the street.", "A boy jumps.", "Three men talk."]


def test_bf16_is_chosen_only_when_clearly_faster_at_the_same_metric() -> None:
    def chosen(bf16: Measured) -> str:
        return choose("precision", {"fp32": Measured(30.0, 10.0), "bf16": bf16})["chosen"]

    assert chosen(Measured(29.95, 8.0)) == "bf16"  # 1.25× and 0.05 below
    assert chosen(Measured(29.85, 8.0)) == "fp32"  # 0.15 below
    assert chosen(Measured(30.5, 9.5)) == "fp32"  # 1.05×: within noise
    assert chosen(Measured(None, 25.0)) == "fp32"  # left out as too slow
    why = choose("precision", {"fp32": Measured(30.0, 10.0), "bf16": Measured(29.95, 8.0)})["why"]
    assert why == "valid split: bf16 1.25× fp32's speed, score 29.95 against fp32's 30.00"


def test_bf16_logits_are_chosen_only_where_they_hold_the_metric_and_are_faster() -> None:
    def chosen(logits: Measured) -> str:
        return choose("precision", {"fp32": Measured(30.0, 10.0), "bf16": Measured(29.98, 8.0),
                                    BF16_LOGITS: logits})["chosen"]

    assert chosen(Measured(29.95, 7.0)) == BF16_LOGITS  # the fastest within 0.1
    assert chosen(Measured(29.85, 7.0)) == "bf16"  # 0.15 below: float32 logits
    assert chosen(Measured(29.95, 8.5)) == "bf16"  # not the faster
    assert chosen(Measured(None, 30.0)) == "bf16"  # left out as too slow


def test_int8_logits_are_kept_only_where_the_metric_holds() -> None:
    def chosen(int8: float, logits: float) -> str:
        return choose("int8", {"fp32": Measured(30.0, 10.0), FLOAT_LOGITS: Measured(logits, 8.0),
                               INT8_LOGITS: Measured(int8, 6.0)})["chosen"]

    assert chosen(29.95, 30.0) == INT8_LOGITS  # the fastest within 0.1
    assert chosen(29.7, 30.0) == FLOAT_LOGITS
    assert chosen(29.0, 29.0) == FLOAT_LOGITS  # neither holds: the one closest to float32's arithmetic


def test_a_lower_is_better_metric_holds_within_its_loss_upward() -> None:
    """An error rate (a G2P task's PER, ``CheckMetric(higher=False)``): bf16 may be up to 0.1 above fp32's."""
    def chosen(bf16: float) -> str:
        return choose("precision", {"fp32": Measured(10.0, 10.0), "bf16": Measured(bf16, 8.0)}, higher=False)["chosen"]

    assert chosen(10.05) == "bf16" and chosen(9.0) == "bf16"  # 0.05 worse; better
    assert chosen(10.15) == "fp32"  # 0.15 worse


class Clocked:
    """A stand-in translator that takes ``cost`` seconds of a shared fake clock per call."""

    def __init__(self, name: str, cost: float, clock: list[float], calls: list[str]) -> None:
        self.name, self.cost, self.clock, self.calls = name, cost, clock, calls
        self.tokenizer = self

    def translate(self, lines: list[str], request: DecodeRequest) -> list[list[Hypothesis]]:
        self.calls.append(self.name)
        self.clock[0] += self.cost * len(lines)
        return [[Hypothesis([len(line)], 0.0, 0.0)] for line in lines]

    def decode(self, tokens: list[int]) -> str:
        return "x" * tokens[0]


def test_modes_are_interleaved_and_a_far_slower_one_is_left_out(tiny_run: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    clock, calls = [0.0], []
    monkeypatch.setattr(precision_record.time, "thread_time", lambda: clock[0])
    costs = {"fp32": 1.0, "bf16": 0.5, "slow": 2.0}
    lines = [f"line {i}" for i in range(80)]
    measured = compare(resolve_run(tiny_run), ["fp32", "bf16", "slow"],
                       lambda mode: Clocked(mode, costs[mode], clock, calls), lines, lines,
                       score_of(resolve_run(tiny_run)))
    assert calls[:6] == ["fp32", "bf16", "slow", "slow", "bf16", "fp32"]  # A B C, then C B A
    assert "slow" not in calls[6:] and len(calls) == 6 + 6 * 2  # dropped after two chunks, the others go on
    assert measured["fp32"].seconds == pytest.approx(80.0) and measured["bf16"].seconds == pytest.approx(40.0)
    assert measured["slow"].score is None and measured["slow"].seconds == pytest.approx(160.0)  # extrapolated
    assert measured["fp32"].score == measured["bf16"].score == pytest.approx(0.0)  # "xxxx" is no reference's text


@pytest.fixture()
def checked(tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the tiny run whose 40 valid lines are enough for a check here."""
    monkeypatch.setattr(precision_record, "MIN_LINES", 10)
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def counting(run: Run, calls: list[str]) -> Callable[[str], NativeEngine]:
    """The check's loader (real translators), each mode it loads noted in ``calls``."""
    def load(mode: str) -> NativeEngine:
        calls.append(mode)
        return engine_in_mode(run, mode)

    return load


@needs_onednn
def test_the_record_is_written_once_reused_and_stale_on_another_cpu_or_weights(
        checked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, calls = resolve_run(checked), []
    load = counting(run, calls)
    files = weights_files(run)
    monkeypatch.setattr(precision_record, "cpu_model_and_flags", lambda: ("a bf16 CPU", {"avx512_bf16"}))
    ensure_record(run, "precision", load)
    assert sorted(calls) == sorted(["fp32", "bf16", BF16_LOGITS])
    entry = read_record(run, files)["precision"]
    assert entry["chosen"] in ("fp32", "bf16", BF16_LOGITS) and entry["lines"] == 40
    assert set(entry["measured"]) == {"fp32", "bf16", BF16_LOGITS} and entry["measured"]["fp32"]["score"] >= 0
    assert recorded(run, files, "precision") == (entry["chosen"], f"{entry['why']}; recorded in decode_precision.json")
    ensure_record(run, "precision", load)  # recorded: nothing measured
    assert len(calls) == 3
    ensure_record(run, "int8", load)  # the int8 entry joins the precision one
    assert sorted(calls[3:]) == sorted(["fp32", FLOAT_LOGITS, INT8_LOGITS])
    assert {"precision", "int8"} <= read_record(run, files).keys()
    elsewhere = {**precision_record.cpu_identity(), "cpu": "another CPU"}
    monkeypatch.setattr(precision_record, "cpu_identity", lambda: elsewhere)
    assert recorded(run, files, "precision") is None  # made on another CPU: not trusted
    ensure_record(run, "precision", load)
    assert len(calls) == 9
    os.utime(files[0], ns=(1, 1))  # other weights (the file changed)
    assert recorded(run, files, "precision") is None


@needs_onednn
def test_the_best_checkpoint_and_an_average_keep_a_record_each(checked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, calls = resolve_run(checked), []
    load = counting(run, calls)
    monkeypatch.setattr(precision_record, "cpu_model_and_flags", lambda: ("a bf16 CPU", {"avx512_bf16"}))
    best, average = weights_files(run), weights_files(run, average=2)
    assert best != average
    ensure_record(run, "precision", load)
    ensure_record(run, "precision", load, average=2)
    assert len(calls) == 6
    ensure_record(run, "precision", load)  # alternating measures nothing again
    ensure_record(run, "precision", load, average=2)
    assert len(calls) == 6 and recorded(run, best, "precision") and recorded(run, average, "precision")
    monkeypatch.setattr(precision_record, "KEPT", 1)  # the oldest go past KEPT
    ensure_record(run, "int8", load)
    assert recorded(run, best, "int8") and recorded(run, average, "precision") is None


def test_a_record_written_before_the_file_kept_several_is_read(checked: Path) -> None:
    run = resolve_run(checked)
    files = weights_files(run)
    old = {"key": record_key(run, files), "precision": {"chosen": "bf16", "why": "as measured"}}
    run.dir.decode_record.write_text(json.dumps(old))  # the layout of RECORD_VERSION 1 files until 2026-11-29
    assert recorded(run, files, "precision") == ("bf16", "as measured; recorded in decode_precision.json")


def test_a_cpu_without_bf16_instructions_is_recorded_fp32_unmeasured(checked: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision_record, "cpu_model_and_flags", lambda: ("AMD EPYC Zen 3", {"avx2", "fma"}))
    run, calls = resolve_run(checked), []
    ensure_record(run, "precision", counting(run, calls))
    assert calls == []
    chosen, why = recorded(run, weights_files(run), "precision")  # type: ignore[misc]
    assert chosen == "fp32" and why.startswith("AMD EPYC Zen 3 has no bf16 instructions")


def test_a_small_valid_split_is_not_measured(tiny_run: Path, tmp_path: Path) -> None:
    run = resolve_run(Path(shutil.copytree(tiny_run, tmp_path / "run")))
    check_decoding(run, device="cpu")  # 40 valid lines < MIN_LINES
    assert not run.dir.decode_record.exists()


@needs_onednn
def test_decoding_follows_the_record_and_fp32_is_one_flag_away(checked: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    run = resolve_run(checked)
    monkeypatch.setattr(precision_record, "cpu_model_and_flags", lambda: ("a bf16 CPU", {"avx512_bf16"}))
    check_decoding(run, device="cpu")
    record = read_record(run, weights_files(run))
    record["precision"]["chosen"] = "bf16"  # as if bf16 had won here
    precision_record.write_record(run, record)
    bf16 = load_native_engine(run, device="cpu")
    assert bf16.precision == "bf16" and bf16.note.startswith("precision auto → bf16 (valid split: bf16 ")
    dtypes = {m.dtype for m in bf16.model.modules() if isinstance(m, PackedLinear) and m is not bf16.model.output}
    assert dtypes == {torch.bfloat16} and bf16.model.output.dtype == torch.float32  # float32 logits
    assert load_native_engine(run, device="cpu", precision="fp32").precision == "fp32"
    said = runner.invoke(app, ["decode", str(checked), "--device", "cpu", "--precision", "fp32"], input="A dog.\n")
    assert said.exit_code == 0, said.output
    assert "precision fp32 (set in the spec)" in said.stderr and "checking" not in said.stderr
    evaluated = runner.invoke(app, ["evaluate", str(checked), "--split", "test", "--device", "cpu", "--show", "0"])
    assert evaluated.exit_code == 0, evaluated.output
    assert "decoded in bf16: precision auto → bf16 (valid split: bf16 " in evaluated.stdout
    assert json.loads((checked / "eval_test.json").read_text())["precision"] == "bf16"
    record["precision"]["chosen"] = BF16_LOGITS  # as if bf16 logits had won too
    precision_record.write_record(run, record)
    both = load_native_engine(run, device="cpu")
    assert both.precision == "bf16" and both.note.startswith(f"precision auto → {BF16_LOGITS} (valid split: ")
    assert {m.dtype for m in both.model.modules() if isinstance(m, PackedLinear)} == {torch.bfloat16}
    forced = load_native_engine(run, device="cpu", precision="bf16")  # set by hand: float32 logits, as before
    assert forced.model.output.dtype == torch.float32


@needs_onednn
def test_bf16_products_stay_close_to_float32_and_the_cache_equals_the_full_pass() -> None:
    """bf16 products (bf16 inputs and weights, float32 accumulation and outputs): logits within 2% of
    their largest magnitude of float32's; incremental decoding equals the full pass of the same model."""
    torch.manual_seed(0)
    model = tiny_model()
    bf16 = copy.deepcopy(model)
    assert pack_linears(bf16, torch.bfloat16)
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 6))
    with torch.inference_mode():
        reference = model(src, tgt)
    full, steps, cache = teacher_forced_and_stepped(bf16, src, tgt)
    assert full.dtype == torch.float32
    assert 0 < (full - reference).abs().max() <= 0.02 * reference.abs().max()  # > 0: it computed in bf16
    torch.testing.assert_close(steps, full, rtol=1e-4, atol=1e-4)
    assert cache.layers[0]["self"]["kv"].k.dtype == torch.float32  # the cache in the model's dtype


@needs_onednn
def test_bf16_translations_mostly_agree_with_float32(tiny_run: Path) -> None:
    run = resolve_run(tiny_run)
    fp32, bf16 = (load_native_engine(run, device="cpu", precision=p) for p in ("fp32", "bf16"))
    assert bf16.precision == "bf16"
    request = DecodeRequest.of(run.spec.decode)
    same = [a[0].tokens == b[0].tokens for a, b in zip(fp32.translate(LINES, request), bf16.translate(LINES, request),
                                                        strict=True)]
    assert sum(same) >= 0.75 * len(LINES), same


@pytest.mark.parametrize("make", [PackedLinear, Int8Linear])
def test_a_faster_output_projection_computes_the_linear_product(make: type) -> None:
    if make is PackedLinear and not packing_available():
        pytest.skip("this PyTorch has no oneDNN packed linear")
    torch.manual_seed(0)
    output = nn.Linear(16, 12)
    x = torch.randn(5, 16)
    with torch.inference_mode():
        fast, reference = make(output)(x), output(x)
    assert (fast - reference).abs().max() <= 0.05 * reference.abs().max()
