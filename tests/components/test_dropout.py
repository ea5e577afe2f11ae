"""Dropout (§5.4): zero with probability p, scale the rest by 1/(1-p), on every device."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.dropout import Dropout


def _check_distribution(device: str) -> None:
    drop = Dropout(0.3).train()
    x = torch.ones(200_000, device=device)
    y = drop(x)
    kept = y != 0
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.7))  # survivors scaled by 1/(1-p)
    assert abs(1 - kept.float().mean().item() - 0.3) < 0.005  # zeroed with probability p
    assert abs(y.mean().item() - 1.0) < 0.01  # expectation kept
    assert drop.eval()(x) is x and Dropout(0.0).train()(x) is x


def test_dropout_on_cpu() -> None:
    _check_distribution("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_dropout_on_cuda_uses_the_device_kernel() -> None:
    _check_distribution("cuda")
    x = torch.randn(1000, device="cuda")
    torch.manual_seed(3)  # the same generator state for both: the same draws iff the same kernel
    ours = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    torch.testing.assert_close(ours, torch.nn.functional.dropout(x, 0.5, training=True))


def test_probability_range() -> None:
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        Dropout(1.0)


def test_cpu_dropout_keeps_the_draws_of_rand_ge_p() -> None:
    """The in-place mask gives exactly the former `x * ((rand >= p) · 1/(1-p))` for the same seed."""
    x = torch.randn(64, 32)
    torch.manual_seed(3)
    expected = x * (torch.rand(x.shape) >= 0.3).float().mul_(1.0 / 0.7)
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.3).train()(x), expected)


def test_token_dropout_zeroes_whole_embeddings_and_scales_the_rest() -> None:
    """Word dropout (``model.dropout.token``): per token, the whole vector is zeroed with probability p or kept
    times 1/(1-p), before positions are added; nothing changes in evaluation."""
    from tbuild.components.positional import Sinusoidal
    from tbuild.components.specs.positional import SinusoidalSpec
    from tbuild.components.transformer import Embedding

    tokens = torch.nn.Embedding(50, 16)
    positional = Sinusoidal(SinusoidalSpec(), d_model=16, max_positions=512)
    embed = Embedding(tokens, positional, dropout=0.0, scale=False, token_dropout=0.25).train()
    ids = torch.randint(1, 50, (40, 100))
    positions = embed.positional(torch.zeros(40, 100, 16), 0)  # the positions alone
    vectors = embed(ids) - positions
    zeroed = vectors.abs().sum(-1) == 0
    torch.testing.assert_close(vectors[~zeroed], tokens(ids)[~zeroed] / 0.75)
    assert abs(zeroed.float().mean().item() - 0.25) < 0.02  # one draw per token, not per element
    embed.eval()
    torch.testing.assert_close(embed(ids), positions + tokens(ids))
