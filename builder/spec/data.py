"""The spec's ``data`` section: data sets (a registry: each kind one strict model), splits, the tokenizer, a masked
LM's masking and the length filters.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from tbuild.components.registry import Registry
from tbuild.components.spec_base import StrictModel
from tbuild.components.specs.special import Specials

from .base import FieldError


class ParallelFiles(StrictModel):
    """A parallel corpus: line i of source translates line i of target (plain text or .gz)."""

    source: str = Field(description="Source-language file (relative to the spec file).")
    target: str = Field(description="Target-language file (relative to the spec file).")

MIN_VOCAB = 16  # the fewest pieces a run's tokenizer has (data.tokenizer.vocab_size)


class SamplingSpec(StrictModel):
    """Subword regularisation of the training split (training side only): each training pair is encoded
    ``variants`` times with sentencepiece's sampling, each variant with its own fixed seed, and epoch e reads
    variant e mod ``variants``. A unigram model samples one segmentation from its lattice (Kudo 2018, Subword
    Regularization, §3.1: ``nbest`` candidates, smoothed by ``alpha``); a BPE model drops each merge with
    probability ``alpha`` (BPE-dropout, Provilkov et al. 2020, §2), where ``nbest`` means nothing. Validation,
    test, decoding and serving encode deterministically."""

    alpha: float = Field(0.1, gt=0, le=1, description="unigram: the smoothing of the sampled segmentation's "
                         "probability (Kudo 2018: 0.1 to 0.5); bpe: each merge's dropout probability (BPE-dropout: "
                         "0.1).")
    nbest: int | None = Field(None, description="unigram: sample among the nbest best segmentations (Kudo 2018: "
                              "64), or -1: among all of the lattice (None: -1); bpe: not set (BPE-dropout has "
                              "no n-best).")
    variants: int = Field(8, ge=1, description="Differently sampled encodings of the training split, each with "
                          "its own seed (from train.seed and its index), read one an epoch in turn.")

    @model_validator(mode="after")
    def _nbest(self) -> SamplingSpec:
        if self.nbest is not None and self.nbest != -1 and self.nbest < 2:
            raise FieldError(("nbest",), f"nbest {self.nbest} samples nothing: give -1 (the whole lattice) or a "
                             "number of candidates of at least 2")
        return self


class TokenizerSpec(StrictModel):
    """Subword tokenizer: sentencepiece trained on the training data (§5.1), or an existing model."""

    model: str | None = Field(None, description="An existing sentencepiece .model file; None: train one.")
    kind: Literal["bpe", "unigram"] = Field("bpe", description="sentencepiece model type (§5.1: BPE).")
    vocab_size: int = Field(8000, ge=MIN_VOCAB, description="Vocabulary size to train (§5.1 used ~37000 shared).")
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
    special: Specials | None = Field(
        None, description="The vocabulary's special ids and what is added around a sequence "
        "(components/specs/special.py); "
        "None: tbuild's own (PAD 0, UNK 1, BOS 2, EOS 3; sources text + EOS, targets BOS … EOS). Written by "
        "training and import from the tokenizer where it differs.")
    sampling: SamplingSpec | None = Field(
        None, description="Subword regularisation of the training split: sentencepiece sampling (unigram) or "
        "BPE-dropout (bpe), in `variants` seeded encodings read one an epoch; None: every split is encoded "
        "deterministically.")

    @model_serializer(mode="wrap")
    def _without_defaults_added_later(self, handler: SerializerFunctionWrapHandler) -> dict:
        """The dump without ``special`` and ``sampling`` where they are None: specs written before these fields
        keep their resolved form (and a sweep's rows their names)."""
        data = handler(self)
        for key in ("special", "sampling"):
            if data.get(key, 0) is None:
                del data[key]
        return data

    @model_validator(mode="after")
    def _sampling_fits(self) -> TokenizerSpec:
        """BPE-dropout has no n-best; a Hugging Face tokenizers file samples nothing."""
        if self.sampling is None:
            return self
        if self.model is not None and self.model.endswith(".json"):
            raise FieldError(("sampling",), f"model is a Hugging Face tokenizers file ({self.model}): sampling "
                             "needs a sentencepiece bpe or unigram model")
        if self.model is None and self.kind == "bpe" and self.sampling.nbest is not None:
            raise FieldError(("sampling", "nbest"), "a bpe tokenizer samples by BPE-dropout, which has no n-best: "
                             "leave nbest unset (alpha is the dropout probability)")
        return self


DATASETS = Registry("dataset", plugins=False)  # lists its kinds after the tasks' declarations (``tasks.py``)


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
    def trees(self) -> bool:
        """Whether the targets are linearized parse trees (EVALB scores them; the pointer advances on their
        leaves)."""
        return False

    @property
    def labels_per(self) -> Literal["word", "line"] | None:
        """What one label of the data labels: a word (a tagger's data), a line (a classifier's), or None (the
        data holds no labels). An encoder-only model's head must label the same."""
        return None

    @property
    def unsampled(self) -> str | None:
        """Why ``data.tokenizer.sampling`` cannot encode this data set's training pairs (None: it can): a data
        set of labels is encoded otherwise (a tagger's words, a classifier's lines)."""
        return None if self.labels_per is None else f"data set {self.kind!r} holds labels, whose rows are not sampled"


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
        "leaf per word; engine/tasks/parsing/constrained.py); false: decode freely, then repair.")

    @property
    def trees(self) -> bool:
        return True

    @property
    def unsampled(self) -> str | None:
        if self.linearization != "words":
            return None
        return ("linearization words: a tree's words are the source's pieces, which sampling each side on its own "
                "would split otherwise (or linearize with xx or tags)")

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

    @model_validator(mode="after")
    def _sampled_text_only(self) -> DataSpec:
        """Sampling encodes prepared pairs, each side on its own; a tagger's words and a classifier's lines are
        encoded otherwise, and a lexicalized tree's words must stay the source's pieces."""
        why = None if self.tokenizer.sampling is None or self.dataset is None else self.dataset.unsampled
        if why is not None:
            raise FieldError(("tokenizer", "sampling"), f"{why}: remove data.tokenizer.sampling")
        return self
