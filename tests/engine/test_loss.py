"""The label-smoothed loss (§5.4): by hand, its fused gradient against autograd of the definition,
and the chunked computation against the whole."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tbuild.engine import loss as loss_module
from tbuild.engine.data.batches import IGNORED
from tbuild.engine.loss import label_smoothed_nll


def test_label_smoothing_by_hand() -> None:
    logits = torch.tensor([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4], [1.0, 1.0, 1.0, 1.0]]])
    target = torch.tensor([[1, 3, IGNORED]])  # last position is padding: past the row (batches.IGNORED)
    eps = 0.1
    expected_loss = expected_nll = 0.0
    for t in range(2):
        logp = [x - math.log(sum(math.exp(v) for v in logits[0, t].tolist())) for x in logits[0, t].tolist()]
        q = [eps / 4 + (1 - eps) * (k == target[0, t].item()) for k in range(4)]  # (1-ε)·one_hot + ε/V
        expected_loss += -sum(qk * lk for qk, lk in zip(q, logp, strict=True))
        expected_nll += -logp[target[0, t].item()]
    loss, nll, n = label_smoothed_nll(logits, target, eps)
    assert n == 2
    assert loss.item() == pytest.approx(expected_loss, rel=1e-6)
    assert nll.item() == pytest.approx(expected_nll, rel=1e-6)
    reference = F.cross_entropy(logits.view(-1, 4), target.view(-1), ignore_index=IGNORED, label_smoothing=eps,
                                reduction="sum")
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)


def test_label_smoothing_gradient_matches_autograd_of_definition() -> None:
    """The fused backward equals autograd through log_softmax of the definition; padding gets no gradient."""
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = IGNORED
    target[2, 1:] = IGNORED
    eps = 0.1
    loss, nll, n = label_smoothed_nll(logits, target, eps)
    (2.5 * loss).backward()
    fused = logits.grad.clone()
    logits.grad = None
    lp = logits.log_softmax(-1)
    keep = target.ne(IGNORED)
    ref = ((1 - eps) * -lp.gather(-1, target.clamp(min=0)[..., None]).squeeze(-1) + eps * -lp.mean(-1))[keep].sum()
    (2.5 * ref).backward()
    assert n == int(keep.sum())
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    assert torch.allclose(fused, logits.grad, atol=1e-12)
    assert fused[~keep].abs().max() == 0
    assert not nll.requires_grad


def test_label_smoothing_bf16_logits_get_bf16_gradient() -> None:
    logits = torch.randn(2, 3, 7).bfloat16().requires_grad_()
    loss, _, _ = label_smoothed_nll(logits, torch.tensor([[1, 2, IGNORED], [3, 4, 5]]), 0.1)
    assert loss.dtype == torch.float32
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_chunks_give_the_whole_loss_and_gradient(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows in chunks (here 3 rows of 11 logits, ragged last chunk) give the one-pass value and
    gradient to 1e-5 (the issue's tolerance; float64 agrees to 1e-12)."""
    torch.manual_seed(1)
    logits = torch.randn(4, 5, 11, dtype=torch.float64).to(dtype)
    target = torch.randint(1, 11, (4, 5))
    target[1, 2:] = IGNORED

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = logits.clone().requires_grad_()
        loss, nll, _ = label_smoothed_nll(x, target, 0.1)
        (3.0 * loss).backward()
        return loss.detach(), nll, x.grad

    whole = run()
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", 33)
    assert len(loss_module._chunks(20, 11)) == 7
    chunked = run()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for a, b in zip(whole, chunked, strict=True):
        torch.testing.assert_close(a.double(), b.double(), atol=tol, rtol=tol)


def test_fused_loss_equals_plain_cross_entropy_in_fp32() -> None:
    """Value and gradient of the fused loss against PyTorch's label-smoothed cross entropy, fp32, 1e-5."""
    torch.manual_seed(0)
    logits = torch.randn(4, 9, 301, requires_grad=True)
    target = torch.randint(1, 301, (4, 9))
    target[1, 5:] = IGNORED
    loss, _, n = label_smoothed_nll(logits, target, 0.1)
    (loss / n).backward()
    fused = logits.grad.clone()
    logits.grad = None
    plain = F.cross_entropy(logits.view(-1, 301), target.view(-1), ignore_index=IGNORED, label_smoothing=0.1,
                            reduction="sum")
    (plain / n).backward()
    assert (loss / n).item() == pytest.approx((plain / n).item(), abs=1e-5)
    torch.testing.assert_close(fused, logits.grad, atol=1e-5, rtol=1e-5)
