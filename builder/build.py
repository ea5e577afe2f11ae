"""``build_model(spec)``: a pure function from a validated spec to its kind's graph (the encoder-decoder,
a decoder-only language model, or an encoder with an output head), by registry look-ups alone (no file
I/O, no globals)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

import tbuild.components.attention  # noqa: F401  (each block module registers its blocks)
import tbuild.components.char_input  # noqa: F401
import tbuild.components.feedforward  # noqa: F401
import tbuild.components.heads  # noqa: F401
import tbuild.components.norm  # noqa: F401
import tbuild.components.pointer  # noqa: F401
import tbuild.components.positional  # noqa: F401
from tbuild.components import ATTENTION, CHAR_INPUT, FFN, HEAD, NORM, POINTER, POSITIONAL
from tbuild.components.decoder_only import CausalLayer, DecoderOnly
from tbuild.components.encoder_only import EncoderOnly
from tbuild.components.ordered_layer import OrderedCausalLayer, OrderedDecoderLayer, OrderedEncoderLayer, OrderedLayer
from tbuild.components.spec_base import ComponentSpec
from tbuild.components.transformer import DecoderLayer, Embedding, EncoderDecoder, EncoderLayer, Residual

from .resolved import ResolvedGroup, ResolvedStack, resolve
from .spec import ModelSpec, Spec

Layer = Callable[[Residual, Residual | None, Residual], nn.Module]  # (self-attention, cross, FFN) -> a layer


class _Blocks:
    """The residual blocks of one stack's layers, built from its resolved groups."""

    def __init__(self, model: ModelSpec, stack: ResolvedStack) -> None:
        self.model, self.stack = model, stack

    def residual(self, block: nn.Module, norm: ComponentSpec | None, scale: float = 1.0) -> Residual:
        """``block`` in a residual connection; ``norm`` None: none of its own (a parallel layer's block)."""
        m = self.model
        own = nn.Identity() if norm is None else NORM.build(norm, d_model=m.d_model)
        return Residual(block, own, m.dropout.residual, m.norm_placement == "pre", scale)

    def attention(self, spec: ComponentSpec, role: str) -> nn.Module:
        use, m = self.stack.use(role), self.model
        return ATTENTION.build(spec, d_model=m.d_model, heads=use.heads, d_k=use.d_k, d_v=use.d_v,
                               dropout=m.dropout.attention, causal=use.causal)

    def ffn(self, group: ResolvedGroup) -> nn.Module:
        m = self.model
        return FFN.build(group.ffn, d_model=m.d_model, d_ff=self.stack.d_ff, dropout=m.dropout.activation)

    def standard(self, group: ResolvedGroup, layer: Layer) -> nn.Module:
        """The paper's layer (§3.1), its blocks made in the order they always were (the same initial weights)."""
        self_attn = self.residual(self.attention(group.attention, "self"), group.norm)
        ff = self.residual(self.ffn(group), group.norm)
        cross = None if group.cross_attention is None else self.residual(
            self.attention(group.cross_attention, "cross"), group.norm)
        return layer(self_attn, cross, ff)

    def ordered(self, group: ResolvedGroup, kind: type[OrderedLayer]) -> nn.Module:
        """A layer of the group's ``order`` (components/specs/order.py): one residual block per letter."""
        layout, blocks = group.layout, []
        for letter, name in layout.names():
            if letter == "f":
                block = self.residual(self.ffn(group), None if layout.parallel else group.norm, layout.ffn_scale)
            else:
                spec = group.attention if letter == "a" else group.cross_attention
                assert spec is not None  # c only in a stack that attends to an encoder (schema)
                role = "self" if letter == "a" else "cross"
                block = self.residual(self.attention(spec, role), None if layout.parallel else group.norm)
            blocks.append((letter, name, block))
        norm = NORM.build(group.norm, d_model=self.model.d_model) if layout.parallel else None
        return kind(blocks, norm)


