"""The encoder-decoder graph (§3.1, Figure 1), assembled from already-built blocks.

Legend: B batch, S source length, T target length, D d_model, V vocabulary.
Modules take their parts as arguments; ``tbuild.builder.build_model`` decides what to pass in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from .dropout import Dropout
from .kv_cache import KVBuffer
from .packing import blocked, segment_positions
from .pointer import PointedMemory, Pointer
from .positional import Positional
from .weights import LAYER, Names, Stack, WeightTree, params

if TYPE_CHECKING:
    from .specs.special import Specials


class Residual(nn.Module):
    """One sub-layer connection. Post-norm (§3.1, §5.4): LayerNorm(x + Dropout(Sublayer(x)));
    pre-norm (a departure from the paper, Wang et al. 2019): x + Dropout(Sublayer(Norm(x))).
    ``scale`` (not in the paper; 1 there) multiplies the dropped-out output: a macaron layer's half-step
    feed-forward (components/specs/order.py)."""

    def __init__(self, sublayer: nn.Module, norm: nn.Module, dropout: float, pre_norm: bool,
                 scale: float = 1.0) -> None:
        super().__init__()
        self.sublayer, self.norm, self.pre_norm, self.scale = sublayer, norm, pre_norm, scale
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if self.pre_norm:
            return x + self.step(self.sublayer(self.norm(x), *args, **kwargs))
        return self.norm(x + self.step(self.sublayer(x, *args, **kwargs)))

    def step(self, out: torch.Tensor) -> torch.Tensor:
        """The sub-layer's output as it is added to the residual stream: dropped out (§5.4), scaled."""
        out = self.dropout(out)
        return out if self.scale == 1.0 else out * self.scale

    def extra_repr(self) -> str:
        return "" if self.scale == 1.0 else f"scale={self.scale:g}"


class EncoderLayer(nn.Module):
    """Self-attention then FFN, each in a residual connection (§3.1)."""

    def __init__(self, self_attn: Residual, ffn: Residual) -> None:
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None, positional: Positional) -> torch.Tensor:
        x = self.self_attn(x, key_padding_mask=pad, positional=positional)
        return self.ffn(x)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, FFN (§3.1, §3.2.3)."""

    def __init__(self, self_attn: Residual, cross_attn: Residual, ffn: Residual) -> None:
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_pad: torch.Tensor | None,
                positional: Positional, cache: dict | None, offset: int, beams: int = 1,
                self_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (M·beams, T, D), memory (M, S, D): ``beams`` consecutive rows of x share a memory row.
        ``self_mask`` (B, 1, T, T) True where a query may not see a key besides causality (packed rows)."""
        x = self.self_attn(x, key_padding_mask=self_mask, cache=None if cache is None else cache.setdefault("self", {}),
                           positional=positional, offset=offset)
        x = self.cross_attn(x, memory, key_padding_mask=memory_pad,
                            cache=None if cache is None else cache.setdefault("cross", {}), beams=beams)
        return self.ffn(x)


@dataclass
class DecoderCache:
    """Incremental-decoding state: per-layer self-attention K/V (grows each step) and the
    cross-attention K/V of the encoder output (computed once)."""

    layers: list[dict] = field(default_factory=list)
    offset: int = 0  # number of target positions already decoded
    pointer: torch.Tensor | None = None  # (B,) each row's pointer count so far (model.decoder.pointer)

    def reorder(self, index: torch.Tensor, *, sources: torch.Tensor | None = None) -> None:
        """Keep/reorder batch rows (beam search: surviving hypotheses, finished sentences dropped).

        Self-attention K/V follow ``index``. Cross-attention K/V are computed from the encoder output,
        one row per memory row, and follow ``sources`` (the memory rows kept) when given, else stay as
        they are: beams of a sentence share its row (``decode(..., beams=k)``: each memory row serves
        k consecutive target rows).
        """
        if self.pointer is not None:
            self.pointer = self.pointer.index_select(0, index)
        move = None  # the self-attention buffers' plan, made once and shared by the layers (kv_cache.py)
        for layer in self.layers:
            for role, part in layer.items():
                rows = sources if role.startswith("cross") else index  # "cross", "cross_2": the memory's rows
                if rows is not None:
                    for name, t in part.items():
                        if isinstance(t, KVBuffer):
                            move = t.reorder(rows, move) or move
                        else:
                            part[name] = t.index_select(0, rows)


