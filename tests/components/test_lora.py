"""LoRA layers (Hu et al. 2021): the base's outputs at step 0, only the adapters train, merged equals
unmerged, targets by group and pattern."""

from __future__ import annotations

import copy

import pytest
import torch

from tbuild.components.lora import Adapters, LoRALinear, adapter_names, attach, match_targets, merged
from tests.conftest import tiny_model


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randint(4, 30, (2, 7)), torch.randint(4, 30, (2, 5))


def _adapted(targets: list[str], dropout: float = 0.0) -> tuple[torch.nn.Module, torch.nn.Module, Adapters]:
    base = tiny_model()
    model = copy.deepcopy(base)
    adapters = Adapters(match_targets(model, targets), 4, 8.0, dropout)
    for p in model.parameters():
        p.requires_grad_(False)
    attach(model, adapters)
    return base, model, adapters


def test_at_step_0_the_outputs_are_the_bases() -> None:
    base, model, _ = _adapted(["attention", "ffn"])
    base.eval(), model.eval()
    src, tgt = _inputs()
    assert torch.equal(model(src, tgt), base(src, tgt))


def test_only_the_adapters_train_and_merged_equals_unmerged() -> None:
    base, model, adapters = _adapted(["attention", "ffn"], dropout=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trained = [p for p in model.parameters() if p.requires_grad]
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names == adapter_names(adapters)
    optimizer = torch.optim.AdamW(trained, lr=1e-2)
    src, tgt = _inputs()
    model.train()
    for _ in range(3):
        model(src, tgt).logsumexp(-1).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    after = model.state_dict()
    for name, value in after.items():
        assert torch.equal(value, before[name]) == (name not in names), name  # the base bit for bit
    state = {k: v for k, v in after.items() if "lora_" not in k}
    adapter = {k: v for k, v in after.items() if "lora_" in k}
    base.load_state_dict(merged(state, adapter, adapters))
    model.eval(), base.eval()
    assert torch.allclose(model(src, tgt), base(src, tgt), atol=1e-5)


def test_targets_by_group_and_pattern() -> None:
    model = tiny_model()
    attention, ffn = match_targets(model, ["attention"]), match_targets(model, ["ffn"])
    assert all(n.rsplit(".", 1)[1] in ("w_q", "w_k", "w_v", "w_o") for n in attention)
    assert all(n.rsplit(".", 1)[1] in ("w1", "w2") for n in ffn) and not set(attention) & set(ffn)
    assert match_targets(model, ["encoder.*.self_attn.sublayer.w_q"]) == ("encoder.0.self_attn.sublayer.w_q",
                                                                         "encoder.1.self_attn.sublayer.w_q")
    with pytest.raises(ValueError, match=r"'\*.w_nope' matches no linear module"):
        match_targets(model, ["attention", "*.w_nope"])


def test_the_layer_keeps_the_base_tensors_and_names() -> None:
    base = torch.nn.Linear(6, 5)
    layer = LoRALinear(base, r=2, alpha=4, dropout=0.0)
    assert layer.weight is base.weight and layer.bias is base.bias and layer.scaling == 2.0
    assert set(dict(layer.named_parameters())) == {"weight", "bias", "lora_A.weight", "lora_B.weight"}
    assert torch.count_nonzero(layer.lora_B.weight) == 0 and torch.count_nonzero(layer.lora_A.weight) > 0
