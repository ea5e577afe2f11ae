"""Norms against their formulas; pre/post placement and the final norms."""

from __future__ import annotations

import math

import pytest
import torch

from tbuild.components.norm import LayerNorm, RMSNorm, RMSNormSpec

from ..conftest import tiny_model


def test_rmsnorm_matches_hand_formula() -> None:
    norm = RMSNorm(RMSNormSpec(eps=1e-6), d_model=4)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
    x = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
    rms = math.sqrt((1 + 4 + 9 + 0.25) / 4 + 1e-6)  # sqrt(mean(x²) + eps), no mean subtraction
    expected = torch.tensor([[1 / rms * 1, -2 / rms * 2, 3 / rms * 0.5, 0.5 / rms * -1]])
    torch.testing.assert_close(norm(x), expected)
    assert sum(p.numel() for p in norm.parameters()) == 4  # gain only, no bias


@pytest.mark.parametrize("placement,final,expected", [
    ("pre", None, True), ("post", None, False), ("pre", False, False), ("post", True, True)])
def test_final_norms_follow_placement(placement: str, final: bool | None, expected: bool) -> None:
    sets = [f"model.norm_placement={placement}", "model.norm.kind=rmsnorm"]
    if final is not None:
        sets.append(f"model.final_norm={str(final).lower()}")
    model = tiny_model(sets)
    assert (model.encoder_norm is not None) is expected and (model.decoder_norm is not None) is expected
    if expected:
        assert isinstance(model.encoder_norm, RMSNorm) and isinstance(model.decoder_norm, RMSNorm)
    assert all(layer.self_attn.pre_norm is (placement == "pre") for layer in model.encoder)


def test_pre_norm_residual_is_x_plus_sublayer_of_norm() -> None:
    model = tiny_model(["model.norm_placement=pre"])
    res = model.encoder[0].ffn
    x = torch.randn(2, 3, 16)
    torch.testing.assert_close(res(x), x + res.sublayer(res.norm(x)))
    post = tiny_model().encoder[0].ffn
    assert isinstance(post.norm, LayerNorm)
    torch.testing.assert_close(post(x), post.norm(x + post.sublayer(x)))
