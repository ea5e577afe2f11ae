"""An encoder-only model's labelled data, whichever it labels: a tagger's words (``tagged.py``), a
classifier's lines (``classified.py``) or a masked LM's hidden pieces (``masked.py``). The label set fitted
from the training split (``model.head.labels: from_data``) and a split encoded as pairs, by the data set's
kind."""

from __future__ import annotations

from collections.abc import Callable

from tbuild.builder.schema import Spec

from ..errors import DataError
from .batches import BatchSource
from .classified import encode_classified, read_classified
from .corpus import classified
from .masked import encode_masked, masked_lm
from .tagged import TaggedPairs, encode_tagged, read_tagged
from .tokenizer import Tokenizer

Log = Callable[[str], None]


def fit_labels(spec: Spec, log: Log) -> Spec:
    """The spec with ``model.head.labels: from_data`` replaced by the training split's labels (a tagger's
    tags, a classifier's classes), sorted; a list given in the spec is kept (labels outside it are refused
    when a split is encoded)."""
    head = spec.model.head
    if head is None or getattr(head, "labels", None) != "from_data":  # a masked LM's head has no labels
        return spec
    if classified(spec.data):
        examples = read_classified(spec.data, "train", log)
        found, where, what = set(examples.labels), examples.file, "labels"
    else:
        train = read_tagged(spec.data, "train", log)
        found, where, what = {t for tags in train.tags for t in tags}, train.tags_file, "tags"
    labels = sorted(found)
    if len(labels) < 2:
        raise DataError(f"data.train: {where} has {len(labels)} distinct {what[:-1]}; a classification head needs "
                        "at least 2")
    log(f"model.head.labels: {len(labels)} {what} from {where}")
    model = spec.model.model_copy(update={"head": head.model_copy(update={"labels": labels})})
    return spec.model_copy(update={"model": model})


def encode_labelled(spec: Spec, split: str, tok: Tokenizer, log: Log, *,
                    max_length: int | None = None) -> TaggedPairs | BatchSource:
    """A split of an encoder-only model's data as pairs: ``encode_masked`` for a masked LM's text,
    ``encode_classified`` for a classifier's lines, ``encode_tagged`` for a tagger's words."""
    encode = encode_masked if masked_lm(spec) else encode_classified if classified(spec.data) else encode_tagged
    return encode(spec, split, tok, log, max_length=max_length)
