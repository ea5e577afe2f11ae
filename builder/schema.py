"""The spec: one validated, typed description of a model, its data, training and decoding.

Component sections (attention, positional, ffn, norm), schedules and data sets are discriminated
unions on ``kind`` over registries, resolved when a spec is validated, so a newly registered block
(built-in or plugin, even one registered after this import) is a valid spec at once. Torch-free:
importing this module neither imports torch nor loads plugins.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tbuild.components import ATTENTION, CHAR_INPUT, FFN, HEAD, NORM, POINTER, POSITIONAL
from tbuild.components.registry import Registry
from tbuild.components.spec_base import ComponentSpec, StrictModel
from tbuild.components.specs.attention import MultiHeadSpec
from tbuild.components.specs.feedforward import ReLUFFNSpec
from tbuild.components.specs.graph import GRAPHS, with_article
from tbuild.components.specs.norm import LayerNormSpec
from tbuild.components.specs.order import PRESETS, check_order, order_problem
from tbuild.components.specs.positional import SinusoidalSpec

from .resolved import SpecPath, resolve

AttentionSpec = ATTENTION.field(ComponentSpec)
PositionalSpec = POSITIONAL.field(ComponentSpec)
FFNSpec = FFN.field(ComponentSpec)
NormSpec = NORM.field(ComponentSpec)
PointerSpec = POINTER.field(ComponentSpec)
HeadSpec = HEAD.field(ComponentSpec)
CharInputSpec = CHAR_INPUT.field(ComponentSpec)
GraphKind = Literal[tuple(GRAPHS)]  # type: ignore[valid-type]  # the declared model kinds (components/specs/graph.py)


class FieldError(ValueError):
    """A cross-field error that knows which field (path below the validated model) is at fault."""

    def __init__(self, path: SpecPath, message: str) -> None:
        super().__init__(message)
        self.path = path


# ----------------------------------------------------------------------------- model


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
        if self.tie_embeddings == "three_way" and self.src_vocab_size is not None:
            raise FieldError(
                ("tie_embeddings",),
                "three_way tying needs a shared vocabulary: remove src_vocab_size or use tie_embeddings: decoder",
            )
        for component in resolve(self).components:
            try:
                component.spec.check(component.uses)
            except ValueError as e:
                raise FieldError(component.path, str(e)) from None
        return self

    def _graph_checks(self) -> None:
        """What the kind's graph has: its stacks and nothing else, cross-attention only with an encoder."""
        graph, a_kind = GRAPHS[self.kind], with_article(self.kind)
        for name in ("encoder", "decoder"):
            if name not in graph.stacks and getattr(self, name) is not None:
                raise FieldError((name,), f"{a_kind} model has no {name}: remove model.{name} (or set it "
                                 "to null)")
            if name in graph.stacks and getattr(self, name) is None:
                raise FieldError((name,), f"{a_kind} model needs its {name} stack: model.{name} cannot be null")
        self._head_checks()
        if self.prefix_lm is not None and self.kind != "decoder_only":
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

    def _order_checks(self) -> None:
        """Each stack's and group's ``order`` fits its stack: c only where it attends to an encoder, an a,
        parallel only with pre-norm (components/specs/order.py)."""
        for name, stack in self.stacks().items():
            attends = GRAPHS[self.kind].cross_attention and name == "decoder"
            places: list[tuple[SpecPath, str | None]] = [((name, "order"), stack.order)]
            places += [((name, "groups", i, "order"), g.order) for i, g in enumerate(stack.groups or [])]
            for path, order in places:
                why = order_problem(order, attends, self.norm_placement == "pre", name, self.kind)
                if why is not None:
                    raise FieldError(path, why)

    def _head_checks(self) -> None:
        """An output head where the encoder is the last stack (encoder_only), none anywhere else."""
        needs = GRAPHS[self.kind].stacks[-1] == "encoder"
        if needs and self.head is None:
            raise FieldError(("kind",), f"{with_article(self.kind)} model needs an output head: set model.head, e.g. "
                             "{kind: token_classification} (a tagger) or {kind: sequence_classification} (a "
                             "classifier)")
        if not needs and self.head is not None:
            raise FieldError(("head",), f"{with_article(self.kind)} model has no head (its decoder's output projection "
                             "predicts tokens): remove model.head, or set model.kind: encoder_only")

    def pointer(self) -> ComponentSpec | None:
        """model.decoder.pointer (None without a decoder or a pointer)."""
        return self.decoder.pointer if self.decoder is not None else None

    def stacks(self) -> dict[str, StackSpec]:
        """The stacks this kind of model has, by name, input side first (encoder_decoder: encoder, decoder)."""
        return {name: getattr(self, name) for name in GRAPHS[self.kind].stacks}

    def components(self) -> list[tuple[SpecPath, ComponentSpec]]:
        """Every component spec in the model with its path (see ``tbuild.builder.resolved``)."""
        return [(c.path, c.spec) for c in resolve(self).components]


# ----------------------------------------------------------------------------- data


class ParallelFiles(StrictModel):
    """A parallel corpus: line i of source translates line i of target (plain text or .gz)."""

    source: str = Field(description="Source-language file (relative to the spec file).")
    target: str = Field(description="Target-language file (relative to the spec file).")


