"""The spec checks the tasks' declarations share (torch-free): whether a spec's data fit its model for the task
(``*_declaration.py`` lists the ones each task runs, in order). Each raises ``FieldError`` naming the field at
fault, which the loader turns into the file and line that set it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tbuild.builder.spec.base import FieldError
from tbuild.builder.spec.data import ParallelFiles
from tbuild.components.specs.graph import with_article

if TYPE_CHECKING:
    from tbuild.builder.spec.tasks import Sections


def labels_fit_the_graph(spec: Sections) -> None:
    """An encoder-only model (data: labels) trains on a labelled data set whose labels label what its head
    labels (words: tagging and token_classification; lines: classification and sequence_classification),
    no other kind does."""
    graph, dataset = spec.model.graph, spec.data.dataset
    per = dataset.labels_per if dataset is not None else None
    if per is not None and graph.data != "labels":
        what = "words and their tags, a tagger's" if per == "word" else "lines and their labels, a classifier's"
        raise FieldError(("data", "dataset"), f"data.dataset {dataset.kind} is {what} "  # type: ignore[union-attr]
                         f"data: set model.kind: encoder_only ({with_article(spec.model.kind)} model trains on "
                         f"{'text' if graph.data == 'text' else 'source-target pairs'})")
    if spec.model.reads == "labels" and per is None:
        raise FieldError(("data", "dataset"), f"{with_article(spec.model.kind)} model trains on words and their "
                         "tags or lines and their labels: set data.dataset to {kind: tagging} (the treebank "
                         "sample), {kind: tagging, source: files} or {kind: classification} (LABEL<TAB>TEXT files)")
    head_per = spec.model.output_head.labels_per
    if head_per is not None and per is not None and head_per != per:
        fits = "token_classification" if per == "word" else "sequence_classification"
        raise FieldError(("model", "head"), f"a {spec.model.head.kind} head labels each {head_per}, and "  # type: ignore[union-attr]
                         f"data.dataset {dataset.kind} labels each {per}: set model.head to {{kind: {fits}}}")  # type: ignore[union-attr]
    for split in ("train", "valid", "test"):
        if per == "line" and isinstance(getattr(spec.data, split), ParallelFiles):
            raise FieldError(("data", split), f"a classifier's data.{split} is one LABEL<TAB>TEXT file: give "
                             "its path, not source and target")


def masking_fits_the_head(spec: Sections) -> None:
    """A masked_lm head reads plain text (one side: the text data set, or a multi30k side), hidden as
    data.masking says; data.masking means nothing to another model."""
    data, masked = spec.data, spec.model.reads == "text" and spec.model.graph.data == "labels"
    if not masked:
        if data.masking is not None:
            raise FieldError(("data", "masking"), "data.masking hides pieces for a masked LM (model.head: "
                             "{kind: masked_lm}): remove it")
        return
    if data.dataset is None or not data.dataset.text_only:
        what = (f"data.dataset {data.dataset.kind} is not one side of text" if data.dataset is not None
                else "data.dataset is not set")
        raise FieldError(("model", "head"), f"a masked_lm head predicts hidden pieces of plain text, and {what}: "
                         "set data.dataset to text (your files) or {kind: multi30k, side: en}")


def _text(spec: Sections) -> bool:
    """Whether the data set is one side of text (a language model's data)."""
    return spec.data.dataset is not None and spec.data.dataset.text_only


def pairs_are_not_text(spec: Sections) -> None:
    """A model that reads source-target pairs (an encoder-decoder, a prefix LM) is given pairs, not one side of
    text."""
    dataset, reads = spec.data.dataset, spec.model.reads
    if not _text(spec) or reads != "pairs":
        return
    if spec.model.graph.data == "text":  # a prefix LM
        raise FieldError(("data", "dataset"), f"data.dataset {dataset.kind} is one side of text; a prefix LM "  # type: ignore[union-attr]
                         "(model.prefix_lm) translates source-target pairs: give pairs, or remove "
                         "model.prefix_lm for a language model")
    raise FieldError(("data", "dataset"), f"data.dataset {dataset.kind} with one side of text is a "  # type: ignore[union-attr]
                     f"language model's data: set model.kind: decoder_only "
                     f"({with_article(spec.model.kind)} model trains on source-target pairs)")


def text_for_a_language_model(spec: Sections) -> None:
    """A language model (a decoder-only model without a prefix) trains on one side of text."""
    data = spec.data
    given = data.dataset is not None or any(getattr(data, s) is not None for s in ("train", "valid", "test"))
    if given and not _text(spec) and spec.model.reads == "text" and spec.model.graph.data == "text":
        raise FieldError(("model", "kind"), f"{with_article(spec.model.kind)} model trains on one side of "
                         "text (a language model): set data.dataset to text (your files) or {kind: multi30k, "
                         "side: de}, or set model.prefix_lm: {attention: prefix} to translate pairs")


def one_side_of_text(spec: Sections) -> None:
    """Text data (a language model's, a masked LM's) has one file a split and no source and target to compare."""
    if not _text(spec):
        return
    for split in ("train", "valid", "test"):
        if isinstance(getattr(spec.data, split), ParallelFiles):
            raise FieldError(("data", split), f"a language model's data.{split} is one text file: give its path, "
                             "not source and target")
    for name in ("max_length_ratio", "max_words_ratio"):
        if getattr(spec.data, name) is not None:
            raise FieldError(("data", name), f"data.{name} compares source and target lengths; a language "
                             "model's text has one side: remove it")
