"""Positional schemes against their definitions."""

from __future__ import annotations

import math

import torch

from tbuild.builder import load_spec
from tbuild.components.positional import Learned, LearnedSpec, Sinusoidal, SinusoidalSpec, sinusoid_table


def test_sinusoid_table_matches_section_3_5() -> None:
    d_model, length = 10, 50
    table = sinusoid_table(length, d_model)
    for pos in range(length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_sinusoidal_adds_table_at_offset_and_extends() -> None:
    pe = Sinusoidal(SinusoidalSpec(), d_model=6, max_positions=4)
    x = torch.zeros(1, 3, 6)
    torch.testing.assert_close(pe(x, offset=5), sinusoid_table(8, 6)[5:8][None])  # grows past 4


def test_learned_table_shape_and_limit() -> None:
    pe = Learned(LearnedSpec(), d_model=6, max_positions=9)
    assert pe.embedding.weight.shape == (9, 6)
    assert pe(torch.zeros(2, 9, 6)).shape == (2, 9, 6)
    try:
        pe(torch.zeros(1, 10, 6))
    except ValueError as e:
        assert "max_positions" in str(e)
    else:
        raise AssertionError("10 positions should exceed max_positions 9")


def test_learned_positions_need_max_positions() -> None:
    import pytest

    from tbuild.builder import SpecError

    with pytest.raises(SpecError, match="model.positional: learned positions need model.max_positions"):
        load_spec({"model": {"positional": {"kind": "learned"}}})