class TokenizerSpec(StrictModel):
    """Subword tokenizer: sentencepiece trained on the training data (§5.1), or an existing model."""

    model: str | None = Field(None, description="An existing sentencepiece .model file; None: train one.")
    kind: Literal["bpe", "unigram"] = Field("bpe", description="sentencepiece model type (§5.1: BPE).")
    vocab_size: int = Field(8000, ge=16, description="Vocabulary size to train (§5.1 used ~37000 shared).")
    character_coverage: float = Field(1.0, gt=0, le=1, description="sentencepiece character_coverage.")
    max_sentences: int | None = Field(
        None, ge=1, description="Train the tokenizer on a seeded random sample of this many pairs, drawn while "
        "the corpus streams by (None: all pairs)."
    )
    target_tokens: Literal["auto", "subwords", "whole"] = Field(
        "auto", description="whole: every whitespace-separated token of the training targets is one piece, "
        "never split (a linearized tree's brackets, §6.3); subwords: split as the source is; auto: whole for "
        "the treebank data set, else subwords."
    )


DATASETS = Registry("dataset", plugins=False)


class DatasetSpec(StrictModel):
    """Base of the built-in data sets; ``kind`` names one."""

    kind: str

    @property
    def text_only(self) -> bool:
        """Whether a split is one side of text (a language model's data) rather than parallel pairs."""
        return False

    def text_file(self, value: str) -> str:
        """For a text-only data set: the file a split's value names (a path, or PREFIX.<lang>)."""
        raise TypeError(f"data set {self.kind!r} holds pairs, not text")

    @property
    def suffixes(self) -> tuple[str, str] | None:
        """The suffixes of a split's two files at a prefix when the data set fixes them (a tagger's
        PREFIX.words, PREFIX.tags); None: data.source_lang and data.target_lang."""
        return None

    @property
    def tagged(self) -> bool:
        """Whether a split is words and their labels, one per word (a tagger's data)."""
        return False

    @property
    def labels_per(self) -> Literal["word", "line"] | None:
        """What one label of the data labels: a word (a tagger's data), a line (a classifier's), or None (the
        data holds no labels). An encoder-only model's head must label the same."""
        return None


@DATASETS.declare
class Multi30kDataset(DatasetSpec):
    """Multi30k (Elliott et al. 2016), fetched automatically when its files are missing."""

    kind: Literal["multi30k"] = "multi30k"
    side: Literal["en", "de", "fr"] | None = Field(
        None, description="Language-model text: only this language's side of each split (PREFIX.<side>.gz), "
        "for model.kind decoder_only; None: source-target pairs (data.source_lang, data.target_lang).")

    @property
    def text_only(self) -> bool:
        return self.side is not None

    def text_file(self, value: str) -> str:
        return f"{value}.{self.side}"


@DATASETS.declare
class Wmt14Dataset(DatasetSpec):
    """WMT 2014 as in §5.1, English-German or English-French (either direction): Europarl v7 + Common
    Crawl + News Commentary v9 (and for French the UN corpus and the 10^9 French-English corpus) for
    data.train, newstest2013 for data.valid, newstest2014 (full) for data.test; each split's files
    are fetched (and checked) when missing."""

    kind: Literal["wmt14"] = "wmt14"


@DATASETS.declare
class FilesDataset(DatasetSpec):
    """Your own parallel files (data.train/valid/test as given, plain or .gz): nothing is fetched;
    the two files of every configured split must exist."""

    kind: Literal["files"] = "files"


@DATASETS.declare
class TreebankDataset(DatasetSpec):
    """English constituency parsing (§6.3): Penn Treebank trees as pairs, the words of a sentence →
    its linearized tree; each split is written as PREFIX.<source_lang> (words), PREFIX.<target_lang>
    (linearized trees) and PREFIX.gold (the cleaned gold trees EVALB scores against). Sources: the
    NLTK sample (WSJ files 0001-0199, downloaded pinned and checked; split by file 0001-0159 train,
    0160-0179 valid, 0180-0199 test) or your LDC WSJ folder (sections 02-21 train, 22 valid, 23 test)."""

    kind: Literal["treebank"] = "treebank"
    source: Literal["nltk-sample", "wsj"] = Field(
        "nltk-sample", description="nltk-sample: NLTK's 199-file sample, fetched; wsj: your LDC copy (`wsj`).")
    wsj: str | None = Field(
        None, description="For source wsj: the folder holding the section folders 00-24 of .mrg files "
        "(e.g. treebank_3/parsed/mrg/wsj), relative to the spec file.")
    linearization: Literal["xx", "tags", "words"] = Field(
        "xx", description="xx: pre-terminals as XX, as Vinyals & Kaiser et al. (2014); tags: the "
        "part-of-speech tags kept (tensor2tensor); words: the sentence's words themselves (lexicalized), "
        "in the source's subword pieces.")
    order: Literal["top_down", "in_order"] = Field(
        "top_down", description="top_down: each constituent's label before its children, (S (NP XX )NP "
        "(VP XX )VP )S, as Vinyals & Kaiser et al. (2014); in_order: the label after its first child, "
        "XX (NP )NP (S XX (VP )VP )S (Liu & Zhang 2017, In-Order Transition-based Constituent Parsing; "
        "better for sequence-to-sequence parsing in Fernandez-Gonzalez & Gomez-Rodriguez 2020).")
    well_formed: bool = Field(
        True, description="Decode only well-formed trees over exactly the input words (matched brackets, one "
        "leaf per word; engine/parsing/constrained.py); false: decode freely, then repair.")

    @model_validator(mode="after")
    def _wsj_folder(self) -> TreebankDataset:
        if self.source == "wsj" and not self.wsj:
            raise FieldError(("wsj",), "source wsj needs the folder of your LDC WSJ sections: set wsj")
        return self


