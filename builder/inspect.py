"""Parameter counts per block, FLOPs per token and weight memory of a model (Table 3), built on the
meta device: shapes only, nothing allocated."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from tbuild.components.spec_base import ComponentSpec, Use
from tbuild.components.specs.attention import AttentionSpecBase, dot_product_flops
from tbuild.components.specs.order import LETTERS, Layout
from tbuild.components.weights import weight_tree

from .build import build_model
from .resolved import resolve
from .spec import Spec

FLOPS_FORMULA = ("FLOPs/token = 2·W + Σ over attention sub-layers of the kind's FLOPs per query token at "
                 "context n: W = weights in matrix products (linear layers and output projection, encoder work "
                 "counted once per target token), n = context length (source = target = n)")


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
    attention_flops: int  # Σ over attention sub-layers of their FLOPs per query token at ``context``
    context: int
    attention_formulas: dict[str, str]  # per attention kind used: its FLOPs per query token
    flops_formula: str  # the whole formula, with each attention kind's term

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding

    @property
    def flops_per_token(self) -> int:
        return 2 * self.matmul_weights + self.attention_flops

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


def attention_flops(spec: ComponentSpec, n: int, use: Use) -> tuple[int, str]:
    """FLOPs per query token of one attention sub-layer over n keys, and the formula used."""
    if isinstance(spec, AttentionSpecBase):
        return spec.flops_per_query(n, use), spec.flops_formula
    return dot_product_flops(n, use), AttentionSpecBase.flops_formula  # a plugin kind that does not say


def meta_model(spec: Spec) -> nn.Module:
    """The model of ``spec`` on the meta device: every shape, no memory, no initialisation cost."""
    with torch.device("meta"):
        return build_model(spec)


def inspect_model(spec: Spec, net: nn.Module | None = None, context: int = 64) -> Report:
    """Build the per-block table for ``net`` (built from ``spec``; default: on the meta device)."""
    net = meta_model(spec) if net is None else net
    view = resolve(spec.model)
    count = _Counter()
    rows: list[Row] = []
    tied = spec.model.tie_embeddings
    tree = weight_tree(net)
    part = {s.name: s for s in tree.stacks}  # the stack's layers, embedding and final norm in net
    embeds = {name: getattr(net, s.embedding) for name, s in part.items()}
    embedding = _token_rows(rows, embeds, tied, count)
    for stack in view.stacks:
        n = count(embeds[stack.name].positional)
        embedding += n
        rows.append(Row(f"{stack.name} positions", view.positional.kind, n))
    for stack in view.stacks:  # model.embedding_norm: a norm on each embedding sum
        if embeds[stack.name].norm is not None:
            rows.append(Row(f"{stack.name} embedding norm", spec.model.norm.kind, count(embeds[stack.name].norm)))
    chars = embeds["encoder"].chars if "encoder" in embeds else None
    if chars is not None and spec.model.char_input is not None:  # model.char_input (components/char_input.py)
        n = count(chars)
        embedding += n
        rows.append(Row("encoder char input", spec.model.char_input.kind, n,
                        f"each piece's first {chars.max_chars} bytes, pooled, {spec.model.char_input.combine}"))
    flops, formulas = 0, {}
    for stack in view.stacks:
        layers, start = getattr(net, part[stack.name].layers), 0
        for group in stack.groups:
            block = list(layers[start:start + group.repeat])
            label = f"{stack.name} layers {start}–{start + group.repeat - 1} (×{group.repeat})"
            kind = "/".join((group.attention.kind, group.ffn.kind, group.norm.kind))
            per_layer = _blocks(block[0], group.layout)
            total = sum(count(layer) for layer in block)
            norms = total // group.repeat - sum(per_layer.values())
            detail = ", ".join(f"{k} {v:,}" for k, v in per_layer.items()) + f", norms {norms:,} per layer"
            order = "" if group.layout.standard else f"order {group.layout.describe()}: "
            rows.append(Row(label, kind, total, order + detail))
            for role, spec_ in (("self", group.attention), ("cross", group.cross_attention)):
                if spec_ is not None:  # each of the layer's self- (a) or cross-attention (c) blocks
                    f, formulas[spec_.kind] = attention_flops(spec_, context, stack.use(role))
                    flops += group.repeat * group.layout.blocks.count({"self": "a", "cross": "c"}[role]) * f
            start += group.repeat
    for stack in view.stacks:
        norm = getattr(net, part[stack.name].norm)
        if norm is not None and stack.final_norm is not None:
            rows.append(Row(f"{stack.name} final norm", stack.final_norm.kind, count(norm)))
    pointer = spec.model.pointer()
    if pointer is not None:  # model.decoder.pointer: its projection (components/pointer.py)
        rows.append(Row("decoder pointer", pointer.kind, count(net.pointer), "encoder output at the next source "
                        "unit, projected, added to the decoder input"))
    output = getattr(net, tree.output)
    out = count(output)
    linear = isinstance(output, nn.Linear)  # a sentence vector's pooling has no layer (components/heads.py)
    if spec.model.head is not None:  # an encoder-only model's head over the final encoder states
        vocab = spec.model.head.vocab_sized  # a masked LM's: a score per piece
        note = (f"{output.weight.size(0):,} pieces" + (", tied to the token embedding" if tied != "none" else "")
                if vocab else f"{output.weight.size(0)} labels" if linear else "pooled into one vector per input")
        rows.append(Row("output head", spec.model.head.kind, out, note))
    else:
        table = "target" if "encoder" in embeds else "token"
        rows.append(Row("output projection", "linear", out, f"tied to the {table} embedding" if tied != "none" else ""))
    total = sum(r.params for r in rows)
    matmul = sum(_linear_weights(layer) for s in tree.stacks for layer in getattr(net, s.layers))
    matmul += (output.weight.numel() if linear else 0) + (_linear_weights(net.pointer) if pointer is not None else 0)
    formula = "; ".join([FLOPS_FORMULA] + [f"{kind} attention: {text}" for kind, text in formulas.items()])
    return Report(rows, total, embedding, matmul, flops, context, formulas, formula)


def _blocks(layer: nn.Module, layout: Layout) -> dict[str, int]:
    """A layer's parameters per block kind, norms left out: self-attention, feed-forward, cross-attention
    (``×n`` where the layer's order has n of them)."""
    found: dict[str, list[int]] = {}
    for letter, name in layout.names():
        found.setdefault(letter, []).append(sum(p.numel() for p in getattr(layer, name).sublayer.parameters()))
    return {LETTERS[letter] + (f" ×{len(found[letter])}" if len(found[letter]) > 1 else ""): sum(found[letter])
            for letter in "afc" if letter in found}


def _token_rows(rows: list[Row], embeds: dict[str, nn.Module], tied: str, count: _Counter) -> int:
    """The token tables' rows (an encoder-decoder's source and target embeddings, a decoder-only model's
    one token embedding, an encoder-only model's); their parameters."""
    if "decoder" not in embeds:  # an encoder-only model: one table, the encoder's, tied to nothing
        n = count(embeds["encoder"].tokens)
        rows.append(Row("token embedding", "embedding", n, ""))
        return n
    if "encoder" not in embeds:  # one table: the decoder's
        n = count(embeds["decoder"].tokens)
        rows.append(Row("token embedding", "embedding", n, "shared with output projection (§3.4)"
                        if tied != "none" else ""))
        return n
    src_tokens = count(embeds["encoder"].tokens)
    rows.append(Row("source embedding", "embedding", src_tokens,
                    "shared: source, target, output (§3.4)" if tied == "three_way" else ""))
    tgt_tokens = count(embeds["decoder"].tokens)
    if tied != "three_way":
        rows.append(Row("target embedding", "embedding", tgt_tokens,
                        "shared with output projection (§3.4)" if tied == "decoder" else ""))
    return src_tokens + tgt_tokens


# Dense peak tensor-core TFLOPS per GPU in the precision tbuild trains in there (bf16; fp16 where a GPU
# has no bf16), from the vendors' data sheets (SXM parts; without sparsity). P100 is the paper's GPU (§5.2).
GPU_PEAK_TFLOPS = {"h200": 989.0, "h100": 989.0, "a100": 312.0, "l4": 121.0, "v100": 125.0, "t4": 65.0,
                   "p100": 21.2}


@dataclass
class TrainingEstimate:
    """Estimated wall time of ``spec.train``: FLOPs per update over (GPUs × peak × MFU)."""

    gpus: int
    gpu_type: str
    mfu: float
    tokens_per_update: int
    flops_per_update: float
    updates: int
    seconds: float


def estimate_training(spec: Spec, report: Report, gpus: int, gpu_type: str, mfu: float) -> TrainingEstimate:
    """Training FLOPs ≈ 3 × forward FLOPs (the backward pass costs twice the forward) per target token,
    with an update of ``batch_tokens × update_freq`` target tokens (the padded budget: an upper
    bound), for ``max_steps`` updates, on ``gpus`` GPUs each reaching ``mfu`` of its peak."""
    if gpu_type not in GPU_PEAK_TFLOPS:
        raise ValueError(f"unknown GPU type {gpu_type!r}; choose from {', '.join(GPU_PEAK_TFLOPS)}")
    if gpus < 1 or not 0 < mfu <= 1:
        raise ValueError(f"need gpus >= 1 and 0 < mfu <= 1 (got {gpus}, {mfu})")
    if spec.train.max_steps is None:
        raise ValueError("train.max_steps is not set: the estimate needs a number of updates")
    tokens = spec.train.batch_tokens * spec.train.update_freq
    flops = 3.0 * report.flops_per_token * tokens
    seconds = flops * spec.train.max_steps / (gpus * GPU_PEAK_TFLOPS[gpu_type] * 1e12 * mfu)
    return TrainingEstimate(gpus, gpu_type, mfu, tokens, flops, spec.train.max_steps, seconds)
