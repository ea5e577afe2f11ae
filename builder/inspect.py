"""Parameter counts per block, FLOPs per token and weight memory of a built model (Table 3)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from torch import nn

from tbuild.components.transformer import EncoderDecoder

from .schema import Spec, StackSpec


@dataclass
class Row:
    """One line of the table: a block, its kind and its parameters (shared ones counted once)."""

    block: str
    kind: str
    params: int
    note: str = ""


@dataclass
class Report:
    rows: list[Row]
    total: int
    embedding: int
    matmul_weights: int  # weights used in matrix products per token (linear layers, output projection)
    attention_width: int  # Σ over attention sub-layers of h·(d_k + d_v)
    context: int
    flops_formula: str = field(default=(
        "FLOPs/token = 2·W + 2·n·A: W = weights in matrix products (linear layers and output projection, "
        "encoder work counted once per target token), A = Σ over attention sub-layers of h·(d_k+d_v), "
        "n = context length (source = target = n)"))

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding

    @property
    def flops_per_token(self) -> int:
        return 2 * self.matmul_weights + 2 * self.context * self.attention_width

    def to_json(self) -> dict:
        out = asdict(self)
        out.update(non_embedding=self.non_embedding, flops_per_token=self.flops_per_token,
                   total_millions=round(self.total / 1e6, 2),
                   memory_bytes={"fp32": 4 * self.total, "bf16": 2 * self.total})
        return out


class _Counter:
    """Counts each parameter tensor once, however many modules share it."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def __call__(self, module: nn.Module) -> int:
        n = 0
        for p in module.parameters():
            if id(p) not in self.seen:
                self.seen.add(id(p))
                n += p.numel()
        return n


def _linear_weights(module: nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def _group_label(stack: StackSpec, model_spec, i: int) -> str:  # noqa: ANN001
    g = stack.layer_groups()[i]
    parts = [(g.attention or stack.attention or model_spec.attention).kind,
             (g.ffn or stack.ffn or model_spec.ffn).kind, (g.norm or stack.norm or model_spec.norm).kind]
    return "/".join(parts)


def inspect_model(spec: Spec, net: EncoderDecoder, context: int = 64) -> Report:
    """Build the per-block table for ``net`` (built from ``spec``)."""
    count = _Counter()
    rows: list[Row] = []
    m = spec.model
    tied = m.tie_embeddings
    src_tokens = count(net.src_embed.tokens)
    rows.append(Row("source embedding", "embedding", src_tokens,
                    "shared: source, target, output (§3.4)" if tied == "three_way" else ""))
    tgt_tokens = count(net.tgt_embed.tokens)
    if tied != "three_way":
        rows.append(Row("target embedding", "embedding", tgt_tokens,
                        "shared with output projection (§3.4)" if tied == "decoder" else ""))
    embedding = src_tokens + tgt_tokens
    for name, emb in (("encoder positions", net.src_embed), ("decoder positions", net.tgt_embed)):
        n = count(emb.positional)
        embedding += n
        rows.append(Row(name, m.positional.kind, n))
    attention_width = 0
    for side, layers, stack in (("encoder", net.encoder, m.encoder), ("decoder", net.decoder, m.decoder)):
        start = 0
        for gi, group in enumerate(stack.layer_groups()):
            block = list(layers[start:start + group.repeat])
            label = f"{side} layers {start}–{start + group.repeat - 1} (×{group.repeat})"
            kind = _group_label(stack, m, gi)
            first = block[0]
            sub = {"self-attention": first.self_attn.sublayer, "feed-forward": first.ffn.sublayer}
            if side == "decoder":
                sub["cross-attention"] = first.cross_attn.sublayer
            per_layer = {k: sum(p.numel() for p in v.parameters()) for k, v in sub.items()}
            total = sum(count(layer) for layer in block)
            norms = total // group.repeat - sum(per_layer.values())
            detail = ", ".join(f"{k} {v:,}" for k, v in per_layer.items()) + f", norms {norms:,} per layer"
            rows.append(Row(label, kind, total, detail))
            heads_width = stack.heads * ((stack.d_k or 0) + (stack.d_v or 0))
            attention_width += group.repeat * heads_width * (2 if side == "decoder" else 1)
            start += group.repeat
    for name, norm in (("encoder final norm", net.encoder_norm), ("decoder final norm", net.decoder_norm)):
        if norm is not None:
            rows.append(Row(name, m.norm.kind, count(norm)))
    out = count(net.output)
    rows.append(Row("output projection", "linear", out, "tied to the target embedding" if tied != "none" else ""))
    total = sum(r.params for r in rows)
    matmul = sum(_linear_weights(layer) for layer in list(net.encoder) + list(net.decoder))
    matmul += net.output.weight.numel()
    return Report(rows, total, embedding, matmul, attention_width, context)
