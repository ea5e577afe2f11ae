"""The spec's ``model`` section: the architecture (§3). Component sections (attention, positional, ffn, norm, pointer,
head, char_input) are discriminated unions on ``kind`` over the components' registries, resolved when a spec is
validated, so a block registered later (a plugin) is valid at once.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from tbuild.components import ATTENTION, CHAR_INPUT, FFN, HEAD, NORM, POINTER, POSITIONAL
from tbuild.components.spec_base import ComponentSpec, StrictModel
from tbuild.components.specs.attention import MultiHeadSpec
from tbuild.components.specs.feedforward import ReLUFFNSpec
from tbuild.components.specs.graph import GRAPHS, Graph, with_article
from tbuild.components.specs.head import NO_HEAD, HeadBase
from tbuild.components.specs.norm import LayerNormSpec
from tbuild.components.specs.order import PRESETS, check_order, order_problem
from tbuild.components.specs.positional import SinusoidalSpec

from .base import FieldError, SpecPath

AttentionSpec = ATTENTION.field(ComponentSpec)
PositionalSpec = POSITIONAL.field(ComponentSpec)
FFNSpec = FFN.field(ComponentSpec)
NormSpec = NORM.field(ComponentSpec)
PointerSpec = POINTER.field(ComponentSpec)
HeadSpec = HEAD.field(HeadBase)
CharInputSpec = CHAR_INPUT.field(ComponentSpec)
GraphKind = Literal[tuple(GRAPHS)]  # type: ignore[valid-type]  # the declared model kinds (components/specs/graph.py)


class DropoutSpec(StrictModel):
    """Dropout rates (§5.4). The paper uses P_drop on residuals and embedding sums only."""

    residual: float = Field(0.1, ge=0, lt=1, description="On each sub-layer output before the residual add (§5.4).")
    embedding: float = Field(0.1, ge=0, lt=1, description="On the sums of embeddings and positional encodings (§5.4).")
    attention: float = Field(0.0, ge=0, lt=1, description="On attention weights (not in the paper).")
    activation: float = Field(0.0, ge=0, lt=1, description="On the FFN's inner activation (not in the paper).")
    token: float = Field(0.0, ge=0, lt=1, description="Word dropout (not in the paper): each input token's whole "
                         "embedding zeroed with this probability, the rest scaled by 1/(1-p), before positions are "
                         "added; the model must then read the token from its context (Gal & Ghahramani 2016 §4.2).")


ORDER_HELP = ("The blocks of each layer, in order: a preset (" + ", ".join(PRESETS) + "; default standard, the "
              "paper's af / acf) or letters a (self-attention), c (cross-attention: decoder of encoder_decoder "
              "only), f (feed-forward), e.g. aaf (docs/graphs.md).")


class LayerGroupSpec(StrictModel):
    """A run of identical layers inside a stack, optionally overriding the stack's blocks."""

    repeat: int = Field(1, ge=1, description="How many layers this group has.")
    attention: AttentionSpec | None = Field(None, description="Self-attention for these layers.")
    ffn: FFNSpec | None = Field(None, description="Feed-forward block for these layers.")
    norm: NormSpec | None = Field(None, description="Norm for these layers.")
    order: str | None = Field(None, description=ORDER_HELP + " Default: the stack's order.")

    @field_validator("order")
    @classmethod
    def _order_letters(cls, v: str | None) -> str | None:
        return v if v is None else check_order(v)


