"""Model FLOPs of a training step: 3 × the forward FLOPs (backward ≈ 2 × forward) on the real, not
padded, lengths of the batch, attention included, counted from tbuild's spec of the shape (the same
dimensions every implementation runs)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from torch import nn

from tbuild.builder.inspect import attention_flops, meta_model
from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec


def _matmul_weights(module: nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


class StepFlops:
    """Model FLOPs of training steps of ``spec``'s model; the weights are counted once, on the meta device."""

    def __init__(self, spec: Spec) -> None:
        net, self.view = meta_model(spec), resolve(spec.model)
        cross = [block.sublayer for layer in net.decoder for name, block in layer.named_children()
                 if name.startswith("cross_attn")]  # cross_attn, cross_attn_2, … (model.decoder.order)
        self.cross_kv = sum(_matmul_weights(c.w_k) + _matmul_weights(c.w_v) for c in cross)
        self.encoder = sum(_matmul_weights(layer) for layer in net.encoder)
        self.decoder = sum(_matmul_weights(layer) for layer in net.decoder) - self.cross_kv + net.output.weight.numel()

    def forward(self, src_lens: Sequence[int], tgt_lens: Sequence[int]) -> int:
        """Forward FLOPs of a batch of pairs with these source and target lengths (EOS counted):
        2 FLOPs per weight per token (the cross-attention K/V projections per source token, the rest of
        the decoder and the output projection per target token), plus each attention's own FLOPs per
        query (``flops_per_query`` of its kind) over the keys it sees: the whole source, or the target
        prefix up to and including the query (causal self-attention)."""
        flops = 2 * (self.encoder + self.cross_kv) * sum(src_lens) + 2 * self.decoder * sum(tgt_lens)
        for stack in (self.view.encoder, self.view.decoder):
            for group in stack.groups:
                use = stack.use("self")
                per_query = cache(lambda n, spec=group.attention, use=use: attention_flops(spec, n, use)[0])
                blocks = group.layout.blocks  # the layer's order (model.<stack>.order): a and c blocks
                selfs, crosses = group.repeat * blocks.count("a"), group.repeat * blocks.count("c")
                if use.causal:  # query i (1-based) sees i keys
                    flops += selfs * sum(per_query(i) for t in tgt_lens for i in range(1, t + 1))
                else:
                    flops += selfs * sum(s * per_query(s) for s in src_lens)
                if group.cross_attention is not None:
                    cross, cross_use = group.cross_attention, stack.use("cross")
                    flops += crosses * sum(t * attention_flops(cross, s, cross_use)[0]
                                           for s, t in zip(src_lens, tgt_lens, strict=True))
        return flops

    def step(self, src_lens: Sequence[int], tgt_lens: Sequence[int]) -> int:
        """Model FLOPs of one training step on the batch: forward + backward = 3 × forward."""
        return 3 * self.forward(src_lens, tgt_lens)
