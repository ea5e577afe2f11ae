"""A run's carried optimizer state (train.init without reset: optimizer) placed where the optimizer reads it:
the moments on the parameter's device, the step count there too for a fused or capturable optimizer (a
fused CUDA AdamW, what training builds on a GPU), as Optimizer.load_state_dict places them."""

from __future__ import annotations

import torch
from torch import nn

from tbuild.engine.start.values import Initial


def _carried() -> Initial:
    slots = {"step": torch.tensor(40.0, dtype=torch.float64), "exp_avg": torch.ones(2, 2),
             "exp_avg_sq": torch.full((2, 2), 0.5)}
    return Initial(moments={"weight": slots})


def test_a_capturable_optimizers_step_count_moves_to_the_parameters_device() -> None:
    model = nn.Linear(2, 2, bias=False, device="meta")  # stands in for a GPU: nothing is allocated
    optimizer = torch.optim.AdamW(model.parameters(), capturable=True)
    _carried().load_moments(model, optimizer)
    state = optimizer.state[model.weight]
    assert state["step"].device == model.weight.device and state["step"].dtype == torch.float32
    assert state["exp_avg"].device == model.weight.device and state["exp_avg_sq"].device == model.weight.device


def test_a_plain_optimizers_step_count_stays_on_the_cpu_and_trains_on() -> None:
    model = nn.Linear(2, 2, bias=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    _carried().load_moments(model, optimizer)
    assert optimizer.state[model.weight]["step"].device.type == "cpu"
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    assert optimizer.state[model.weight]["step"].item() == 41  # the carried count went on
