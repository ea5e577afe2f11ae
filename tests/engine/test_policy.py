"""One device and precision policy for every command."""

from __future__ import annotations

import pytest
import torch

from tbuild.engine.errors import TbuildError
from tbuild.engine.policy import choose_device, choose_policy


def test_cpu_defaults_to_fp32_and_bf16_on_request() -> None:
    auto = choose_policy("auto", "cpu")
    assert auto.device.type == "cpu" and auto.autocast_dtype is None and auto.precision == "fp32"
    bf16 = choose_policy("bf16", "cpu")
    assert bf16.autocast_dtype == torch.bfloat16 and bf16.precision == "bf16"
    with bf16.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with auto.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


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
    assert policy.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp32")
