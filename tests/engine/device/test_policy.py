"""One device and precision policy for every command."""

from __future__ import annotations

import pytest
import torch

from tbuild.engine.device.policy import Policy, attention_backends, choose_device, choose_policy
from tbuild.engine.errors import TbuildError


def test_cpu_defaults_to_fp32_and_bf16_on_request() -> None:
    auto = choose_policy("auto", "cpu")
    assert auto.device.type == "cpu" and auto.autocast_dtype is None and auto.precision == "fp32"
    bf16 = choose_policy("bf16", "cpu")
    assert bf16.autocast_dtype == torch.bfloat16 and bf16.precision == "bf16"
    with bf16.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with auto.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


def test_fp16_is_cuda_only_and_other_precisions_scale_nothing() -> None:
    with pytest.raises(TbuildError, match="fp16 needs a CUDA device"):
        choose_policy("fp16", "cpu")
    for precision in ("auto", "fp32", "bf16"):
        assert not choose_policy(precision, "cpu").grad_scaler().is_enabled()  # type: ignore[arg-type]


def test_device_names() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert choose_device("auto").type == expected
    with pytest.raises(TbuildError, match="unknown device 'tpu'; choose from auto, cpu, cuda"):
        choose_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_refused_without_a_gpu() -> None:
    with pytest.raises(TbuildError, match="no CUDA device is available"):
        choose_policy("auto", "cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_auto_is_bf16_where_supported() -> None:
    policy = choose_policy("auto", "auto")
    assert policy.device.type == "cuda"
    assert policy.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    assert policy.grad_scaler().is_enabled() == (policy.precision == "fp16")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fp16_scales_the_loss() -> None:
    policy = choose_policy("fp16", "cuda")
    scaler = policy.grad_scaler()
    assert policy.autocast_dtype == torch.float16 and scaler.is_enabled()
    w = torch.ones(3, device="cuda", requires_grad=True)
    with policy.autocast():  # the loss in fp32, as tbuild's (a scale of 2^16 overflows fp16 itself)
        loss = (w.half() * 1e-4).float().mean()
    scaler.scale(loss).backward()
    assert w.grad is not None and float(w.grad[0]) == pytest.approx(1e-4 * scaler.get_scale() / 3, rel=1e-2)


def test_attention_backends_by_device() -> None:
    """CUDA: flash, then memory-efficient (takes padding masks), then math; never cuDNN, which plans
    per shape. CPU: PyTorch's own choice. Batch shapes are bounded on CUDA only."""
    from torch.nn.attention import SDPBackend

    cuda = attention_backends(torch.device("cuda"))
    assert cuda == [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    assert SDPBackend.CUDNN_ATTENTION not in cuda
    assert attention_backends(torch.device("cpu")) is None
    cpu = Policy(torch.device("cpu"))
    q = torch.randn(2, 2, 5, 8)
    with cpu.attention():
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    cuda = Policy(torch.device("cuda"))
    assert cpu.shape_buckets() == cpu.shape_buckets(True) == (1, 0)
    assert cuda.shape_buckets() == (8, 0) and cuda.shape_buckets(cuda_graphs=True) == (8, 8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_attention_runs_under_the_chosen_backends() -> None:
    """Padding-masked (efficient) and causal (flash) attention run under the CUDA choice, in bf16."""
    policy = choose_policy("bf16", "cuda")
    q = torch.randn(2, 4, 16, 64, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(2, 1, 1, 16, dtype=torch.bool, device="cuda")
    mask[0, ..., 10:] = False
    with policy.attention():
        masked = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        causal = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    reference = torch.nn.functional.scaled_dot_product_attention(q.float(), q.float(), q.float(), attn_mask=mask)
    assert torch.allclose(masked.float(), reference, atol=3e-2)
    assert causal.isfinite().all()