class StackSpec(StrictModel):
    """An encoder or decoder stack (§3.1): N layers of h heads with d_k, d_v, d_ff."""

    layers: int | None = Field(None, ge=1, description="N, the number of layers (§3.1: 6). Derived from groups.")
    groups: list[LayerGroupSpec] | None = Field(
        None, min_length=1, description="Heterogeneous stack: layer groups in order, each with `repeat`."
    )
    heads: int = Field(8, ge=1, description="h, parallel attention heads (§3.2.2: 8).")
    d_k: int | None = Field(None, ge=1, description="Query/key size per head (§3.2.2). Default d_model/h.")
    d_v: int | None = Field(None, ge=1, description="Value size per head (§3.2.2). Default d_model/h.")
    d_ff: int = Field(2048, ge=1, description="Inner size of the position-wise FFN (§3.3: 2048).")
    attention: AttentionSpec | None = Field(None, description="Self-attention block. Default: model.attention.")
    ffn: FFNSpec | None = Field(None, description="Feed-forward block. Default: model.ffn.")
    norm: NormSpec | None = Field(None, description="Norm. Default: model.norm.")
    order: str | None = Field(None, description=ORDER_HELP)

    @field_validator("order")
    @classmethod
    def _order_letters(cls, v: str | None) -> str | None:
        return v if v is None else check_order(v)

    @model_validator(mode="after")
    def _layers_from_groups(self) -> StackSpec:
        if self.groups is None:
            self.layers = 6 if self.layers is None else self.layers  # N = 6 (§3.1)
            return self
        total = sum(g.repeat for g in self.groups)
        if self.layers is not None and self.layers != total:
            raise FieldError(("layers",), f"layers ({self.layers}) differs from the groups' repeats ({total})")
        self.layers = total
        return self

    def layer_groups(self) -> list[LayerGroupSpec]:
        """The stack as groups (a plain stack is one group of `layers` repeats)."""
        return self.groups if self.groups is not None else [LayerGroupSpec(repeat=self.layers or 0)]


class DecoderStackSpec(StackSpec):
    cross_attention: AttentionSpec | None = Field(
        None, description="Encoder-decoder attention (§3.2.3). Default: model.cross_attention."
    )
    pointer: PointerSpec | None = Field(
        None, description="A pointer into the source for an output that walks over its input (e.g. "
        "{kind: next_word}: the encoder output at the next word added to the decoder's input); none by default "
        "(not in the paper; docs/parsing.md)."
    )


class PrefixLMSpec(StrictModel):
    """A decoder-only translator (a prefix LM, Raffel et al. 2020 §3.2.1): each pair is one sequence
    BOS, source pieces, EOS (the separator), target pieces, EOS (docs/graphs.md)."""

    attention: Literal["causal", "prefix"] = Field(
        "prefix", description="prefix: the source and its separator attend to each other both ways, the target "
        "causally; causal: every position causally (a plain language model over the joined sequence).")
    loss: Literal["target", "both"] = Field(
        "target", description="target: loss on the target pieces and their EOS only; both: on the source pieces "
        "and the separator too (validation perplexity then counts them).")