@DATASETS.declare
class TextDataset(DatasetSpec):
    """Plain text for a language model (model.kind decoder_only): data.train/valid/test each name one file
    (plain or .gz), one sentence or document a line; empty lines are skipped; nothing is fetched."""

    kind: Literal["text"] = "text"

    @property
    def text_only(self) -> bool:
        return True

    def text_file(self, value: str) -> str:
        return value


@DATASETS.declare
class TaggingDataset(DatasetSpec):
    """Part-of-speech tagging (model.kind encoder_only): each split is PREFIX.words (a sentence a line, words
    separated by spaces) and PREFIX.tags (the same lines' tags, one per word). Sources: nltk-sample (the
    words and part-of-speech tags of NLTK's treebank sample, written from its trees cleaned as for
    parsing, -NONE- elements removed; split by file 0001-0159 train, 0160-0179 valid, 0180-0199 test) or
    files (your own two files per split, checked as they are read)."""

    kind: Literal["tagging"] = "tagging"
    source: Literal["nltk-sample", "files"] = Field(
        "nltk-sample", description="nltk-sample: written from NLTK's treebank sample, fetched when missing; "
        "files: your own PREFIX.words and PREFIX.tags.")

    @property
    def suffixes(self) -> tuple[str, str] | None:
        return ("words", "tags")

    @property
    def tagged(self) -> bool:
        return True

    @property
    def labels_per(self) -> Literal["word", "line"] | None:
        return "word"


@DATASETS.declare
class ClassificationDataset(DatasetSpec):
    """Sequence classification (model.kind encoder_only with a sequence_classification head): each split is
    one file (plain or .gz), one example a line, ``LABEL<TAB>TEXT``; empty lines are skipped. Sources: files
    (data.train/valid/test name your files) or multi30k-langid (language identification over Multi30k's
    en/de/fr sides: data.train/valid/test are Multi30k prefixes, e.g. data/multi30k/train, whose three
    sides are fetched as the multi30k data set fetches them, and each split's file PREFIX.langid.gz is
    written from them, every line of every side as ``LANG<TAB>sentence``, deterministically shuffled:
    87,000 train, 3,042 val, 3,000 test2016 lines)."""

    kind: Literal["classification"] = "classification"
    source: Literal["files", "multi30k-langid"] = Field(
        "files", description="files: your own LABEL<TAB>TEXT files, one per split; multi30k-langid: written "
        "from Multi30k's en/de/fr sides at each split's prefix (fetched when missing).")

    @property
    def labels_per(self) -> Literal["word", "line"] | None:
        return "line"

    def text_file(self, value: str) -> str:
        """A split's file: the value itself (files), or PREFIX.langid (multi30k-langid; .gz when written)."""
        return f"{value}.langid" if self.source == "multi30k-langid" else value


DatasetKind = DATASETS.field(DatasetSpec, shorthand=True)


class MaskingSpec(StrictModel):
    """How a masked LM's lines are hidden (model.head masked_lm; Devlin et al. 2019 §3.1 "Task #1: Masked LM"):
    ``rate`` of each line's pieces are chosen at random (at least one), and each chosen piece is replaced by
    [MASK] ``mask`` of the time, by a random piece ``random`` of the time, and kept the rest; the loss is taken
    at the chosen positions only. Static masking, as BERT's original data: the training split is read
    ``copies`` times, each copy masked differently (its masks drawn from (seed, copy, line)), so a resumed run
    sees exactly the rows an uninterrupted one does; validation and test are masked once, with the same seed,
    so their figures are reproducible."""

    rate: float = Field(0.15, gt=0, lt=1, description="Share of each line's pieces chosen for prediction "
                        "(BERT §3.1: 15%); at least one per line.")
    mask: float = Field(0.8, ge=0, le=1, description="Share of the chosen pieces replaced by [MASK] (BERT: 80%).")
    random: float = Field(0.1, ge=0, le=1, description="Share replaced by a random piece (BERT: 10%); the rest "
                          "(BERT: 10%) is kept as it is.")
    copies: int = Field(10, ge=1, description="Differently masked copies of the training split (BERT's "
                        "duplicate factor: 10); one epoch reads them all.")
    seed: int | None = Field(None, description="The masks' seed (None: train.seed).")

    @model_validator(mode="after")
    def _shares(self) -> MaskingSpec:
        if self.mask + self.random > 1:
            raise FieldError(("random",), f"mask ({self.mask}) + random ({self.random}) exceed 1: the rest of "
                             "the chosen pieces is kept")
        return self


class DataSpec(StrictModel):
    """Parallel data. A split is a file prefix (PREFIX.<lang>[.gz]) or explicit source/target files."""

    source_lang: str = Field("en", description="Source language code (file suffix for prefixes).")
    target_lang: str = Field("de", description="Target language code.")
    dataset: DatasetKind | None = Field(
        None, description="Where the split files come from: `multi30k` or `wmt14` (fetched when missing), "
        "`files` (your own, checked up front), `treebank` (parsing, §6.3), `text` (a language model's own text "
        "files; `{kind: multi30k, side: de}`: Multi30k's German side), `tagging` (a tagger's words and tags), "
        "`classification` (a classifier's LABEL<TAB>TEXT lines); none: your own files, read as given. (`wmt14` "
        "is short for `{kind: wmt14}`.)"
    )
    train: str | ParallelFiles | None = Field(None, description="Training data.")
    valid: str | ParallelFiles | None = Field(None, description="Validation data.")
    test: str | ParallelFiles | None = Field(None, description="Test data (`tbuild evaluate --split test`).")
    tokenizer: TokenizerSpec = Field(default_factory=TokenizerSpec, description="Subword tokenizer.")
    masking: MaskingSpec | None = Field(
        None, description="A masked LM's masking (model.head masked_lm; None there: BERT's 15%, 80/10/10, 10 "
        "copies); refused for other models.")
    max_length: int = Field(256, ge=1, description="Drop training pairs with more subword tokens than this.")
    max_length_ratio: float | None = Field(
        None, gt=0, description="Drop training pairs whose length ratio exceeds this (None: keep all)."
    )
    max_words: int | None = Field(
        None, ge=1, description="Drop training pairs with more whitespace-separated words than this on either side, "
        "before tokenizing (the usual WMT filter: 175; None: keep all).")
    max_words_ratio: float | None = Field(
        None, gt=0, description="Drop training pairs whose word-count ratio exceeds this (the usual WMT filter: 1.5).")