def _layers(model: ModelSpec, stack: ResolvedStack, layer: Layer, ordered: type[OrderedLayer]) -> list[nn.Module]:
    """The stack's layers: the paper's made by ``layer`` from its residual sub-layers (cross None without
    one), other orders as ``ordered`` layers."""
    blocks = _Blocks(model, stack)
    return [blocks.standard(group, layer) if group.layout.standard else blocks.ordered(group, ordered)
            for group in stack.groups for _ in range(group.repeat)]


class _Parts:
    """What every kind shares: the token tables (tied as the spec says, §3.4), embeddings with positions,
    the output projection and the final norms."""

    def __init__(self, spec: Spec, shared_source: bool) -> None:
        model = self.model = spec.model
        self.view, d = resolve(model), model.d_model
        pad = spec.special().pad  # its row starts at zero and learns nothing (None: the vocabulary has no pad)
        self.tgt_tokens = nn.Embedding(spec.vocab_size(), d, padding_idx=pad)
        self.src_tokens = self.tgt_tokens if shared_source else nn.Embedding(spec.src_vocab_size(), d,
                                                                              padding_idx=pad)
        self.output = nn.Linear(d, spec.vocab_size(), bias=False)  # the pre-softmax projection (§3.4)
        if model.tie_embeddings != "none":
            self.output.weight = self.tgt_tokens.weight  # one matrix for embeddings and pre-softmax projection (§3.4)

    def embedding(self, tokens: nn.Embedding, *, source: bool = False) -> Embedding:
        """The embedding of a stack's input; ``source``: the encoder's (with ``model.char_input``, if any)."""
        stack = self.view.stack("encoder" if source else "decoder")
        assert stack is not None  # the kind's stacks (components/specs/graph.py)
        positional = _positional(self.model, self.view.positional, stack)
        return Embedding(tokens, positional, self.model.dropout.embedding, self.model.scale_embeddings,
                         self.model.dropout.token, _chars(self.model, tokens.num_embeddings) if source else None,
                         _embedding_norm(self.model))

    def final_norm(self, stack: ResolvedStack) -> nn.Module | None:
        return NORM.build(stack.final_norm, d_model=self.model.d_model) if stack.final_norm is not None else None


def _encoder_decoder(spec: Spec) -> nn.Module:
    parts = _Parts(spec, shared_source=spec.model.tie_embeddings == "three_way")
    encoder, decoder = parts.view.encoder, parts.view.decoder
    assert encoder is not None and decoder is not None  # the kind's stacks (components/specs/graph.py)
    return EncoderDecoder(
        src_embed=parts.embedding(parts.src_tokens, source=True),
        tgt_embed=parts.embedding(parts.tgt_tokens),
        encoder=_layers(spec.model, encoder, lambda a, _, f: EncoderLayer(a, f), OrderedEncoderLayer),
        decoder=_layers(spec.model, decoder, lambda a, c, f: DecoderLayer(a, c, f),  # type: ignore[arg-type]
                        OrderedDecoderLayer),
        encoder_norm=parts.final_norm(encoder),
        decoder_norm=parts.final_norm(decoder),
        output=parts.output,
        special=spec.special(),
        pointer=_pointer(spec),
    )


def _positional(model: ModelSpec, spec: ComponentSpec, stack: ResolvedStack) -> nn.Module:
    """The positional scheme of ``stack``'s embeddings; a scheme with a table per head (``per_head``: T5's bias)
    also gets the stack's heads and whether its self-attention is causal."""
    block = POSITIONAL[spec.kind].block  # type: ignore[attr-defined]
    own = {"heads": stack.heads, "causal": stack.causal} if getattr(block, "per_head", False) else {}
    return POSITIONAL.build(spec, d_model=model.d_model, max_positions=model.max_positions, **own)


def _embedding_norm(model: ModelSpec) -> nn.Module | None:
    """model.embedding_norm's norm (model.norm's kind and eps) on the embedding sum; None without one."""
    return NORM.build(model.norm, d_model=model.d_model) if model.embedding_norm else None