class ModelSpec(StrictModel):
    """The architecture. Defaults are the paper's base model (Table 3, §3)."""

    kind: GraphKind = Field(  # type: ignore[valid-type]
        "encoder_decoder", description="The graph: encoder_decoder (§3.1, Figure 1: an encoder over the source, "
        "a decoder attending to it), decoder_only (a causal language model: the decoder stack alone, no encoder "
        "and no cross-attention) or encoder_only (the encoder stack and an output head, model.head: a tagger or a "
        "sequence classifier; docs/graphs.md).")
    vocab_size: int | Literal["from_tokenizer"] = Field(
        "from_tokenizer", description="Target (or shared) vocabulary size; from_tokenizer: data.tokenizer.vocab_size."
    )
    src_vocab_size: int | None = Field(
        None, ge=1, description="Source vocabulary size when it is not shared with the target (None: shared)."
    )
    d_model: int = Field(512, ge=1, description="Model width (§3.1: 512).")
    encoder: StackSpec | None = Field(
        default_factory=StackSpec, description="Encoder stack (encoder_decoder; absent or null for decoder_only).")
    decoder: DecoderStackSpec | None = Field(
        default_factory=DecoderStackSpec, description="Decoder stack (absent or null for encoder_only).")
    head: HeadSpec | None = Field(
        None, description="encoder_only: the output head over the final encoder states, e.g. {kind: "
        "token_classification} (a tagger) or {kind: sequence_classification} (a classifier; its labels from "
        "the data); other kinds have none.")
    prefix_lm: PrefixLMSpec | None = Field(
        None, description="decoder_only: translate pairs as one sequence (source, separator, target), e.g. "
        "{attention: prefix, loss: target}; none: a language model over one side of text.")
    attention: AttentionSpec = Field(default_factory=MultiHeadSpec, description="Default self-attention block.")
    cross_attention: AttentionSpec = Field(
        default_factory=MultiHeadSpec, description="Default cross-attention (encoder_decoder only).")
    positional: PositionalSpec = Field(default_factory=SinusoidalSpec, description="Positional scheme (§3.5).")
    ffn: FFNSpec = Field(default_factory=ReLUFFNSpec, description="Default feed-forward block (§3.3).")
    norm: NormSpec = Field(default_factory=LayerNormSpec, description="Default norm (§3.1).")
    norm_placement: Literal["post", "pre"] = Field(
        "post", description="post: LayerNorm(x + Sublayer(x)) as §3.1; pre: x + Sublayer(Norm(x))."
    )
    final_norm: bool | None = Field(None, description="A norm after each stack. Default: only with pre-norm.")
    dropout: DropoutSpec = Field(default_factory=DropoutSpec, description="Dropout rates (§5.4).")
    tie_embeddings: Literal["none", "decoder", "three_way"] = Field(
        "three_way",
        description="Weight sharing (§3.4): none; decoder (target embedding = output projection); "
        "three_way (source and target embeddings and output projection, needs a shared vocabulary). "
        "decoder_only has one embedding: decoder and three_way both tie it to the output projection.",
    )
    scale_embeddings: bool = Field(True, description="Multiply embeddings by √d_model (§3.4).")
    embedding_norm: bool = Field(
        False, description="A norm (model.norm's kind and eps) on the sum of token and position embeddings, before "
        "the dropout: BERT's LayerNorm on the embeddings (Devlin et al. 2019); not in the paper.")
    max_positions: int | None = Field(None, ge=1, description="Longest sequence (required by learned positions).")
    char_input: CharInputSpec | None = Field(
        None, description="Character-aware input to the encoder: each input piece's characters pooled into one "
        "vector joined to its embedding, e.g. {kind: char_cnn} (Ma & Hovy 2016); none by default.")
    silent_ids: list[int] = Field(
        default_factory=list, description="Retired: rows an import renumbered its vocabulary with, which imports no "
        "longer do (they keep the folder's ids). Every spec.yaml holds it empty; a non-empty one is refused.")

    @model_validator(mode="before")
    @classmethod
    def _no_encoder_by_default(cls, data: object) -> object:
        """A kind without an encoder gets none unless the spec names one (then refused, naming it)."""
        graph = GRAPHS.get(data.get("kind")) if isinstance(data, dict) else None  # type: ignore[arg-type]
        if graph is None:
            return data
        for name in ("encoder", "decoder"):  # a kind without the stack gets none unless the spec names one
            if name not in graph.stacks and name not in data:  # type: ignore[operator]
                data = {**data, name: None}  # type: ignore[dict-item]
        return data

    @field_validator("vocab_size")
    @classmethod
    def _positive_vocab(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 2:
            raise ValueError("vocab_size must be at least 2")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> ModelSpec:
        self._graph_checks()
        self._order_checks()
        for name, stack in self.stacks().items():
            for dim in ("d_k", "d_v"):
                if getattr(stack, dim) is None:
                    if self.d_model % stack.heads:
                        raise FieldError(
                            (name, "heads"),
                            f"d_model ({self.d_model}) is not divisible by heads ({stack.heads}): "
                            f"set {name}.d_k/d_v explicitly or change heads",
                        )
                    setattr(stack, dim, self.d_model // stack.heads)  # d_k = d_v = d_model/h (§3.2.2)
        self._silent_checks()
        if self.tie_embeddings == "three_way" and self.src_vocab_size is not None:
            raise FieldError(
                ("tie_embeddings",),
                "three_way tying needs a shared vocabulary: remove src_vocab_size or use tie_embeddings: decoder",
            )
        return self  # each block's check where it is used: Spec._blocks_fit_where_used (builder/resolved.py)

    def _graph_checks(self) -> None:
        """What the kind's graph has: its stacks and nothing else, cross-attention only with an encoder."""
        graph, a_kind = self.graph, with_article(self.kind)
        for name in ("encoder", "decoder"):
            if name not in graph.stacks and getattr(self, name) is not None:
                raise FieldError((name,), f"{a_kind} model has no {name}: remove model.{name} (or set it "
                                 "to null)")
            if name in graph.stacks and getattr(self, name) is None:
                raise FieldError((name,), f"{a_kind} model needs its {name} stack: model.{name} cannot be null")
        self._head_checks()
        if self.prefix is not None and graph.stacks != ("decoder",):  # a decoder alone: decoder_only
            raise FieldError(("prefix_lm",), f"prefix_lm makes a decoder_only model translate; {a_kind} model "
                             "has no prefix LM: remove model.prefix_lm")
        if not graph.cross_attention:
            why = f"{a_kind} model has no cross-attention (no encoder to attend to)"
            if self.decoder is not None and self.decoder.cross_attention is not None:
                raise FieldError(("decoder", "cross_attention"), f"{why}: remove decoder.cross_attention")
            # a resolved spec (a run's spec.yaml) writes the default out: only another value is refused
            if "cross_attention" in self.model_fields_set and self.cross_attention != MultiHeadSpec():
                raise FieldError(("cross_attention",), f"{why}: remove model.cross_attention")
        if not graph.cross_attention and self.pointer() is not None:
            raise FieldError(("decoder", "pointer"), f"{a_kind} model has no source to point into: remove "
                             "decoder.pointer")
        if "encoder" not in graph.stacks and self.src_vocab_size is not None:
            raise FieldError(("src_vocab_size",), f"{a_kind} model has one vocabulary (no source side): "
                             "remove src_vocab_size")

    def _silent_checks(self) -> None:
        """silent_ids: empty, as every run since imports keep a folder's ids writes it (an older import's rows
        are not the folder's: it is imported again)."""
        if self.silent_ids:
            raise FieldError(("silent_ids",), f"{self.silent_ids}: a run imported before imports kept the folder's "
                             "ids (its rows renumbered); import the model again: tbuild import hf SOURCE OUT")

    def _order_checks(self) -> None:
        """Each stack's and group's ``order`` fits its stack: c only where it attends to an encoder, an a,
        parallel only with pre-norm (components/specs/order.py)."""
        for name, stack in self.stacks().items():
            attends = self.graph.cross_attention and name == "decoder"
            places: list[tuple[SpecPath, str | None]] = [((name, "order"), stack.order)]
            places += [((name, "groups", i, "order"), g.order) for i, g in enumerate(stack.groups or [])]
            for path, order in places:
                why = order_problem(order, attends, self.norm_placement == "pre", name, self.kind)
                if why is not None:
                    raise FieldError(path, why)

    def _head_checks(self) -> None:
        """An output head where the encoder is the last stack (encoder_only), none anywhere else."""
        needs = self.graph.stacks[-1] == "encoder"
        if needs and self.head is None:
            raise FieldError(("kind",), f"{with_article(self.kind)} model needs an output head: set model.head, e.g. "
                             "{kind: token_classification} (a tagger) or {kind: sequence_classification} (a "
                             "classifier)")
        if not needs and self.head is not None:
            raise FieldError(("head",), f"{with_article(self.kind)} model has no head (its decoder's output projection "
                             "predicts tokens): remove model.head, or set model.kind: encoder_only")

    @property
    def called(self) -> str:
        """How messages name this model: "an encoder_only model"."""
        return f"{with_article(self.kind)} model"

    @property
    def graph(self) -> Graph:
        """The graph ``kind`` names (``components/specs/graph.py``): its stacks, cross-attention and data."""
        return GRAPHS[self.kind]

    @property
    def output_head(self) -> HeadBase:
        """The head to ask what it does (its labels, the pieces it reserves...): ``head``, or for a model without
        one (an output projection) the head that does none of it."""
        return self.head if self.head is not None else NO_HEAD

    @property
    def reads(self) -> str:
        """What the model trains on: its graph's data (pairs, text or labels), except source-target pairs for
        a prefix LM and plain text for a head that reads text (a masked LM)."""
        return self.graph.reads(self.output_head.reads_text, self.prefix is not None)

    @property
    def prefix(self) -> tuple[str, str] | None:
        """A prefix LM's attention and loss (``model.prefix_lm``), None for any other model."""
        return None if self.prefix_lm is None else (self.prefix_lm.attention, self.prefix_lm.loss)

    @property
    def scores_source(self) -> bool:
        """Whether the loss covers each pair's source too (a prefix LM with ``loss: both``)."""
        return self.prefix is not None and self.prefix[1] == "both"

    def source_positions(self, default: int) -> int:
        """Source tokens a model reads (EOS included): ``max_positions`` (``default`` without one), less the
        BOS and the one output token a prefix LM's source shares its positions with."""
        if self.max_positions is None:
            return default
        return max(1, self.max_positions - 2) if self.prefix is not None else self.max_positions

    def pointer(self) -> ComponentSpec | None:
        """model.decoder.pointer (None without a decoder or a pointer)."""
        return self.decoder.pointer if self.decoder is not None else None

    def stacks(self) -> dict[str, StackSpec]:
        """The stacks this kind of model has, by name, input side first (encoder_decoder: encoder, decoder)."""
        return {name: getattr(self, name) for name in self.graph.stacks}
