"""train.compile: auto compiles on CUDA for long runs only, with CUDA graphs for launch-bound models, and
never on a CPU; true and false are obeyed; every choice says why."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from tbuild.engine.training import compiled
from tbuild.engine.training.compiled import AUTO_MIN_STEPS, compile_plan

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
RECIPE = {"params": 8_100_000, "batch_tokens": 2048}  # specs/multi30k.yaml
BASE = {"params": 63_000_000, "batch_tokens": 25_000}  # specs/base.yaml


@pytest.fixture
def triton(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(compiled.importlib.util, "find_spec", lambda name: object() if name == "triton" else real(name))


def test_auto_is_off_on_a_cpu_and_says_so() -> None:
    plan = compile_plan("auto", CPU, max_steps=None, **BASE)
    assert not plan.on and "CPU" in plan.why and "train.compile=true" in plan.why


def test_auto_on_cuda_uses_cuda_graphs_for_a_small_model_only(triton: None) -> None:
    small = compile_plan("auto", CUDA, max_steps=8000, **RECIPE)
    large = compile_plan("auto", CUDA, max_steps=100_000, **BASE)
    assert small.on and small.cuda_graphs and "CUDA graphs" in small.why
    assert large.on and not large.cuda_graphs and large.mode == "default"


def test_auto_leaves_short_runs_uncompiled(triton: None) -> None:
    plan = compile_plan("auto", CUDA, max_steps=AUTO_MIN_STEPS - 1, **RECIPE)
    assert not plan.on and f"{AUTO_MIN_STEPS:,}" in plan.why
    assert compile_plan("auto", CUDA, max_steps=None, **RECIPE).on  # a time budget alone: long enough


def test_auto_needs_triton_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled.importlib.util, "find_spec", lambda name: None)
    plan = compile_plan("auto", CUDA, max_steps=None, **BASE)
    assert not plan.on and "triton" in plan.why


def test_true_and_false_are_obeyed() -> None:
    assert compile_plan(True, CPU, max_steps=2, **RECIPE).mode == "default"
    assert not compile_plan(False, CUDA, max_steps=None, **RECIPE).on


def test_the_spec_takes_auto_true_and_false() -> None:
    from tbuild.builder.spec import TrainSpec

    assert TrainSpec().compile == "auto"
    assert TrainSpec(compile=True).compile is True and TrainSpec(compile=False).compile is False
    with pytest.raises(ValueError, match="compile"):
        TrainSpec(compile="sometimes")