def _chars(model: ModelSpec, vocab_size: int) -> nn.Module | None:
    """model.char_input's block over the encoder's ``vocab_size`` pieces (None without one)."""
    if model.char_input is None:
        return None
    return CHAR_INPUT.build(model.char_input, d_model=model.d_model, vocab_size=vocab_size)


def _pointer(spec: Spec) -> nn.Module | None:
    """model.decoder.pointer's block (None without one), its id sets read from the (fitted) spec."""
    pointer = spec.model.pointer()
    if pointer is None:
        return None
    return POINTER.build(pointer, d_model=spec.model.d_model, vocab_size=spec.vocab_size(),
                         src_vocab_size=spec.src_vocab_size())


def _decoder_only(spec: Spec) -> nn.Module:
    parts = _Parts(spec, shared_source=True)  # one vocabulary, one table
    decoder = parts.view.decoder
    assert decoder is not None
    return DecoderOnly(
        tgt_embed=parts.embedding(parts.tgt_tokens),
        decoder=_layers(spec.model, decoder, lambda a, _, f: CausalLayer(a, f), OrderedCausalLayer),
        decoder_norm=parts.final_norm(decoder),
        output=parts.output,
        special=spec.special(),
        prefix_lm=spec.model.prefix,
    )


def _encoder_only(spec: Spec) -> nn.Module:
    model, view = spec.model, resolve(spec.model)
    encoder = view.encoder
    assert encoder is not None and model.head is not None  # the kind's stack and head (schema)
    tokens = nn.Embedding(spec.src_vocab_size(), model.d_model, padding_idx=spec.special().pad)  # the source side's
    positional = _positional(model, view.positional, encoder)
    vocab_sized = model.head.vocab_sized  # a masked LM's head: a score per piece
    shared = {"vocab_size": spec.src_vocab_size()} if vocab_sized else {}
    if model.head.norm_transform():  # a masked LM's dense-GELU-norm transform: model.norm's norm
        shared["norm"] = model.norm
    head = HEAD.build(model.head, d_model=model.d_model, **shared)
    if vocab_sized and model.tie_embeddings != "none":
        head.weight = tokens.weight  # one matrix for the embedding and the output layer (§3.4; BERT ties them too)
    return EncoderOnly(
        src_embed=Embedding(tokens, positional, model.dropout.embedding, model.scale_embeddings, model.dropout.token,
                            _chars(model, tokens.num_embeddings), _embedding_norm(model)),
        encoder=_layers(model, encoder, lambda a, _, f: EncoderLayer(a, f), OrderedEncoderLayer),
        encoder_norm=NORM.build(encoder.final_norm, d_model=model.d_model) if encoder.final_norm is not None else None,
        head=head,
    )


# model.kind -> the assembly of its graph (the kinds: components/specs/graph.py)
ASSEMBLY: dict[str, Callable[[Spec], nn.Module]] = {
    "encoder_decoder": _encoder_decoder,
    "decoder_only": _decoder_only,
    "encoder_only": _encoder_only,
}


def build_model(spec: Spec) -> nn.Module:
    """Build the model described by ``spec.model`` (its ``kind``'s graph, assembled by registry look-ups)
    with freshly initialised weights (on the default device: under ``with torch.device("meta")`` nothing
    is allocated)."""
    net = ASSEMBLY[spec.model.kind](spec)
    init_weights(net, spec.model.d_model)
    return net


def init_weights(net: nn.Module, d_model: int) -> None:
    """Xavier-uniform matrices (as tensor2tensor); embeddings N(0, d_model^-0.5) so that after the
    √d_model scale (§3.4) they have unit variance, like the positional encodings they are added to: the token
    tables (their padding row, if the vocabulary has one, zero) and the other tables with a padding row."""
    for module in net.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    tokens = {id(getattr(net, side).tokens) for side in ("src_embed", "tgt_embed") if hasattr(net, side)}
    for module in net.modules():  # after Linear: a tied output matrix keeps the embedding init
        if isinstance(module, nn.Embedding) and (module.padding_idx is not None or id(module) in tokens):
            nn.init.normal_(module.weight, std=d_model**-0.5)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
