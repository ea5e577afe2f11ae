"""The sub-layer order of a layer (``order`` of a stack or a layer group): its blocks as a sequence of
``a`` (self-attention), ``c`` (cross-attention, to the encoder's output) and ``f`` (feed-forward), as
x-transformers' layer strings, or one of the named shapes below. Torch-free: the schema validates the
field here, the resolved view turns it into a ``Layout``, the builder makes one residual block per letter.

The paper's layer (§3.1) is ``af`` (encoder) and ``acf`` (decoder); that is ``standard``, the default.
"""

from __future__ import annotations

from dataclasses import dataclass

LETTERS = {"a": "self-attention", "c": "cross-attention", "f": "feed-forward"}
# a block's module name: the first of each letter keeps the paper's layer names (self_attn, cross_attn,
# ffn), so a standard layer's parameters are named as they always were; later ones are ffn_2, ffn_3, …
BASE_NAMES = {"a": "self_attn", "c": "cross_attn", "f": "ffn"}


@dataclass(frozen=True)
class Preset:
    """A named order: its blocks in a stack without cross-attention and in a decoder that attends to an
    encoder, and how its blocks combine."""

    name: str
    plain: str  # an encoder's, or a decoder-only model's, layer
    attending: str  # a decoder layer of an encoder-decoder
    summary: str
    parallel: bool = False  # every block reads the same normed input; their outputs are added together
    ffn_scale: float = 1.0  # each feed-forward block's output is multiplied by this before the residual add


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("standard", "af", "acf", "the paper's layer (§3.1): self-attention, (cross-attention,) feed-forward, "
           "each in a residual connection"),
    # Macaron-Net (Lu et al. 2019, "Understanding and Improving Transformer From a Multi-Particle Dynamic
    # System Point of View", §4) and Conformer (Gulati et al. 2020, §2.3, Eq. 1): the FFN split into two
    # half-steps around the attention, x + ½·FFN(x) before and after; in the decoder the second one comes
    # after the cross-attention. Here the ½ scales each FFN's (dropped-out) output inside its residual
    # connection: x + ½·Dropout(FFN(Norm(x))) pre-norm, Norm(x + ½·Dropout(FFN(x))) post-norm.
    Preset("macaron", "faf", "facf", "Macaron-Net / Conformer: a half-step feed-forward (output × 0.5) before "
           "and after the attention", ffn_scale=0.5),
    # Press et al. 2020 ("Improving Transformer Models by Reordering their Sublayers"): the sandwich
    # s^k (sf)^(n-k) f^k puts attention first and feed-forward last; this preset is n = 2, k = 1 in one
    # layer (two of each block); write the letters out for other n, k (e.g. aaafafafafff: n = 6, k = 2).
    Preset("sandwich", "aaff", "aacff", "Press et al. 2020 sandwich (n=2, k=1): two self-attentions (then the "
           "cross-attention), then two feed-forwards; other shapes as letters, e.g. aaafafafafff"),
    # GPT-J (Wang & Komatsuzaki 2021) and PaLM (Chowdhery et al. 2022, §2 "Parallel Layers"):
    # y = x + Attention(Norm(x)) + MLP(Norm(x)), one norm; pre-norm only.
    Preset("parallel", "af", "acf", "GPT-J / PaLM: attention and feed-forward (and cross-attention) read the "
           "same normed input, x + attn(norm(x)) + ffn(norm(x)); pre-norm only", parallel=True),
)}


@dataclass(frozen=True)
class Layout:
    """A resolved order: the blocks of one layer, in order, and how they combine."""

    blocks: str  # letters, e.g. "faf"
    name: str | None = None  # the preset it comes from (None: letters given explicitly)
    parallel: bool = False
    ffn_scale: float = 1.0

    @property
    def standard(self) -> bool:
        """Whether this is the paper's layer (the model built as before the field existed)."""
        return self.blocks in ("af", "acf") and not self.parallel and self.ffn_scale == 1.0

    def names(self) -> list[tuple[str, str]]:
        """(letter, module name) of each block in order: ``faf`` -> ffn, self_attn, ffn_2."""
        seen: dict[str, int] = {}
        out = []
        for letter in self.blocks:
            seen[letter] = seen.get(letter, 0) + 1
            out.append((letter, BASE_NAMES[letter] + (f"_{seen[letter]}" if seen[letter] > 1 else "")))
        return out

    def describe(self) -> str:
        """``faf (macaron)``; ``aaf``."""
        return self.blocks + (f" ({self.name})" if self.name not in (None, "standard") else "")


def check_order(text: str) -> str:
    """The field's own check: a preset name or letters a/c/f (ValueError, one line, otherwise)."""
    if text in PRESETS:
        return text
    bad = sorted({ch for ch in text if ch not in LETTERS})
    if not text or bad:
        what = f"unknown letter{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))} in " if bad else "empty "
        raise ValueError(f"{what}order {text!r}: give a preset ({', '.join(PRESETS)}) or letters a "
                         "(self-attention), c (cross-attention), f (feed-forward), e.g. aaf")
    return text


def layout(order: str | None, attends: bool) -> Layout:
    """The layout of ``order`` (None: standard) in a stack whose layers attend to an encoder or not."""
    preset = PRESETS.get(order or "standard")
    if preset is None:
        return Layout(order)  # type: ignore[arg-type]
    return Layout(preset.attending if attends else preset.plain, preset.name, preset.parallel, preset.ffn_scale)


def order_problem(order: str | None, attends: bool, pre_norm: bool, stack: str, kind: str) -> str | None:
    """Why ``order`` cannot be a layer of ``stack`` (None: it can), one line."""
    if order is None:
        return None
    blocks, article = layout(order, attends).blocks, "an" if kind[0] in "aeiou" else "a"
    if "c" in blocks and not attends:
        return (f"order {order!r} has cross-attention (c), which only an encoder_decoder model's decoder has (it "
                f"attends to the encoder): the {stack} of {article} {kind} model takes a and f only")
    if attends and "c" not in blocks:
        return (f"order {order!r} has no cross-attention (c): the decoder layers of {article} {kind} model attend "
                "to the encoder, e.g. acf")
    if "a" not in blocks:
        return f"order {order!r} has no self-attention: a layer needs at least one a"
    if PRESETS.get(order, PRESETS["standard"]).parallel and not pre_norm:
        return ("order 'parallel' adds attention and feed-forward of one normed input, x + attn(norm(x)) + "
                "ffn(norm(x)): it needs model.norm_placement: pre")
    return None
