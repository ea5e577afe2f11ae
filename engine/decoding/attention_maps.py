"""Attention heatmaps of one translation (the paper's appendix figures): encoder self-, decoder
self- and encoder-decoder attention, per layer and head."""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import TbuildError
from ..figures.plots import _pyplot
from .native import NativeEngine, encode_sources
from .search import beam_search

KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
         "cross": "encoder-decoder attention"}


@torch.no_grad()
def attention_weights(translator: NativeEngine, sentence: str, beam: int, alpha: float, max_len_b: int
                      ) -> tuple[list[str], list[str], dict[str, list[torch.Tensor]]]:
    """Translate ``sentence``, then re-run the model teacher-forced on its output with explicit
    attention weights. Returns source pieces, target pieces and, per kind, a (H, T, S) tensor per layer."""
    tok, model, device = translator.tokenizer, translator.model, translator.policy.device
    source = encode_sources(tok, [sentence], translator.max_source_tokens)[0]  # ids + EOS
    if not source:
        raise TbuildError("--src is empty")
    src = torch.tensor([source], device=device)
    best = beam_search(model, src, beam=beam, alpha=alpha, max_len_a=1.0, max_len_b=max_len_b)[0][0]
    tgt_in = torch.tensor([[tok.special.start] + best.tokens], device=device)
    blocks = {"encoder": [layer.self_attn.sublayer for layer in model.encoder],
              "decoder": [layer.self_attn.sublayer for layer in model.decoder],
              "cross": [layer.cross_attn.sublayer for layer in model.decoder]}
    inputs: dict[torch.nn.Module, tuple[tuple, dict]] = {}

    def capture(block: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        inputs[block] = (args, {k: v for k, v in kwargs.items() if k != "cache"})

    hooks = [block.register_forward_pre_hook(capture, with_kwargs=True)
             for layers in blocks.values() for block in layers]
    try:
        model(src, tgt_in)  # one teacher-forced pass records each attention block's inputs
    finally:
        for hook in hooks:
            hook.remove()
    weights = {kind: [block.attention_weights(*inputs[block][0], **inputs[block][1])[0].float().cpu()
                      for block in layers] for kind, layers in blocks.items()}
    pieces = tok.sp.id_to_piece
    return [pieces(i) for i in source], [pieces(tok.special.start)] + [pieces(i) for i in best.tokens], weights


def plot_attention(src: list[str], tgt: list[str], weights: dict[str, list[torch.Tensor]], out_dir: Path,
                   layers: list[int] | None, heads: list[int] | None) -> list[Path]:
    """One PNG per kind: a grid of heatmaps, a row per layer and a column per head."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, per_layer in weights.items():
        rows = layers if layers is not None else list(range(len(per_layer)))
        n_heads = per_layer[0].size(0)
        cols = heads if heads is not None else list(range(n_heads))
        bad = [i for i in rows if not 0 <= i < len(per_layer)] + [h for h in cols if not 0 <= h < n_heads]
        if bad:
            raise TbuildError(f"no such layer/head {bad}: the model has {len(per_layer)} layers, {n_heads} heads")
        ylabels = src if kind == "encoder" else tgt
        xlabels = src if kind in ("encoder", "cross") else tgt
        size = max(len(xlabels), len(ylabels)) * 0.28 + 1.5
        fig, axes = plt.subplots(len(rows), len(cols), figsize=(size * len(cols), size * len(rows)), squeeze=False)
        for r, layer in enumerate(rows):
            for c, head in enumerate(cols):
                ax = axes[r][c]
                ax.imshow(per_layer[layer][head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
                ax.set_title(f"layer {layer} head {head}", fontsize=8)
                ax.set_xticks(range(len(xlabels)), xlabels, rotation=90, fontsize=6)
                ax.set_yticks(range(len(ylabels)), ylabels, fontsize=6)
        fig.suptitle(KINDS[kind])
        fig.tight_layout()
        path = out_dir / f"{kind}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
