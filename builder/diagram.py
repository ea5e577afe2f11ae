"""What a spec builds, as boxes to draw: each stack's embedding, its layer groups (attention, FFN and
norm kinds, norm placement, cross-attention, parameters) and final norm, and the output projection (an
encoder-only model's: its head) — read from the resolved spec (``resolved.py``) and the parameter table of
``inspect_model``, nothing traced. Each model kind draws its own stacks (``components/specs/graph.py``):
the encoder-decoder both, a decoder-only model the decoder alone (no cross-attention), an encoder-only
model the encoder and its head. ``mermaid`` writes it as a Markdown-renderable flowchart; ``engine/figures/drawing.py``
draws it."""

from __future__ import annotations

from dataclasses import dataclass

from tbuild.components.spec_base import ComponentSpec
from tbuild.components.specs.head import HeadBase

from .inspect import Report
from .resolved import ResolvedStack, resolve
from .spec import Spec


@dataclass(frozen=True)
class Box:
    key: str  # an identifier (mermaid node id)
    title: str
    lines: tuple[str, ...]
    cross: bool = False  # a decoder group that attends to the encoder's output


@dataclass(frozen=True)
class Diagram:
    name: str
    encoder: tuple[Box, ...]  # bottom (embedding) to top (final norm); empty: a decoder-only model
    decoder: tuple[Box, ...]  # empty: an encoder-only model
    output: Box  # on top of the last stack: the output projection, or an encoder-only model's head
    notes: tuple[str, ...]  # kind, positional scheme, tying, norm placement, totals

    @property
    def stacks(self) -> tuple[tuple[str, tuple[Box, ...]], ...]:
        """The model's stacks, input side first: (name, boxes) of each one it has."""
        return tuple((name, boxes) for name, boxes in (("encoder", self.encoder), ("decoder", self.decoder))
                     if boxes)


def describe(spec: ComponentSpec) -> str:
    """``kind (field=value, …)`` with the fields that differ from their defaults."""
    fields = spec.model_dump(exclude={"kind"}, exclude_defaults=True)
    return spec.kind + (f" ({', '.join(f'{k}={v}' for k, v in fields.items())})" if fields else "")


def diagram(spec: Spec, report: Report, name: str | None = None) -> Diagram:
    """The boxes of ``spec``'s model; ``report`` (``inspect_model(spec)``) gives the parameter counts."""
    model, view = spec.model, resolve(spec.model)
    params = {row.block: row.params for row in report.rows}
    stacks = {stack.name: _stack_boxes(spec, stack, params, len(view.stacks) == 1) for stack in view.stacks}
    out = params.get("output projection", 0)
    if model.head is not None:  # an encoder-only model's head over the final encoder states
        head = params.get("output head", 0)
        output = Box("out", f"output head: {model.head.kind}", (*_head_lines(model.head), f"{head:,} params"))
    else:
        table = "target" if "encoder" in stacks else "token"
        output = Box("out", "output projection + softmax", (f"{out:,} params" if out else f"tied to the {table} "
                                                            "embedding",))
    tying = model.tie_embeddings if model.head is None else "none (a head)"
    notes = (f"{model.kind}, d_model {model.d_model}, positions: {describe(view.positional)}, tying: {tying}, "
             f"{model.norm_placement}-norm",
             f"{report.total:,} parameters, {report.flops_per_token:,} FLOPs/token")
    return Diagram(name or spec.name or "model", stacks.get("encoder", ()), stacks.get("decoder", ()), output, notes)


def _head_lines(head: HeadBase) -> tuple[str, ...]:
    """A head's labels (counted, not listed) and its other settings."""
    labels = head.label_set()
    if head.vocab_sized:  # a masked LM's head: a score per vocabulary piece
        return ("a score per vocabulary piece",)
    count = f"{len(labels)} labels" if isinstance(labels, list) else "labels from the data"
    others = head.model_dump(exclude={"kind", "labels"})
    return (count + "".join(f", {k} {v}" for k, v in others.items() if k != "bias"),)


