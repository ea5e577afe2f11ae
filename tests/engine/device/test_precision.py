"""The CPU precision probe: bf16 chosen by measurement, cached per machine. The timers are stand-ins
for three kinds of CPU, so these tests mean the same on every machine (no timing is asserted)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from tbuild.engine.device import precision
from tbuild.engine.device.policy import choose_policy
from tbuild.engine.device.precision import Probe, bf16_probe, measure, probe_shapes, time_linear


def stand_in(bf16_speed: float, calls: list | None = None):  # noqa: ANN201
    """A timer for a CPU whose bf16 products run at ``bf16_speed`` × fp32's (fp32 at 100 GFLOP/s)."""

    def timer(dtype: str, shape: tuple[int, int, int]) -> float:
        if calls is not None:
            calls.append((dtype, shape))
        rows, d_in, d_out = shape
        seconds = 2 * rows * d_in * d_out / 100e9
        return seconds / bf16_speed if dtype == "bf16" else seconds

    return timer


NATIVE_FAST, NATIVE_SLOW, EMULATED = 2.5, 0.5, 0.02  # AMX / Zen 4; a Xeon seen at half; avx2 only
MACHINE_BUSY = precision.machine_busy  # the real one (the fixture below stands in for it)


@pytest.fixture(autouse=True)
def _idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache tests see an idle machine, whatever else runs while the suite does."""
    monkeypatch.setattr(precision, "machine_busy", lambda: False)


def test_a_busy_machines_measurement_is_used_but_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "machine_busy", MACHINE_BUSY)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    monkeypatch.setattr(precision.os, "getloadavg", lambda: (cores + 1.0,) * 3)  # busy on any core count
    assert precision.machine_busy()
    calls: list = []
    busy = bf16_probe(256, 1024, stand_in(NATIVE_SLOW, calls), cache=tmp_path)
    assert not busy.cached and busy.ratio == pytest.approx(NATIVE_SLOW) and not (tmp_path / "precision.json").exists()
    monkeypatch.setattr(precision.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert not precision.machine_busy()


def test_the_precisions_are_interleaved_over_rounds(tmp_path: Path) -> None:
    calls: list = []
    bf16_probe(256, 1024, stand_in(NATIVE_FAST, calls), cache=tmp_path)
    order = [dtype for dtype, _ in calls[::2]]  # one entry per (round, dtype): two shapes each
    assert order == ["fp32", "bf16", "bf16", "fp32", "fp32", "bf16"]


def test_rounds_that_disagree_are_used_but_not_kept(tmp_path: Path) -> None:
    """Load that came during the probe (here: its second round ran bf16 at a third of its speed) shows as rounds
    whose ratios disagree: the median is used, nothing is cached, and the next run measures again."""
    fast, calls = stand_in(NATIVE_FAST), []

    def timer(dtype: str, shape: tuple[int, int, int]) -> float:
        calls.append(dtype)
        loaded = dtype == "bf16" and 5 <= len(calls) <= 6  # the second round's bf16 products
        return fast(dtype, shape) * (3 if loaded else 1)

    probe = bf16_probe(256, 1024, timer, cache=tmp_path)
    assert probe.ratio == pytest.approx(NATIVE_FAST) and not (tmp_path / "precision.json").exists()


@pytest.mark.parametrize(("speed", "chosen"), [(NATIVE_FAST, "bf16"), (NATIVE_SLOW, "fp32"), (EMULATED, "fp32"),
                                               (1.1, "fp32"), (1.2, "bf16")])
def test_auto_takes_bf16_only_when_clearly_faster(speed: float, chosen: str, tmp_path: Path) -> None:
    policy = choose_policy("auto", "cpu", widths=(256, 1024),
                           probe=lambda d, f: bf16_probe(d, f, stand_in(speed), cache=tmp_path))
    assert policy.precision == chosen and policy.warning is None
    assert policy.note.startswith(f"precision auto → {chosen} (bf16 matmul {speed:.2f}× fp32 on this CPU")


def test_forced_bf16_warns_with_the_ratio_when_slower(tmp_path: Path) -> None:
    slow = choose_policy("bf16", "cpu", widths=(256, 1024),
                         probe=lambda d, f: bf16_probe(d, f, stand_in(EMULATED), cache=tmp_path))
    assert slow.precision == "bf16"
    assert slow.warning is not None and "0.02× the fp32 speed" in slow.warning
    fast = choose_policy("bf16", "cpu", widths=(256, 1024),
                         probe=lambda d, f: bf16_probe(d, f, stand_in(NATIVE_FAST), cache=tmp_path / "other"))
    assert fast.precision == "bf16" and fast.warning is None


def test_fp32_and_cpu_decoding_measure_nothing() -> None:
    def refuse(d_model: int, d_ff: int) -> Probe:
        raise AssertionError("probed")

    assert choose_policy("fp32", "cpu", widths=(8, 8), probe=refuse).note == "precision fp32 (set in the spec)"
    decoding = choose_policy("auto", "cpu", widths=(8, 8), decoding=True, probe=refuse)
    assert decoding.precision == "fp32" and "no bf16 check recorded for this run" in decoding.note
    recorded = choose_policy("auto", "cpu", widths=(8, 8), decoding=True, probe=refuse, recorded=("bf16", "why"))
    assert recorded.precision == "bf16" and recorded.note == "precision auto → bf16 (why)"
    assert recorded.autocast_dtype is None and recorded.products == torch.bfloat16  # bf16 products, no autocast


def test_the_cache_is_used_then_invalidated_by_a_machine_change(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    first = bf16_probe(256, 1024, stand_in(NATIVE_FAST, calls), cache=tmp_path)
    assert not first.cached and len(calls) == 12  # two shapes, two dtypes, three rounds
    again = bf16_probe(256, 1024, stand_in(EMULATED, calls), cache=tmp_path)
    assert again.cached and len(calls) == 12 and again.ratio == pytest.approx(NATIVE_FAST, rel=1e-3)
    bf16_probe(512, 2048, stand_in(NATIVE_FAST, calls), cache=tmp_path)  # other widths: measured
    assert len(calls) == 24
    real = precision.cpu_identity()
    for field, value in (("torch", "0.0.0"), ("threads", "64"), ("flags", "0" * 16), ("cpu", "Other CPU")):
        monkeypatch.setattr(precision, "cpu_identity", lambda field=field, value=value: {**real, field: value})
        changed = bf16_probe(256, 1024, stand_in(EMULATED, calls), cache=tmp_path)
        assert not changed.cached and changed.ratio == pytest.approx(EMULATED), field
    assert len(json.loads((tmp_path / "precision.json").read_text())) == 6


def test_a_damaged_or_unwritable_cache_means_measuring(tmp_path: Path) -> None:
    (tmp_path / "precision.json").write_text("{not json")
    calls: list = []
    assert not bf16_probe(64, 128, stand_in(NATIVE_SLOW, calls), cache=tmp_path).cached
    assert bf16_probe(64, 128, stand_in(NATIVE_SLOW, calls), cache=tmp_path).cached  # rewritten whole
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert not bf16_probe(64, 128, stand_in(NATIVE_SLOW, calls), cache=blocked).cached  # cannot mkdir: no error


def test_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TBUILD_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert precision.cache_dir() == tmp_path / "xdg" / "tbuild"
    monkeypatch.setenv("TBUILD_CACHE_DIR", str(tmp_path / "mine"))
    assert precision.cache_dir() == tmp_path / "mine"


def test_probe_shapes_are_the_model_widths_and_bounded() -> None:
    assert probe_shapes(32, 64) == [(1024, 32, 64), (1024, 64, 32)]
    for d_model, d_ff in ((256, 1024), (1024, 4096)):  # fewer rows, so emulated bf16 stays short
        (rows, d_in, d_out), back = probe_shapes(d_model, d_ff)
        assert (d_in, d_out) == (d_model, d_ff) and back == (rows, d_ff, d_model)
        assert 64 <= rows < 1024 and 2 * rows * d_in * d_out <= 6e8
    probe = measure(256, 1024, stand_in(NATIVE_SLOW))
    assert probe.fp32_gflops == pytest.approx(100) and probe.ratio == pytest.approx(NATIVE_SLOW)


def test_the_real_timer_runs_both_dtypes() -> None:
    for dtype in ("fp32", "bf16"):
        seconds = time_linear(dtype, (16, 8, 8))
        assert 0 < seconds < 5
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the probe leaves no autocast state behind
        pass
    assert not torch.is_autocast_enabled("cpu")