# ----------------------------------------------------------------------------- training


SCHEDULES = Registry("schedule", plugins=False)


class ScheduleSpec(StrictModel):
    """Base of the learning-rate schedules (§5.3); ``kind`` names one."""

    kind: str
    warmup: int = Field(4000, ge=0, description="warmup_steps (§5.3: 4000).")

    def rate(self, step: int, d_model: int) -> float:
        """The learning rate for update ``step`` (1-based)."""
        raise NotImplementedError(f"{type(self).__name__} must define rate")


@SCHEDULES.declare
class NoamSchedule(ScheduleSpec):
    """§5.3 Eq. 3: factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""

    kind: Literal["noam"] = "noam"
    factor: float = Field(1.0, gt=0, description="Multiplies Eq. 3.")

    def rate(self, step: int, d_model: int) -> float:
        step = max(step, 1)
        # lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)  (§5.3, Eq. 3)
        return self.factor * d_model**-0.5 * min(step**-0.5, step * max(self.warmup, 1) ** -1.5)


@SCHEDULES.declare
class InverseSqrtSchedule(ScheduleSpec):
    """Linear warmup to lr, then lr · sqrt(warmup / step): Eq. 3's shape (§5.3) with a chosen peak."""

    kind: Literal["inverse_sqrt"] = "inverse_sqrt"
    lr: float = Field(5e-4, gt=0, description="The peak learning rate (reached at step warmup).")

    def rate(self, step: int, d_model: int) -> float:
        step = max(step, 1)
        return self.lr * (step / self.warmup if step < self.warmup else (max(self.warmup, 1) / step) ** 0.5)


@SCHEDULES.declare
class ConstantSchedule(ScheduleSpec):
    """Linear warmup to lr, then constant."""

    kind: Literal["constant"] = "constant"
    lr: float = Field(5e-4, gt=0, description="The learning rate after warmup.")

    def rate(self, step: int, d_model: int) -> float:
        step = max(step, 1)
        return self.lr * (min(1.0, step / self.warmup) if self.warmup else 1.0)


ScheduleKind = SCHEDULES.field(ScheduleSpec)


class OptimizerSpec(StrictModel):
    """Adam (§5.3): β1 = 0.9, β2 = 0.98, ε = 1e-9."""

    betas: tuple[float, float] = Field((0.9, 0.98), description="Adam β1, β2 (§5.3).")
    eps: float = Field(1e-9, gt=0, description="Adam ε (§5.3).")
    weight_decay: float = Field(0.0, ge=0, description="Decoupled weight decay (AdamW); 0 as the paper.")


class DistributedSpec(StrictModel):
    """How several training processes (torchrun, `tbuild train --nproc N`) share the model."""

    strategy: Literal["ddp", "fsdp"] = Field(
        "ddp", description="ddp: every process holds the whole model, gradients are all-reduced; fsdp: FSDP2 "
        "shards parameters, gradients and optimizer state over the processes."
    )