def _stack_boxes(spec: Spec, stack: ResolvedStack, params: dict[str, int], alone: bool) -> tuple[Box, ...]:
    """One stack's boxes, bottom to top: its embedding (``alone``: the model's one token table), each layer
    group, its final norm."""
    model, positional = spec.model, resolve(spec.model).positional
    side = "token" if alone else "source" if stack.name == "encoder" else "target"
    own = f"{side} embedding" in params  # three-way tying: one table, counted on the source side
    embed = params.get(f"{side} embedding", 0) + params.get(f"{stack.name} positions", 0)
    shared = {"three_way": "shared by source, target and output", "decoder": "shared with the output projection"}
    if model.head is not None:  # an encoder-only model: its head has its own weights, tied to nothing
        note = ""
    elif alone:  # a decoder-only model's one table
        note = "" if model.tie_embeddings == "none" else shared["decoder"]
    else:
        note = (shared.get(model.tie_embeddings, "") if stack.name == "decoder" or model.tie_embeddings == "three_way"
                else "")
    lines = ([f"{embed:,} params"] if own else []) + ([note] if note else [])
    boxes = [Box(f"{stack.name[0]}emb", f"{side} embedding + {describe(positional)} positions", tuple(lines))]
    start = 0
    for n, group in enumerate(stack.groups):
        label = f"{stack.name} layers {start}–{start + group.repeat - 1} (×{group.repeat})"
        lines = [f"self-attention: {describe(group.attention)}, {stack.heads} heads"
                 + (", causal" if stack.causal else "")]
        if group.cross_attention is not None:
            lines.append(f"cross-attention: {describe(group.cross_attention)}")
        lines += [f"FFN: {describe(group.ffn)}, d_ff {stack.d_ff}",
                  f"norm: {describe(group.norm)}, {model.norm_placement}-norm",
                  f"{params.get(label, 0):,} params"
                  + (f" ({params.get(label, 0) // group.repeat:,} per layer)" if group.repeat > 1 else "")]
        if not group.layout.standard:  # blocks in another order than the paper's (components/specs/order.py)
            lines.insert(0, f"order: {group.layout.describe()}")
        last = start + group.repeat - 1
        title = f"layer {start}" if group.repeat == 1 else f"layers {start}–{last} ×{group.repeat}"
        boxes.append(Box(f"{stack.name[0]}{n}", title, tuple(lines), group.cross_attention is not None))
        start += group.repeat
    if stack.final_norm is not None:
        boxes.append(Box(f"{stack.name[0]}norm", f"final norm: {describe(stack.final_norm)}",
                         (f"{params.get(f'{stack.name} final norm', 0):,} params",)))
    return tuple(boxes)


def _node(box: Box) -> str:
    text = "<br/>".join([f"<b>{box.title}</b>", *box.lines]).replace('"', "#quot;")
    return f'{box.key}["{text}"]'


def mermaid(d: Diagram) -> str:
    """A mermaid flowchart (bottom to top, as the paper's Figure 1) of the diagram: a subgraph per stack,
    the output (or head) on top of the last."""
    lines = ["flowchart BT"]
    for name, boxes in d.stacks:
        lines.append(f'  subgraph {name}["{name.capitalize()}"]')
        lines.append("    direction BT")
        lines += [f"    {_node(b)}" for b in boxes]
        lines += [f"    {a.key} --> {b.key}" for a, b in zip(boxes, boxes[1:], strict=False)]
        lines.append("  end")
    lines.append(f"  {_node(d.output)}")
    lines.append(f"  {d.stacks[-1][1][-1].key} --> {d.output.key}")
    lines += [f"  {d.encoder[-1].key} -. encoder output .-> {b.key}" for b in d.decoder if b.cross]
    return "\n".join(lines) + "\n"
