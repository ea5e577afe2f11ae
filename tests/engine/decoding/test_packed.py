"""float32 CPU decoding with oneDNN-packed linear weights (engine/decoding/packed.py): the same
products, the same parameters, the same translations; applied only where it can be."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tbuild.components.transformer import DecoderCache
from tbuild.engine.decoding.native import load_native_engine
from tbuild.engine.decoding.packed import PackedLinear, pack_linears, packing_available
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.decoding.search import beam_search, log_softmax_
from tbuild.engine.run.directory import resolve_run
from tests.conftest import tiny_model

needs_onednn = pytest.mark.skipif(not packing_available(), reason="this PyTorch has no oneDNN packed linear")
LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "A woman sings.", "Children run on a beach."]


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_packed_linear_equals_linear_for_any_rows(bias: bool) -> None:
    """x·Wᵀ + b for 2-D and 3-D inputs, row counts other than the one the layout was chosen for,
    non-contiguous inputs and no rows at all."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 80, bias=bias)
    packed = PackedLinear(linear)
    with torch.inference_mode():
        for x in (torch.randn(256, 48), torch.randn(3, 48), torch.randn(5, 7, 48), torch.randn(5, 7, 48)[:, 2:3],
                  torch.randn(0, 48)):
            torch.testing.assert_close(packed(x), F.linear(x, linear.weight, linear.bias), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_pack_linears_keeps_parameters_and_outputs() -> None:
    """Every nn.Linear replaced (the tied output projection included), parameters and state_dict
    unchanged, teacher-forced and incremental logits equal to the unpacked model's."""
    torch.manual_seed(0)
    model = tiny_model()
    packed = copy.deepcopy(model)
    assert pack_linears(packed)
    assert not [m for m in packed.modules() if type(m) is torch.nn.Linear]
    assert sum(p.numel() for p in packed.parameters()) == sum(p.numel() for p in model.parameters())
    assert packed.state_dict().keys() == model.state_dict().keys()
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 6))
    with torch.inference_mode():
        torch.testing.assert_close(packed(src, tgt), model(src, tgt), rtol=1e-4, atol=1e-5)
        memory, pad = packed.encode(src)
        cache = DecoderCache()
        steps = torch.cat([packed.decode(tgt[:, t:t + 1], memory, pad, cache) for t in range(6)], 1)
    torch.testing.assert_close(steps, model(src, tgt), rtol=1e-4, atol=1e-5)
    hyps = beam_search(packed, src, beam=3, alpha=0.6, max_len_a=1.0, max_len_b=4)
    assert [h[0].tokens for h in hyps] == [h[0].tokens for h in beam_search(model, src, beam=3, alpha=0.6,
                                                                            max_len_a=1.0, max_len_b=4)]


def test_pack_linears_leaves_other_models_alone() -> None:
    """Off the CPU's float32 (here: bfloat16 weights) nothing is packed."""
    model = tiny_model().to(torch.bfloat16)
    assert not pack_linears(model)
    assert any(type(m) is torch.nn.Linear for m in model.modules())


def test_log_softmax_in_place_equals_log_softmax() -> None:
    logits = torch.randn(6, 50) * 30
    expected = logits.log_softmax(-1)
    out = log_softmax_(logits)
    assert out.data_ptr() == logits.data_ptr()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@needs_onednn
def test_translator_packs_on_cpu_float32_only(tiny_run: Path) -> None:
    """The translator packs in float32 on the CPU and translates exactly as the unpacked model;
    int8 keeps its quantized layers (its float32 output projection packed)."""
    run = resolve_run(tiny_run)
    fp32 = load_native_engine(run, device="cpu")
    assert any(isinstance(m, PackedLinear) for m in fp32.model.modules())
    plain = copy.copy(fp32)
    plain.model = load_native_engine(run, device="cpu").model
    for parent in list(plain.model.modules()):  # unpack: the same weights through F.linear
        for name, child in parent.named_children():
            if isinstance(child, PackedLinear):
                linear = torch.nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
                linear.weight, linear.bias = child.weight, child.bias
                setattr(parent, name, linear)
    spec = DecodeRequest.of(run.spec.decode)
    assert [h[0].tokens for h in fp32.translate(LINES, spec)] == [h[0].tokens for h in plain.translate(LINES, spec)]
    int8 = load_native_engine(run, quantization="int8")  # no record: float32 logits, on packed weights
    assert [m for m in int8.model.modules() if isinstance(m, PackedLinear)] == [int8.model.output]


@needs_onednn
@pytest.mark.parametrize("products", [torch.float32, torch.bfloat16])
def test_self_attention_projections_fused_compute_what_three_do(products: torch.dtype) -> None:
    """Packing fuses each self-attention block's W^Q, W^K, W^V into one product (cross-attention keeps its
    own: its keys read the memory); the parameters stay, and every output is bit for bit the three products'."""
    from tbuild.components.attention import AttentionBlock
    from tbuild.engine.decoding.packed import FusedLinears

    torch.manual_seed(0)
    model = tiny_model()
    fused = copy.deepcopy(model)
    assert pack_linears(fused, products)
    names = {name.rsplit(".", 2)[-2] for name, m in fused.named_modules()
             if isinstance(m, AttentionBlock) and isinstance(m.fused_qkv, FusedLinears)}
    crosses = [m for name, m in fused.named_modules() if isinstance(m, AttentionBlock) and "cross_attn" in name]
    assert names == {"self_attn"} and crosses and all(m.fused_qkv is None for m in crosses)
    assert fused.state_dict().keys() == model.state_dict().keys()
    three = copy.deepcopy(model)  # packed again (a packed model cannot be copied), its blocks unfused
    pack_linears(three, products)
    for module in three.modules():
        if isinstance(module, AttentionBlock):
            module.fused_qkv = None
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 6))
    with torch.inference_mode():
        assert torch.equal(fused(src, tgt), three(src, tgt))
        memory, pad = fused.encode(src)
        ours, theirs = DecoderCache(), DecoderCache()
        for t in range(6):
            step = tgt[:, t:t + 1]
            assert torch.equal(fused.decode(step, memory, pad, ours), three.decode(step, memory, pad, theirs))
