"""A grapheme-to-phoneme run's evaluation record (``eval_SPLIT.json``): the translation record's decoding fields
(words as sentences, weights, perplexity of the references, beam, speed) with the phone and word error rates in
place of sacreBLEU's scores; and the model card's results."""

from __future__ import annotations

from pydantic import Field

from ...run.directory import EvalRecord, Run
from ..summarization.record import TRANSLATION_ONLY
from .rates import Rates


class PhonesRecord(EvalRecord):
    """PER and WER in % (lower is better) of the outputs against the references."""

    per: float = Field(description="phone error rate: edit distance over reference phones, %")
    wer: float = Field(description="word error rate: words with any phone wrong, %")

    @classmethod
    def of(cls, decoded: EvalRecord, rates: Rates) -> PhonesRecord:
        """The record of outputs decoded and scored (``decoded``: the translation record of the same decoding,
        its sacreBLEU fields left out) with their error rates."""
        return cls(**decoded.model_dump(exclude=TRANSLATION_ONLY | {"comparison"}), **rates.to_json())


def card_results(run: Run) -> list[str]:
    """The model card's results: each split's PER and WER, with how it was decoded."""
    records = run.dir.evals_as(PhonesRecord)
    if not records:
        return ["Not evaluated yet: `tbuild evaluate RUN --split test` writes the scores this card shows.", ""]
    lines = ["Phone error rate (PER: edit distance over the reference phones) and word error rate (WER: words with "
             "any phone wrong), %, lower is better.", "",
             "| split | words | PER | WER | perplexity | beam | engine |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    lines += [f"| {r.split} | {r.sentences:,} | {r.per:.2f} | {r.wer:.2f} | {r.perplexity:.2f} | {r.beam} "
              f"| {r.engine} |" for r in records]
    return [*lines, ""]