class Embedding(nn.Module):
    """Token embedding times √d_model (§3.4), plus positions, then dropout (§5.4). ``token_dropout``: word
    dropout in training, each token's whole embedding zeroed with that probability (not in the paper).
    ``chars``: a character-aware input (``model.char_input``, ``char_input.py``) joined to the scaled token
    embeddings, before word dropout and positions; none by default. ``norm``: a norm on the sum, before the
    dropout (``model.embedding_norm``: BERT's LayerNorm on the embeddings, Devlin et al. 2019); none by default."""

    def __init__(self, tokens: nn.Embedding, positional: Positional, dropout: float, scale: bool,
                 token_dropout: float = 0.0, chars: nn.Module | None = None, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.tokens, self.positional = tokens, positional
        self.scale = math.sqrt(tokens.embedding_dim) if scale else 1.0
        self.dropout = Dropout(dropout)
        self.token_dropout = Dropout(token_dropout)
        self.chars = chars  # a submodule only when there is one: other models' state dicts are unchanged
        self.norm = norm  # likewise

    def forward(self, ids: torch.Tensor, offset: int = 0, extra: torch.Tensor | None = None,
                positional: Positional | None = None) -> torch.Tensor:
        """(B, T, D); ``extra`` (B, T, D) is added before the dropout (a decoder pointer's input);
        ``positional``: the scheme's view for this batch in place of its own (``Positional.shifted``)."""
        vectors = self.tokens(ids) * self.scale
        if self.chars is not None:
            vectors = self.chars(ids, vectors)
        if self.training and self.token_dropout.p > 0.0:
            # one draw per token, broadcast over its vector: the whole embedding kept (scaled) or zeroed
            vectors = vectors * self.token_dropout(vectors.new_ones(*ids.shape, 1))
        x = (self.positional if positional is None else positional)(vectors, offset)
        x = x if extra is None else x + extra
        return self.dropout(x if self.norm is None else self.norm(x))


def _ctranslate2_names() -> Names:
    """CTranslate2's variables (``ctranslate2.specs.transformer_spec``, named as it saves them: ``layer_0`` is
    ``layer[0]``): each sub-layer owns its norm; self-attention has one fused Q|K|V projection,
    cross-attention Q and a fused K|V of the memory; SwiGLU's V is the FFN's ``linear_0_noact``."""
    names: Names = {"encoder/embeddings_0/weight": ("src_embed.tokens.weight",),
                    "decoder/embeddings/weight": ("tgt_embed.tokens.weight",),
                    "decoder/projection/weight": ("output.weight",)}  # tied or not, written as is
    norm = ("gamma", "beta")  # a LayerNormSpec's
    for stack in ("encoder", "decoder"):
        ct2, ours = f"{stack}/layer_{LAYER}", f"{stack}.{LAYER}"
        att = f"{ours}.self_attn.sublayer"
        names |= params(f"{ct2}/self_attention/layer_norm", f"{ours}.self_attn.norm", sep="/", names=norm)
        names |= params(f"{ct2}/self_attention/linear_0", f"{att}.w_q", f"{att}.w_k", f"{att}.w_v", sep="/")
        names |= params(f"{ct2}/self_attention/linear_1", f"{att}.w_o", sep="/")
        if stack == "decoder":
            att = f"{ours}.cross_attn.sublayer"
            names |= params(f"{ct2}/attention/layer_norm", f"{ours}.cross_attn.norm", sep="/", names=norm)
            names |= params(f"{ct2}/attention/linear_0", f"{att}.w_q", sep="/")
            names |= params(f"{ct2}/attention/linear_1", f"{att}.w_k", f"{att}.w_v", sep="/")
            names |= params(f"{ct2}/attention/linear_2", f"{att}.w_o", sep="/")
        names |= params(f"{ct2}/ffn/layer_norm", f"{ours}.ffn.norm", sep="/", names=norm)
        for theirs, mine in (("linear_0", "w1"), ("linear_0_noact", "v"), ("linear_1", "w2")):
            names |= params(f"{ct2}/ffn/{theirs}", f"{ours}.ffn.sublayer.{mine}", sep="/")
        names |= params(f"{stack}/layer_norm", f"{stack}_norm", sep="/", names=norm)
    return names


ENCODER_DECODER = WeightTree(
    stacks=(Stack("encoder", layers="encoder", embedding="src_embed", norm="encoder_norm"),
            Stack("decoder", layers="decoder", embedding="tgt_embed", norm="decoder_norm")),
    output="output",
    vocab_rows=frozenset({"src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight", "output.bias"}),
    exports={"ctranslate2": _ctranslate2_names()},  # Hugging Face's: each family's map (engine/hf)
)


def encode_source(src: torch.Tensor, embed: Embedding, layers: nn.ModuleList, norm: nn.Module | None,
                  pad: torch.Tensor | None = None, segments: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder stack (§3.1) over src (B, S) ids -> final states (B, S, D) and the padding mask (B, S),
    True at padding; shared by the encoder-decoder and the encoder-only graph. ``pad`` (B, S): the batch's
    padding, from its rows' lengths (None: no padding; an id never tells it). With ``segments`` (B, S) the
    rows are packed (``packing.py``): the mask is (B, 1, S, S), each sequence seeing only itself."""
    positional = embed.positional
    if segments is not None:
        pad, positional = blocked(segments, segments), packed_positions(positional, segments)
    elif pad is None:
        pad = torch.zeros(src.shape, dtype=torch.bool, device=src.device)
    x = embed(src, positional=positional)
    for layer in layers:
        x = layer(x, pad, positional)
    if norm is not None:
        x = norm(x)
    return x, pad


def padding_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) True past each row's length (B,): right padding as the rows' lengths tell it."""
    return torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]


def packed_positions(positional: Positional, segments: torch.Tensor) -> Positional:
    """``positional`` for packed rows of ``segments``; a scheme that cannot be packed is a ValueError."""
    view = positional.packed(segment_positions(segments))
    if view is None:
        raise ValueError(f"positional scheme {type(positional).__name__} cannot read packed rows (train.packing)")
    return view


class EncoderDecoder(nn.Module):
    """The Transformer: ``encode`` the source once, ``decode`` target prefixes to logits."""

    WEIGHTS: ClassVar[WeightTree] = ENCODER_DECODER  # its parts and export names (components/weights.py)

    def __init__(self, *, src_embed: Embedding, tgt_embed: Embedding, encoder: list[EncoderLayer],
                 decoder: list[DecoderLayer], encoder_norm: nn.Module | None, decoder_norm: nn.Module | None,
                 output: nn.Linear, special: Specials, pointer: Pointer | None = None) -> None:
        super().__init__()
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder = nn.ModuleList(encoder), nn.ModuleList(decoder)
        self.encoder_norm, self.decoder_norm = encoder_norm, decoder_norm
        self.output = output  # pre-softmax linear transformation (§3.4), possibly tied
        self.special = special  # the vocabulary's special ids: where the search starts and stops
        self.pointer = pointer  # model.decoder.pointer (components/pointer.py), not in the paper

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None
               ) -> tuple[torch.Tensor | PointedMemory, torch.Tensor]:
        """src (B, S) ids and their padding ``pad`` (B, S), True at padding (None: none) -> memory (B, S, D)
        and the padding mask. With a pointer the memory is a ``PointedMemory``: the (B, S, D) states and where
        each row's source units are."""
        x, pad = encode_source(src, self.src_embed, self.encoder, self.encoder_norm, pad)
        return (x, pad) if self.pointer is None else (PointedMemory(x, self.pointer.units(src, pad)), pad)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor | PointedMemory, memory_pad: torch.Tensor | None,
               cache: DecoderCache | None = None, *, beams: int = 1) -> torch.Tensor:
        """tgt (B, T) ids (shifted right) -> logits (B, T, V). With a cache, tgt holds only the new
        positions; earlier ones come from the cache, which is updated. memory (M, S, D) has
        B = M·beams rows: memory row i serves the ``beams`` tgt rows i·beams .. (i+1)·beams - 1
        (any other row count is a ValueError)."""
        offset = cache.offset if cache is not None else 0
        if cache is not None and not cache.layers:
            cache.layers = [{} for _ in self.decoder]
        x = self.tgt_embed(tgt, offset, self._pointed(tgt, memory, cache, beams))
        if isinstance(memory, PointedMemory):
            memory = memory.states
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, memory_pad, self.tgt_embed.positional,
                      None if cache is None else cache.layers[i], offset, beams)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if cache is not None:
            cache.offset += tgt.size(1)
        return self.output(x)

    def _pointed(self, tgt: torch.Tensor, memory: torch.Tensor | PointedMemory, cache: DecoderCache | None,
                 beams: int) -> torch.Tensor | None:
        """The pointer's input at each new position (None without a pointer); the cache's counts move on."""
        if self.pointer is None:
            return None
        if not isinstance(memory, PointedMemory):
            raise TypeError("a model with a pointer decodes from the PointedMemory its encode returns")
        p = self.pointer.counts(tgt, None if cache is None else cache.pointer)
        if cache is not None:
            cache.pointer = p[:, -1]
        return self.pointer(memory, p, beams)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor | None = None,
                src_segments: torch.Tensor | None = None, tgt_segments: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for src (B, S) with its padding ``src_pad`` (B, S) and shifted-right
        tgt (B, T) (right-padded: the causal mask keeps real positions from its padding); with segment ids
        (B, S) and (B, T), rows packed with several pairs each (``packing.py``; pair k of a row is segment k
        on both sides)."""
        if src_segments is None or tgt_segments is None:
            memory, pad = self.encode(src, src_pad)
            return self.decode(tgt, memory, pad)
        if self.pointer is not None:
            raise ValueError("a model with a pointer (model.decoder.pointer) cannot train on packed rows")
        memory, _ = encode_source(src, self.src_embed, self.encoder, self.encoder_norm, segments=src_segments)
        positional = packed_positions(self.tgt_embed.positional, tgt_segments)
        x = self.tgt_embed(tgt, positional=positional)
        cross, own = blocked(tgt_segments, src_segments), blocked(tgt_segments, tgt_segments)
        for layer in self.decoder:
            x = layer(x, memory, cross, positional, None, 0, self_mask=own)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self.output(x)