class InitSpec(StrictModel):
    """Start a new run from a trained model's weights (fine-tuning): what is loaded, how the vocabulary
    is matched, what stays frozen and what starts fresh. Shown as a load plan before the first step."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(..., alias="from", description="A run directory, a spec (its run directory) or a "
                        "checkpoint file, relative to the working directory (as output_dir is); of this "
                        "model.kind or another that shares a stack with it (an encoder-decoder's encoder for an "
                        "encoder_only model, its decoder for a decoder_only one), loaded by name.")
    average: int | None = Field(None, ge=0, description="Start from the average of the source's newest K "
                                "checkpoints (0: its train.average_last); None: its best, else newest, weights.")
    include: list[str] = Field(["*"], description="Parameter-name patterns (fnmatch) to load.")
    exclude: list[str] = Field([], description="Parameter-name patterns not to load (they start as the spec's "
                               "initialisation), e.g. ['output.*'].")
    vocab: Literal["refuse", "remap", "extend"] = Field(
        "refuse", description="refuse: the two tokenizers must be the same file (sha256); a run that names no "
        "tokenizer takes the source's. remap: the run trains (or names) its own tokenizer, and embedding and "
        "output rows are copied by piece string; pieces the source lacks start as the spec's init. extend: the "
        "source's tokenizer is kept and the pieces of one trained on this run's data that it lacks are appended "
        "(every source piece keeps its id and row; the new ones start as the spec's init).")
    freeze: list[str] = Field([], description="Parts that get no gradient and no optimizer state: embeddings "
                              "(with a vocabulary-sized output, not a tagger's or classifier's head), "
                              "encoder, decoder, encoder.layers.I or I-J, decoder.layers.I or I-J, "
                              "encoder.norm, decoder.norm.")
    reset: list[Literal["optimizer", "schedule"]] = Field(
        ["optimizer", "schedule"], description="What starts fresh, as in a new run: optimizer (Adam's moment "
        "estimates; otherwise the source's, for the tensors loaded unchanged) and schedule (the learning-rate "
        "step; otherwise the schedule goes on from the source's step).")
    copy_: dict[str, str] = Field({}, alias="copy", description="Initialise parameters the source lacks from "
                                  "named ones it has, by prefix, e.g. {decoder.layers.6: decoder.layers.5} to "
                                  "deepen a model.")


class AdaptersSpec(StrictModel):
    """Low-rank adapters (LoRA, Hu et al. 2021) trained on a frozen base (``train.init``): each targeted
    linear map W becomes W + (alpha/r) · B A, A and B of rank r, B starting at zero (§4.1)."""

    kind: Literal["lora"] = Field("lora", description="The adapter kind (lora: Hu et al. 2021).")
    r: int = Field(8, ge=1, description="Rank of the update B A (§4.1).")
    alpha: float = Field(16.0, gt=0, description="Scale α; the update is multiplied by alpha/r (§4.1).")
    dropout: float = Field(0.05, ge=0, lt=1, description="Dropout on the adapters' input.")
    targets: list[str] = Field(
        ["attention"], min_length=1, description="The linear modules adapted: groups (attention: every "
        "projection of the attention blocks; ffn: the feed-forward blocks') or module-name patterns "
        "(fnmatch), e.g. encoder.*.self_attn.sublayer.w_q or '*.w_v'; a target that matches nothing is refused.")


class SelectSpec(StrictModel):
    """How validation scores the model, picks best.safetensors and stops training early. The paper
    selects nothing on a metric (§6.1 averages the last checkpoints); this is the usual practice."""

    metric: Literal["ppl", "bleu", "bleu_lowercase", "chrf", "f1", "accuracy"] = Field(
        "ppl", description="The score that picks best.safetensors: ppl (validation perplexity, lower is better), "
        "bleu, bleu_lowercase or chrf (sacreBLEU on the decoded validation sources), f1 (EVALB F1 of the "
        "decoded trees; parsing only), or accuracy (the share of words tagged right, or of lines classified "
        "right; a tagger or classifier only); all but ppl: higher is better."
    )
    lines: int | None = Field(None, ge=1, description="Decode only the first N validation lines for the metric "
                              "(None: all).")
    beam: int = Field(1, ge=1, description="Beam size of the validation decoding (1: greedy); length penalty and "
                      "maximum length come from the decode section.")
    patience: int | None = Field(None, ge=1, description="Stop training after this many validations in a row "
                                 "without a better score (early stopping; equal is not better); None: never.")


class TrainSpec(StrictModel):
    """Training (§5). Defaults are the paper's base-model settings."""

    seed: int = Field(1, description="Seed for initialisation, shuffling and dropout.")
    batch_tokens: int = Field(
        25000, ge=1, description="Tokens per batch on each side (§5.1: ~25000 source + 25000 target)."
    )
    update_freq: int = Field(
        1, ge=1, description="Batches per update, over all processes: each of N processes accumulates "
        "update_freq / N of them (a multiple of N), so a spec means the same update on any number of processes."
    )
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec, description="Adam settings (§5.3).")
    schedule: ScheduleKind = Field(default_factory=NoamSchedule, description="Learning-rate schedule (§5.3).")
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="ε_ls (§5.4: 0.1).")
    clip_norm: float | None = Field(None, gt=0, description="Clip the gradient norm (None: no clipping).")
    max_steps: int | None = Field(100000, ge=1, description="Stop after this many updates (§5.2: 100k base).")
    max_epochs: int | None = Field(None, ge=1, description="Stop after this many epochs.")
    max_minutes: float | None = Field(None, gt=0, description="Stop after this much wall time.")
    validate_every: int = Field(1000, ge=1, description="Validate every N steps (and at the end).")
    log_every: int = Field(100, ge=1, description="Log metrics every N steps.")
    checkpoint_every: int | None = Field(None, ge=1, description="Checkpoint every N steps.")
    checkpoint_minutes: float | None = Field(10.0, gt=0, description="Checkpoint every M minutes (§6.1: 10).")
    keep_last: int = Field(5, ge=1, description="Keep the last K checkpoints.")
    average_last: int = Field(5, ge=1, description="Checkpoints averaged by `tbuild average` and `--average` (§6.1: "
                              "5 base, 20 big); at most keep_last.")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="auto: bf16 autocast on a CUDA GPU that has it, fp16 with a gradient scaler on one "
        "that does not (V100, T4); on a CPU bf16 autocast only where a short probe (cached per machine) measures "
        "bf16 matmuls at the model's widths at least 1.2x as fast as fp32, else fp32. bf16: autocast on CPU too "
        "(with a warning where it measures slower); fp16: CUDA only."
    )
    distributed: DistributedSpec = Field(
        default_factory=DistributedSpec, description="Training on several processes (torchrun, --nproc)."
    )
    threads: int | None = Field(None, ge=1, description="CPU threads (None: all cores).")
    log: list[str] = Field(
        ["jsonl"], description="Where training metrics go: jsonl (metrics.jsonl, valid.jsonl; always on), "
        "tensorboard (RUN/tensorboard), mlflow (RUN/mlruns or $MLFLOW_TRACKING_URI), or a plugin's logger.",
    )
    pad_multiple: int | None = Field(
        None, ge=1, description="Pad each batch's source and target length up to a multiple of this, so few "
        "distinct shapes occur (GPU kernels are planned per shape); None: 8 on CUDA, 1 on CPU.",
    )
    init: InitSpec | None = Field(None, description="Start from a trained model's weights (fine-tuning); "
                                  "None: the spec's initialisation.")
    row_steps: int | None = Field(
        None, ge=0, description="Round each batch's row count up to one of this many sizes per doubling (a power "
        "of two; extra rows carry no loss); 0: exact; None: 8 on CUDA with CUDA graphs (train.compile), else 0.",
    )
    compile: bool | Literal["auto"] = Field(
        "auto", description="torch.compile the model (graphs traced with symbolic shapes, shared by the "
        "bucketed batch shapes). auto: on CUDA for runs of 2,000 steps or more (with CUDA graphs for a model "
        "too small to keep the GPU busy), never on a CPU; true/false: always/never.",
    )
    packing: bool = Field(
        False, description="Pack several pairs end to end into each row (rows as long as the longest pair, "
        "batch_tokens / that many rows), attention kept within each pair and positions counted from 0 in each: "
        "every batch one shape, nearly every computed token a real one. An encoder-decoder without a pointer.",
    )
    select: SelectSpec = Field(
        default_factory=SelectSpec, description="The validation metric that picks best.safetensors, and early "
        "stopping on it (default: perplexity, no early stop).",
    )
    adapters: AdaptersSpec | None = Field(
        None, description="Train low-rank adapters (LoRA) on the frozen model of train.init instead of the "
        "model's own weights; the run saves the adapters only. None: train the weights.",
    )

    @model_validator(mode="after")
    def _row_steps_power_of_two(self) -> TrainSpec:
        if self.row_steps and self.row_steps & (self.row_steps - 1):
            raise FieldError(("row_steps",), f"row_steps ({self.row_steps}) must be 0 or a power of two")
        return self

    @model_validator(mode="after")
    def _adapters_need_a_base(self) -> TrainSpec:
        if self.adapters is not None and self.init is None:
            raise FieldError(("adapters",), "adapters train on a trained model: set train.init.from to its run")
        if self.adapters is not None and self.init is not None and self.init.vocab != "refuse":
            raise FieldError(("adapters",), f"adapters train on the base's vocabulary unchanged: train.init.vocab "
                             f"{self.init.vocab} changes its rows (use vocab: refuse)")
        if self.adapters is not None and self.distributed.strategy == "fsdp":
            raise FieldError(("adapters",), "adapters train with distributed.strategy ddp (fsdp shards the "
                             "whole model; the adapters are small)")
        return self

    @property
    def averaged(self) -> int:
        """How many checkpoints `--average` alone and `tbuild average` average: ``average_last``, at most the
        ``keep_last`` the run keeps (a tagger keeping 3 averages 3)."""
        return min(self.average_last, self.keep_last)


