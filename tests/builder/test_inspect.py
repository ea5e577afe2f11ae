"""``tbuild inspect``: parameters per block (Table 3), FLOPs per token per attention kind, on the meta
device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.builder import build_model, load_spec
from tbuild.builder.inspect import inspect_model
from tbuild.cli.app import app
from tbuild.components.spec_base import Use
from tbuild.components.specs.attention import AdditiveSpec, LocalSpec, MultiHeadSpec, RelativeSpec

from ..conftest import TINY
from .test_build import HETERO


def _attention_params(d: int, heads: int, d_k: int, kv_heads: int | None = None) -> int:
    kv = kv_heads or heads
    return (d * heads * d_k + heads * d_k) + 2 * (d * kv * d_k + kv * d_k) + (heads * d_k * d + d)


@pytest.mark.parametrize("attention,enc_extra,dec_extra,kv", [
    ({"kind": "multihead"}, 0, 0, None),
    ({"kind": "local", "window": 2}, 0, 0, None),
    ({"kind": "multihead", "kv_heads": 1}, 0, 0, 1),
    ({"kind": "additive"}, 4 * 4, 4 * 4, None),  # v_h: H·d_k
    ({"kind": "relative", "max_distance": 3}, 7 * (4 + 4), 4 * (4 + 4), None),  # (2k+1), (k+1) rows
])
def test_inspect_counts_attention_parameters(attention: dict, enc_extra: int, dec_extra: int,
                                             kv: int | None) -> None:
    spec = load_spec({"model": {**TINY["model"], "attention": attention}}).spec  # D 16, H 4, d_k = d_v = 4
    net = build_model(spec)
    report = inspect_model(spec, net)
    rows = {r.block.split(" ")[0]: r for r in report.rows if "layers" in r.block}
    self_attn = _attention_params(16, 4, 4, kv)
    assert f"self-attention {self_attn + enc_extra:,}," in rows["encoder"].note
    assert f"self-attention {self_attn + dec_extra:,}," in rows["decoder"].note
    assert report.total == sum(p.numel() for p in net.parameters())  # tied matrices once


def test_inspect_builds_on_the_meta_device_with_the_same_counts() -> None:
    spec = load_spec({"model": {**TINY["model"], "attention": {"kind": "relative"}}}).spec
    net = build_model(spec)
    meta, real = inspect_model(spec), inspect_model(spec, net)
    assert meta.rows == real.rows and meta.total == real.total == sum(p.numel() for p in net.parameters())
    assert meta.flops_per_token == real.flops_per_token


def test_final_norm_rows_name_the_stacks_own_norm() -> None:
    spec = load_spec({"model": {**TINY["model"], "norm_placement": "pre",
                                "encoder": {**TINY["model"]["encoder"], "norm": {"kind": "rmsnorm"}}}}).spec
    rows = {r.block: r for r in inspect_model(spec).rows}
    assert rows["encoder final norm"].kind == "rmsnorm" and rows["encoder final norm"].params == 16
    assert rows["decoder final norm"].kind == "layernorm" and rows["decoder final norm"].params == 32


# ----------------------------------------------------------------------------- FLOPs per attention kind

N, HEADS, DK, DV = 64, 4, 4, 6  # context n, h, d_k, d_v


def _use(causal: bool = False, role: str = "self") -> Use:
    return Use("decoder" if causal else "encoder", role, HEADS, DK, DV, 32, causal, None)


@pytest.mark.parametrize("spec,causal,expected", [
    (MultiHeadSpec(), False, 2 * N * HEADS * (DK + DV)),  # QKᵀ 2·n·d_k, αV 2·n·d_v per head
    (MultiHeadSpec(kv_heads=1), True, 2 * N * HEADS * (DK + DV)),  # shared K/V: same attention work
    (LocalSpec(window=4), False, 2 * 9 * HEADS * (DK + DV)),  # 2r+1 = 9 keys
    (LocalSpec(window=4), True, 2 * 5 * HEADS * (DK + DV)),  # r+1 = 5 keys
    (LocalSpec(window=40), False, 2 * N * HEADS * (DK + DV)),  # the window covers all n keys
    (AdditiveSpec(), False, HEADS * (N * DK + N * DK + 2 * N * DK + 2 * N * DV)),  # adds, tanh, v·, αV
    (RelativeSpec(max_distance=16), False, HEADS * (2 * N * DK + 2 * 33 * DK + 2 * N * DV + 2 * 33 * DV)),
    (RelativeSpec(max_distance=16), True, HEADS * (2 * N * DK + 2 * 17 * DK + 2 * N * DV + 2 * 17 * DV)),
], ids=["multihead", "multi-query", "local", "local-causal", "local-wide", "additive", "relative",
        "relative-causal"])
def test_attention_flops_per_query_by_hand(spec: MultiHeadSpec, causal: bool, expected: int) -> None:
    assert spec.flops_per_query(N, _use(causal)) == expected
    assert spec.flops_formula


def test_flops_order_local_multihead_additive() -> None:
    use = _use()
    local, multihead, additive = (s.flops_per_query(N, use) for s in (LocalSpec(), MultiHeadSpec(), AdditiveSpec()))
    assert local < multihead < additive


def test_report_sums_each_sublayers_kind() -> None:
    spec = load_spec({"model": {**TINY["model"], "attention": {"kind": "local", "window": 2}}}).spec
    report = inspect_model(spec, context=N)
    d = 16 // 4  # d_k = d_v = d_model / h
    local_enc, local_dec, cross = 2 * 5 * 4 * 2 * d, 2 * 3 * 4 * 2 * d, 2 * N * 4 * 2 * d
    assert report.attention_flops == 2 * local_enc + 2 * (local_dec + cross)
    assert report.flops_per_token == 2 * report.matmul_weights + report.attention_flops
    assert set(report.attention_formulas) == {"local", "multihead"}
    assert "local attention: " in report.flops_formula


def test_inspect_shows_one_row_per_group(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "hetero.yaml"
    path.write_text(yaml.safe_dump(HETERO))
    runner = CliRunner()
    text = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "220"})
    assert text.exit_code == 0, text.output
    assert "encoder layers 0–3 (×4)" in text.output and "local/relu/layernorm" in text.output
    assert "encoder layers 4–5 (×2)" in text.output and "multihead/relu/layernorm" in text.output
    assert "decoder layers 0–1 (×2)" in text.output
    result = runner.invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["block"]: r for r in json.loads(result.output)["rows"]}
    net = build_model(load_spec(HETERO).spec)
    per_layer = sum(p.numel() for p in net.encoder[0].parameters())
    assert rows["encoder layers 0–3 (×4)"]["params"] == 4 * per_layer
    assert rows["encoder layers 4–5 (×2)"]["params"] == 2 * per_layer  # local adds no parameters
    assert rows["encoder layers 0–3 (×4)"]["kind"] == "local/relu/layernorm"


def test_training_time_estimate_from_flops() -> None:
    """Wall time = max_steps × 3 × forward FLOPs per token × tokens per update / (GPUs × peak × MFU)."""
    from tbuild.builder.inspect import estimate_training

    spec = load_spec(TINY, ["train.batch_tokens=1000", "train.update_freq=4", "train.max_steps=500"]).spec
    report = inspect_model(spec)
    est = estimate_training(spec, report, gpus=8, gpu_type="a100", mfu=0.5)
    assert est.tokens_per_update == 4000
    assert est.seconds == pytest.approx(500 * 3 * report.flops_per_token * 4000 / (8 * 312e12 * 0.5))
    with pytest.raises(ValueError, match="unknown GPU type 'x100'"):
        estimate_training(spec, report, gpus=8, gpu_type="x100", mfu=0.5)


def test_inspect_prints_the_estimate(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    result = CliRunner().invoke(app, ["inspect", str(path), "--gpus", "2", "--gpu-type", "v100", "--mfu", "0.25"])
    assert result.exit_code == 0, result.output
    assert "on 2 × v100 at 25% MFU" in result.output
    assert "big 300,000 steps in 3.5 days" in result.output  # the paper's figure beside the estimate
    bad = CliRunner().invoke(app, ["inspect", str(path), "--gpus", "2", "--gpu-type", "tpu"])
    assert bad.exit_code == 2 and "unknown GPU type 'tpu'" in bad.output
