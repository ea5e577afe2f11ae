"""tbuild's own int8 decoding (engine/decoding/quantize.py): close to float32, CPU only, end to end
through the CLI."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.components.transformer import DecoderCache
from tbuild.engine.decoding.native import load_native_engine
from tbuild.engine.decoding.quantize import check_quantization, quantize_model
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.decoding.search import beam_search
from tbuild.engine.errors import TbuildError
from tbuild.engine.run.directory import resolve_run
from tests.conftest import tiny_model

runner = CliRunner()
LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "A woman sings.", "Children run on a beach.",
         "A cat sleeps on a red sofa.", "People walk down the street.", "A boy jumps.", "Three men talk."]


def teacher_forced_and_stepped(model: torch.nn.Module, src: torch.Tensor, tgt: torch.Tensor
                               ) -> tuple[torch.Tensor, torch.Tensor, DecoderCache]:
    """``model``'s logits for ``tgt`` teacher-forced in one pass, then one decoder step at a time (and the cache)."""
    with torch.inference_mode():
        full = model(src, tgt)
        memory, pad = model.encode(src)
        cache = DecoderCache()
        steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, pad, cache) for t in range(tgt.size(1))], 1)
    return full, steps, cache


def test_int8_logits_close_to_float32() -> None:
    """Every linear layer quantized (per-row int8 weights, dynamic int8 activations): the logits of a
    random model stay within 5% of their largest magnitude of float32's, teacher-forced and
    incrementally (activation scales are per call, so the two int8 results differ from each other too)."""
    torch.manual_seed(0)
    model = tiny_model()
    small = quantize_model(copy.deepcopy(model), "int8")
    assert not any(isinstance(m, torch.nn.Linear) and type(m) is torch.nn.Linear for m in small.modules())
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 6))
    with torch.inference_mode():
        full = model(src, tgt)
    full8, steps, _ = teacher_forced_and_stepped(small, src, tgt)
    scale = full.abs().max()
    assert 0 < (full8 - full).abs().max() <= 0.05 * scale  # > 0: it did quantize
    assert (steps - full).abs().max() <= 0.05 * scale


def test_int8_refused_off_cpu_and_unknown_types() -> None:
    check_quantization("int8", torch.device("cpu"))
    with pytest.raises(TbuildError, match="int8 decoding runs on the CPU only, not cuda"):
        check_quantization("int8", torch.device("cuda"))
    check_quantization("float32", torch.device("cuda"))
    with pytest.raises(TbuildError, match="'int16': the native engine supports float32 or int8"):
        check_quantization("int16", torch.device("cpu"))


def test_int8_translator_mostly_agrees_with_float32(tiny_run: Path) -> None:
    """On the tiny trained run, int8 greedy and beam outputs match float32's on most lines; the spec's
    decode.quantization selects int8 when the CLI does not."""
    run = resolve_run(tiny_run)
    fp32 = load_native_engine(run, device="cpu")
    int8 = load_native_engine(run, quantization="int8")  # device auto -> the CPU
    assert int8.precision == "int8" and fp32.precision == "fp32" and int8.policy.device.type == "cpu"
    for beam in (1, 3):
        spec = run.spec.decode.model_copy(update={"beam": beam})
        same = [a[0].tokens == b[0].tokens for a, b in
                zip(fp32.translate(LINES, DecodeRequest.of(spec)), int8.translate(LINES, DecodeRequest.of(spec)),
                    strict=True)]
        assert sum(same) >= 0.75 * len(LINES), (beam, same)
    quantized = resolve_run(tiny_run, ["decode.quantization=int8"])
    from tbuild.engine.export.engines import load_engine

    assert load_engine(quantized, "native").precision == "int8"
    assert load_engine(quantized, "native", quantization="float32", device="cpu").precision == "fp32"


def test_int8_beam_search_equals_float32_search_on_its_own_logits() -> None:
    """The search is unchanged: on the quantized model it gives what it gives on any model, one
    sentence at a time or batched."""
    torch.manual_seed(1)
    small = quantize_model(tiny_model(), "int8")
    src = torch.randint(4, 40, (3, 6))
    batched = beam_search(small, src, beam=3, alpha=0.6, max_len_a=1.0, max_len_b=4)
    alone = [beam_search(small, src[i:i + 1], beam=3, alpha=0.6, max_len_a=1.0, max_len_b=4)[0] for i in range(3)]
    assert [h[0].tokens for h in batched] == [h[0].tokens for h in alone]


def test_cli_decode_and_evaluate_int8(tiny_run: Path, tmp_path: Path) -> None:
    run_copy = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    text = "".join(line + "\n" for line in LINES[:3]) + "\n"
    result = runner.invoke(app, ["decode", str(run_copy), "--quantization", "int8"], input=text)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.split("\n")) == 5 and result.stdout.split("\n")[3] == ""
    refused = runner.invoke(app, ["decode", str(run_copy), "--quantization", "int8", "--set", "decode.precision=bf16"],
                            input=text)
    assert refused.exit_code == 2 and "int8 decoding computes in float32" in refused.output
    evaluated = runner.invoke(app, ["evaluate", str(run_copy), "--split", "test", "--quantization", "int8"],
                              env={"COLUMNS": "200"})
    assert evaluated.exit_code == 0, evaluated.output
    report = json.loads((run_copy / "eval_test.json").read_text())
    assert report["engine"] == "native" and report["precision"] == "int8" and report["bleu"] >= 0
    assert "BLEU" in evaluated.output and "int8" in evaluated.output