class DecodeSpec(StrictModel):
    """Decoding (§6.1): beam 4, length penalty α 0.6, max output length input + 50."""

    beam: int = Field(4, ge=1, description="Beam size k (§6.1: 4); 1 is greedy.")
    alpha: float = Field(0.6, ge=0, description="Length penalty α of Wu et al. 2016 (§6.1: 0.6).")
    max_len_a: float = Field(1.0, ge=0, description="Max output length = a · source length + b (§6.1: a=1).")
    max_len_b: int = Field(50, ge=0, description="Max output length = a · source length + b (§6.1: b=50).")
    nbest: int = Field(1, ge=1, description="Hypotheses printed per sentence.")
    batch_tokens: int = Field(4000, ge=1, description="Source tokens per decoding batch.")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: bf16 autocast on CUDA, fp32 on CPU (the same translations on every machine); "
        "bf16: autocast on CPU too (with a warning where it measures slower than fp32)."
    )
    quantization: Literal["float32", "int8"] = Field(
        "float32", description="Weights of the linear layers when decoding: int8 (CPU only; dynamic int8 "
        "linears natively, int8 weights in CTranslate2). --quantization overrides it."
    )

    sampling: Literal["topk", "topp", "temperature"] | None = Field(
        None, description="Sample instead of beam search: topk (from the topk best tokens), topp (from the "
        "smallest set of best tokens holding topp of the mass) or temperature (from all tokens); nbest samples.")
    topk: int = Field(10, ge=1, description="Tokens kept by sampling topk.")
    topp: float = Field(0.9, gt=0, le=1, description="Probability mass kept by sampling topp.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature (0: always the most probable token).")
    seed: int = Field(0, ge=0, description="Random seed of sampling: the same seed gives the same outputs.")
    no_repeat_ngram: int = Field(0, ge=0, description="No n-gram of this size twice in an output (0: off).")
    profiles: dict[str, DecodeProfile] = Field(
        default_factory=dict, description="Named sets of these settings, chosen with --profile NAME.")

    @model_validator(mode="after")
    def _nbest_within_beam(self) -> DecodeSpec:
        if self.sampling is None and self.nbest > self.beam:
            raise FieldError(("nbest",), f"nbest ({self.nbest}) cannot exceed beam ({self.beam})")
        return self

    def with_profile(self, name: str | None) -> DecodeSpec:
        """These settings with profile ``name``'s on top (None: as they are); KeyError if there is none."""
        if name is None:
            return self
        if name not in self.profiles:
            raise KeyError(name)
        fields = self.model_dump(exclude={"profiles"}) | self.profiles[name].model_dump(exclude_none=True)
        return DecodeSpec.model_validate(fields)


