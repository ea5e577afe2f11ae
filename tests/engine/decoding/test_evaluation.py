"""Evaluation reports the decoding's device and precision, and computes its perplexity with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.engine.decoding.evaluation import evaluate
from tbuild.engine.decoding.native import load_native_engine
from tbuild.engine.run.directory import resolve_run


def test_perplexity_uses_the_decoding_policy(tiny_run: Path) -> None:
    def perplexity(train: str, decode: str) -> tuple[float, str]:
        run = resolve_run(tiny_run, [f"train.precision={train}", f"decode.precision={decode}", "decode.beam=1"])
        result, *_ = evaluate(run, load_native_engine(run), split="test")
        return result.perplexity, result.precision

    fp32, bf16_training = perplexity("fp32", "fp32"), perplexity("bf16", "fp32")
    assert fp32[1] == bf16_training[1] == "fp32"
    assert bf16_training[0] == pytest.approx(fp32[0], rel=1e-9)  # training precision plays no part
    bf16 = perplexity("fp32", "bf16")
    assert bf16[1] == "bf16" and bf16[0] != pytest.approx(fp32[0], rel=1e-6)


def test_translator_model_is_on_the_policy_device(tiny_run: Path) -> None:
    translator = load_native_engine(resolve_run(tiny_run), device="cpu")
    assert {p.device.type for p in translator.model.parameters()} == {"cpu"}
    assert not translator.model.training
