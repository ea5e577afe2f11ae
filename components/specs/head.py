"""Specs of the output heads of an encoder-only model (``model.head``; blocks in ``tbuild.components.heads``).
Torch-free. A head maps the final encoder states to scores over a label set read from the data: one label
per word (``token_classification``, a tagger) or one per input line (``sequence_classification``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..registry import HEAD
from ..spec_base import ComponentSpec

LabelsPer = Literal["word", "line"]
Piece = Literal["first", "last"]


class HeadBase(ComponentSpec):
    """What every head answers, so that the builder, the data and the export ask it rather than probe its kind or
    its fields: whether its outputs are the vocabulary's pieces (``vocab_sized``, the builder then passes
    ``vocab_size``), the pieces it reserves in the tokenizer (``controls``), whether it trains on plain text
    (``reads_text``), its label set, the piece and BOS of a word's label, and whether it wants a norm before its
    output layer. A head declared elsewhere (a plugin's) subclasses it."""

    labels_per: ClassVar[LabelsPer | None] = None  # what one label labels (a word, a line), None without labels
    vocab_sized: ClassVar[bool] = False
    controls: ClassVar[tuple[str, ...]] = ()
    reads_text: ClassVar[bool] = False

    def label_set(self) -> Literal["from_data"] | list[str] | None:
        """Its labels (``from_data`` before the run fits them), None for a head without labels."""
        return None

    def word_piece(self) -> Piece:
        """Which of a word's subword pieces holds the word's label (first unless the head says last)."""
        return "first"

    def word_bos(self) -> bool:
        """Whether a sentence's row starts with BOS (an imported BERT's or RoBERTa's tagger)."""
        return False

    def norm_transform(self) -> bool:
        """Whether a dense layer, GELU and ``model.norm`` come before its output layer (BERT's masked LM's)."""
        return False


HEAD.require(HeadBase)  # a plugin head answers the same questions
NO_HEAD = HeadBase(kind="none")  # what a model without a head answers (``ModelSpec.output_head``): nothing of a head's


class LabelHeadSpec(HeadBase):
    """Base of the label heads: a label set and a linear layer from d_model to it. ``labels: from_data``
    is fitted to the training split's labels when a run starts (its spec.yaml then lists them, sorted), as
    ``vocab_size: from_tokenizer`` is fitted to the tokenizer. ``labels_per``: what one label labels (the
    data set must label the same: a tagger's words, a classifier's lines)."""

    labels_per: ClassVar[LabelsPer | None] = "word"
    labels: Literal["from_data"] | list[str] = Field(
        "from_data", description="The label set: from_data (the training split's labels, sorted) or the labels "
        "themselves (a fitted run's spec lists them; an evaluation label outside them is an error).")
    bias: bool = Field(True, description="A bias per label.")

    @field_validator("labels")
    @classmethod
    def _distinct(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list):
            if len(v) < 2:
                raise ValueError("a classification head needs at least 2 labels")
            if len(set(v)) != len(v):
                raise ValueError("labels must be distinct")
        return v

    def label_set(self) -> Literal["from_data"] | list[str]:
        return self.labels

    def label_count(self) -> int:
        """The number of labels (the head's outputs); the spec must be fitted to its data first."""
        if not isinstance(self.labels, list):
            raise RuntimeError("model.head.labels is from_data: fit the spec to its data first (tbuild train does)")
        return len(self.labels)


@HEAD.declare
class TokenClassificationSpec(LabelHeadSpec):
    """One label per input position: a linear layer from d_model to the label set (a tagger's tags).
    ``labels: from_data`` is fitted to the training split's labels when a run starts (its spec.yaml then
    lists them, sorted), as ``vocab_size: from_tokenizer`` is fitted to the tokenizer. ``piece``: which of a
    word's subword pieces its label is trained and read at (``engine/data/word_labels.py``: ``word_row``)."""

    kind: Literal["token_classification"] = "token_classification"
    piece: Piece = Field(
        "first", description="Which of a word's subword pieces its label is trained and predicted at: first (the "
        "usual practice) or last (for English part-of-speech tags, the suffix pieces -ing, -ed, -s, -ly carry "
        "most of what an unseen word's tag depends on; the first piece of 'walking' is 'walk').")
    bos: bool = Field(
        False, description="Each sentence's row starts with BOS, as BERT's and RoBERTa's taggers read [CLS] or <s> "
        "first (what `tbuild import hf` sets for them); none by default.")

    def word_piece(self) -> Piece:
        return self.piece

    def word_bos(self) -> bool:
        return self.bos


@HEAD.declare
class SequenceClassificationSpec(LabelHeadSpec):
    """One label per input line: the final states pooled into one vector, then a linear layer from d_model to
    the label set (a classifier's classes; ``labels: from_data`` as for token_classification). ``pooling:
    mean`` (the default) averages the non-padding positions: a model trained from scratch has no
    pretraining that teaches one position to summarise the input (BERT's [CLS] learns it from
    next-sentence prediction), and the mean passes the loss's gradient to every position; ``first`` takes
    the first position's state (the BOS each input starts with), as BERT's [CLS] does."""

    labels_per: ClassVar[LabelsPer | None] = "line"
    kind: Literal["sequence_classification"] = "sequence_classification"
    pooling: Literal["mean", "first"] = Field(
        "mean", description="mean: the mean of the final states over the non-padding positions; first: the "
        "first position's (the BOS every input starts with, as BERT's [CLS]).")
    dense: bool = Field(
        False, description="A dense layer (d_model -> d_model) and tanh between the pooled state and the output "
        "layer: BERT's pooler, RoBERTa's classification head (Devlin et al. 2019 §3); none by default.")

    @model_validator(mode="before")
    @classmethod
    def _no_piece(cls, data: Any) -> Any:  # noqa: ANN401 - the raw mapping, before validation
        """``piece`` picks a word's piece for a token_classification head; this head labels whole lines."""
        if isinstance(data, dict) and "piece" in data:
            raise ValueError("piece (which of a word's pieces holds its label) is a token_classification head's "
                             "field; a sequence_classification head labels each line as a whole: remove it")
        return data


MASK_PIECE = "[MASK]"  # the masked-LM's mask token: a sentencepiece control symbol, never produced from text


@HEAD.declare
class MaskedLMSpec(HeadBase):
    """A masked language model's head (BERT's pretraining, Devlin et al. 2019 §3.1 "Task #1: Masked LM"): the
    final state of every position mapped to scores over the vocabulary by one linear layer (d_model ->
    vocabulary), tied to the token embedding unless ``model.tie_embeddings: none`` (as BERT's output layer is).
    It reads plain text (the ``text`` data set, or ``{kind: multi30k, side: en}``), some pieces of each line
    hidden as ``data.masking`` says; the loss is taken at the hidden positions only. An encoder pretrained so
    starts a tagger or classifier through ``train.init`` (the head itself starts new there)."""

    vocab_sized: ClassVar[bool] = True  # its outputs are the vocabulary's pieces (the builder passes vocab_size)
    controls: ClassVar[tuple[str, ...]] = (MASK_PIECE,)  # reserved when the tokenizer is trained: what hides a piece
    reads_text: ClassVar[bool] = True  # it trains on plain text, not on labels (the spec's cross-checks)
    kind: Literal["masked_lm"] = "masked_lm"
    bias: bool = Field(True, description="A bias per vocabulary piece (BERT's output layer has one).")
    transform: bool = Field(
        False, description="BERT's prediction transform before the output layer: a dense layer (d_model -> "
        "d_model), GELU and a norm (model.norm's kind and eps); none by default.")

    def norm_transform(self) -> bool:
        return self.transform


@HEAD.declare
class SentenceEmbeddingSpec(HeadBase):
    """No label and no weight: the final states pooled into one vector per input, a sentence vector (what
    `tbuild embed` writes), as sentence-transformers' ``Pooling`` module computes it (Reimers & Gurevych 2019
    §3): ``mean`` averages the states of the input's positions ([CLS] and [SEP] included, padding not), ``cls``
    takes the first position's ([CLS] or <s>); ``normalize`` divides the vector by its L2 norm (its
    ``Normalize`` module). What `tbuild import hf` gives a headless encoder (``BertModel``, ``XLMRobertaModel``):
    the folder's pooling, or mean where it has none (sentence-transformers' default for a plain model). Nothing
    trains it; it starts a tagger or classifier through ``train.init``."""

    reads_text: ClassVar[bool] = True  # its input is plain text (the spec's cross-checks), never labels
    kind: Literal["sentence_embedding"] = "sentence_embedding"
    pooling: Literal["mean", "cls"] = Field(
        "mean", description="mean: the mean of the final states over the input's positions ([CLS] and [SEP] "
        "included, padding not); cls: the first position's (the [CLS] or <s> every input starts with).")
    normalize: bool = Field(False, description="Each vector divided by its L2 norm (sentence-transformers' "
                            "Normalize module), so that a dot product is the cosine similarity.")
    max_length: int | None = Field(
        None, ge=3, description="The most tokens an input keeps ([CLS] and [SEP] included): longer inputs are cut "
        "to it, as sentence-transformers' max_seq_length cuts them (a warning names the line); none: the model's "
        "positions.")