class DecodeProfile(StrictModel):
    """A named set of decoding settings (any field of ``decode`` but profiles); unset fields keep
    the decode section's value (so a profile cannot set a field to null)."""

    beam: int | None = Field(None, ge=1)
    alpha: float | None = Field(None, ge=0)
    max_len_a: float | None = Field(None, ge=0)
    max_len_b: int | None = Field(None, ge=0)
    nbest: int | None = Field(None, ge=1)
    batch_tokens: int | None = Field(None, ge=1)
    precision: Literal["auto", "fp32", "bf16"] | None = None
    quantization: Literal["float32", "int8"] | None = None
    sampling: Literal["topk", "topp", "temperature"] | None = None
    topk: int | None = Field(None, ge=1)
    topp: float | None = Field(None, gt=0, le=1)
    temperature: float | None = Field(None, ge=0)
    seed: int | None = Field(None, ge=0)
    no_repeat_ngram: int | None = Field(None, ge=0)


# ----------------------------------------------------------------------------- spec



def _masked_lm(model: ModelSpec) -> bool:
    """Whether the model is a masked LM (an encoder_only model with a masked_lm head: it reads text)."""
    return model.head is not None and model.head.kind == "masked_lm"


def _without_late_defaults(model: dict) -> dict:
    """The dumped model section without the fields that joined the spec after models were trained, where they
    hold their defaults, so that those models keep their architecture hash: ``kind`` (encoder_decoder),
    ``decoder.pointer``, ``head``, ``prefix_lm`` and ``char_input`` (None), each stack's and group's ``order``
    (standard; a group's only where its stack's is), ``head.piece`` (first), ``head.dense`` and ``head.transform``
    (false), ``char_input.pool`` (piece), ``dropout.token`` (0) and ``embedding_norm`` (false)."""
    if model.get("kind") == "encoder_decoder":
        del model["kind"]
    if model.get("dropout", {}).get("token") == 0.0:
        del model["dropout"]["token"]
    if model.get("embedding_norm") is False:
        del model["embedding_norm"]
    for key in ("head", "prefix_lm", "char_input"):
        if model.get(key) is None:
            model.pop(key, None)
    if model.get("head") and model["head"].get("piece") == "first":
        del model["head"]["piece"]
    if model.get("char_input") and model["char_input"].get("pool") == "piece":
        del model["char_input"]["pool"]
    for key in ("dense", "transform"):
        if model.get("head") and model["head"].get(key) is False:
            del model["head"][key]
    for name in ("encoder", "decoder"):
        stack = model.get(name)
        if not stack:
            continue
        if name == "decoder" and stack.get("pointer") is None:
            stack.pop("pointer", None)
        plain = stack.get("order") in (None, "standard")
        if plain:
            stack.pop("order", None)
        for group in stack.get("groups") or []:
            if group.get("order") is None or (plain and group.get("order") == "standard"):
                group.pop("order", None)
    return model

