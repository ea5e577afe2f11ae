"""Word alignment from cross-attention: for each output token, the source position the last decoder
layer attends to most (mean over heads), with the model teacher-forced on its own output."""

from __future__ import annotations

import torch


@torch.no_grad()
def align(model: torch.nn.Module, source: list[int], tokens: list[int], device: torch.device) -> list[int]:
    """One source position (0-based, over ``source``'s subwords, EOS included) per output token (fed after
    the model's start id)."""
    if not tokens:
        return []
    block = model.decoder[-1].cross_attn.sublayer
    captured: dict = {}

    def capture(_: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        captured["args"], captured["kwargs"] = args, {k: v for k, v in kwargs.items() if k != "cache"}

    hook = block.register_forward_pre_hook(capture, with_kwargs=True)
    try:
        model(torch.tensor([source], device=device), torch.tensor([[model.special.start] + tokens], device=device))
    finally:
        hook.remove()
    weights = block.attention_weights(*captured["args"], **captured["kwargs"])[0].float().mean(0)  # (T+1, S)
    return weights[: len(tokens)].argmax(-1).tolist()  # query i predicts token i