class Spec(StrictModel):
    """A whole tbuild spec."""

    name: str | None = Field(None, description="Run name; default: the spec file's stem.")
    extends: str | None = Field(None, description="A spec this one extends (path relative to this file).")
    output_dir: str | None = Field(None, description="Run directory; default runs/<name> (relative to the cwd).")
    model: ModelSpec = Field(default_factory=ModelSpec, description="Architecture.")
    data: DataSpec = Field(default_factory=DataSpec, description="Data and tokenizer.")
    train: TrainSpec = Field(default_factory=TrainSpec, description="Training.")
    decode: DecodeSpec = Field(default_factory=DecodeSpec, description="Decoding.")

    @model_validator(mode="after")
    def _select_fits_the_data(self) -> Spec:
        select, parsing = self.train.select, isinstance(self.data.dataset, TreebankDataset)
        if select.metric == "f1" and not parsing:
            raise FieldError(("train", "select", "metric"), "f1 (EVALB) scores parse trees: it needs the treebank "
                             "data set (data.dataset: treebank); for translation choose bleu, bleu_lowercase or chrf")
        if self.data.valid is None and (select.metric != "ppl" or select.patience is not None):
            what = "metric" if select.metric != "ppl" else "patience"
            raise FieldError(("train", "select", what), f"train.select.{what} scores validations, and there are "
                             "none: set data.valid")
        return self

    @model_validator(mode="after")
    def _packing_fits_the_model(self) -> Spec:
        """Packed rows are an encoder-decoder's, whose pointer (a count of source words per row) they would mix."""
        cross = GRAPHS[self.model.kind].cross_attention  # an encoder-decoder: packed pairs on both sides
        if self.train.packing and (not cross or self.model.pointer() is not None):
            what = "a pointer (model.decoder.pointer)" if cross else f"model.kind {self.model.kind}"
            raise FieldError(("train", "packing"), f"packed rows are for an encoder-decoder without a pointer, not "
                             f"{what}; set train.packing: false")
        return self

    @model_validator(mode="after")
    def _pointer_fits_the_data(self) -> Spec:
        """``advance: leaves`` names the data set's leaf tokens: a parsing data set's."""
        pointer = self.model.pointer()
        if pointer is not None and pointer.advance == "leaves" and pointer.advance_ids is None \
                and not isinstance(self.data.dataset, TreebankDataset):
            raise FieldError(("model", "decoder", "pointer", "advance"), "leaves are the leaf tokens of a parse "
                             "tree (data.dataset: treebank); for other data list the target tokens that consume "
                             "one source word, e.g. advance: [XX]")
        return self

    @model_validator(mode="after")
    def _data_fits_the_graph(self) -> Spec:
        """Pairs for a kind that translates, one side of text for a language model (and nothing that
        compares a source with a target there)."""
        graph, data = GRAPHS[self.model.kind], self.data
        self._labels_fit_the_graph()
        self._masking_fits_the_head()
        if graph.data == "labels" and not _masked_lm(self.model):
            return self
        text = data.dataset is not None and data.dataset.text_only
        given = data.dataset is not None or any(getattr(data, s) is not None for s in ("train", "valid", "test"))
        if text and self.model.prefix_lm is not None:
            raise FieldError(("data", "dataset"), f"data.dataset {data.dataset.kind} is one side of text; a prefix LM "  # type: ignore[union-attr]
                             "(model.prefix_lm) translates source-target pairs: give pairs, or remove "
                             "model.prefix_lm for a language model")
        if text and graph.data != "text" and not _masked_lm(self.model):
            raise FieldError(("data", "dataset"), f"data.dataset {data.dataset.kind} with one side of text is a "  # type: ignore[union-attr]
                             f"language model's data: set model.kind: decoder_only "
                             f"({with_article(self.model.kind)} model trains on source-target pairs)")
        if given and not text and graph.data == "text" and self.model.prefix_lm is None:
            raise FieldError(("model", "kind"), f"{with_article(self.model.kind)} model trains on one side of "
                             "text (a language model): set data.dataset to text (your files) or {kind: multi30k, "
                             "side: de}, or set model.prefix_lm: {attention: prefix} to translate pairs")
        if not text:
            return self
        for split in ("train", "valid", "test"):
            if isinstance(getattr(data, split), ParallelFiles):
                raise FieldError(("data", split), f"a language model's data.{split} is one text file: give its path, "
                                 "not source and target")
        for name in ("max_length_ratio", "max_words_ratio"):
            if getattr(data, name) is not None:
                raise FieldError(("data", name), f"data.{name} compares source and target lengths; a language "
                                 "model's text has one side: remove it")
        if self.train.select.metric not in ("ppl", "accuracy" if _masked_lm(self.model) else "ppl"):
            raise FieldError(("train", "select", "metric"), f"{self.train.select.metric} scores translations; a "
                             "language model is selected on validation perplexity: use ppl")
        return self

    def _masking_fits_the_head(self) -> None:
        """A masked_lm head reads plain text (one side: the text data set, or a multi30k side), hidden as
        data.masking says; data.masking means nothing to another model."""
        data = self.data
        if not _masked_lm(self.model):
            if data.masking is not None:
                raise FieldError(("data", "masking"), "data.masking hides pieces for a masked LM (model.head: "
                                 "{kind: masked_lm}): remove it")
            return
        if data.dataset is None or not data.dataset.text_only:
            what = (f"data.dataset {data.dataset.kind} is not one side of text" if data.dataset is not None
                    else "data.dataset is not set")
            raise FieldError(("model", "head"), f"a masked_lm head predicts hidden pieces of plain text, and {what}: "
                             "set data.dataset to text (your files) or {kind: multi30k, side: en}")

    def _labels_fit_the_graph(self) -> None:
        """An encoder-only model (data: labels) trains on a labelled data set whose labels label what its head
        labels (words: tagging and token_classification; lines: classification and sequence_classification),
        no other kind does; accuracy scores labels."""
        graph, dataset, metric = GRAPHS[self.model.kind], self.data.dataset, self.train.select.metric
        per = dataset.labels_per if dataset is not None else None
        if per is not None and graph.data != "labels":
            what = "words and their tags, a tagger's" if per == "word" else "lines and their labels, a classifier's"
            raise FieldError(("data", "dataset"), f"data.dataset {dataset.kind} is {what} "  # type: ignore[union-attr]
                             f"data: set model.kind: encoder_only ({with_article(self.model.kind)} model trains on "
                             f"{'text' if graph.data == 'text' else 'source-target pairs'})")
        if graph.data == "labels" and per is None and not _masked_lm(self.model):
            raise FieldError(("data", "dataset"), f"{with_article(self.model.kind)} model trains on words and their "
                             "tags or "
                             "lines and their labels: set data.dataset to {kind: tagging} (the treebank sample), "
                             "{kind: tagging, source: files} or {kind: classification} (LABEL<TAB>TEXT files)")
        head_per = getattr(self.model.head, "labels_per", None)  # a plugin head may not say
        if head_per is not None and per is not None and head_per != per:
            fits = "token_classification" if per == "word" else "sequence_classification"
            raise FieldError(("model", "head"), f"a {self.model.head.kind} head labels each {head_per}, and "  # type: ignore[union-attr]
                             f"data.dataset {dataset.kind} labels each {per}: set model.head to {{kind: {fits}}}")  # type: ignore[union-attr]
        for split in ("train", "valid", "test"):
            if per == "line" and isinstance(getattr(self.data, split), ParallelFiles):
                raise FieldError(("data", split), f"a classifier's data.{split} is one LABEL<TAB>TEXT file: give "
                                 "its path, not source and target")
        if (metric == "accuracy") != (graph.data == "labels") and metric != "ppl":
            why = ("accuracy scores a tagger's labels or a classifier's (model.kind encoder_only)"
                   if metric == "accuracy" else f"{metric} scores decoded outputs; a tagger or classifier is "
                   "selected on accuracy or ppl")
            raise FieldError(("train", "select", "metric"), why)

    def vocab_size(self) -> int:
        """The target (or shared) vocabulary size, resolved from the tokenizer settings if needed."""
        v = self.model.vocab_size
        return self.data.tokenizer.vocab_size if v == "from_tokenizer" else v

    def src_vocab_size(self) -> int:
        return self.model.src_vocab_size or self.vocab_size()

    def architecture_hash(self) -> str:
        """Hash of what determines the weights' shapes and meaning: model section and vocabulary."""
        model = _without_late_defaults(self.model.model_dump(mode="json")) | {"vocab_size": self.vocab_size()}
        payload = {"model": model, "vocab": [self.src_vocab_size(), self.vocab_size()]}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
