"""A summarization run's evaluation record (``eval_SPLIT.json``): the translation record's decoding fields
(sentences, weights, perplexity of the references, beam, speed) with ROUGE in place of sacreBLEU's scores, and
the lead-N baseline scored on the same split."""

from __future__ import annotations

from pydantic import Field

from ...run.directory import EvalRecord, Run
from .lead import Lead
from .rouge import Rouge

TRANSLATION_ONLY = {"bleu", "bleu_signature", "bleu_lowercase", "bleu_lowercase_signature", "chrf", "chrf_signature"}


class SummaryRecord(EvalRecord):
    """ROUGE-1/2/L F1 (×100, the mean over the outputs) and how they were computed; the lead-N baseline:
    its N (chosen on the validation split), its ROUGE on this split and the validation ROUGE-L it was chosen
    by."""

    rouge1: float = Field(description="ROUGE-1 F1 of the outputs")
    rouge2: float = Field(description="ROUGE-2 F1")
    rouge_l: float = Field(description="ROUGE-L F1")
    rouge_signature: str
    lead: dict | None = None  # n, rouge1, rouge2, rouge_l on this split, valid_rouge_l; None: no validation split

    @classmethod
    def of(cls, decoded: EvalRecord, rouge: Rouge, signature: str, lead: Lead | None, lead_rouge: Rouge | None
           ) -> SummaryRecord:
        """The record of outputs decoded and scored (``decoded``: the translation record of the same
        decoding, its sacreBLEU fields left out) with their ROUGE and the baseline's."""
        kept = decoded.model_dump(exclude=TRANSLATION_ONLY | {"comparison"})
        baseline = None if lead is None or lead_rouge is None else {
            "n": lead.n, **lead_rouge.to_json(), "valid_rouge_l": lead.valid.rouge_l}
        return cls(**kept, **rouge.to_json(), rouge_signature=signature, lead=baseline)


def summary_records(run: Run) -> list[SummaryRecord]:
    """Every split's record that holds ROUGE, in the order of their file names."""
    return run.dir.evals_as(SummaryRecord)


def card_results(run: Run) -> list[str]:
    """The model card's results: each split's ROUGE beside the lead-N baseline's, with how it was decoded."""
    records = summary_records(run)
    if not records:
        return ["Not evaluated yet: `tbuild evaluate RUN --split test` writes the scores this card shows.", ""]
    lines = ["ROUGE F1 (×100, the mean over the outputs); lead-N: the source's first N words, N chosen on the "
             "validation split.", "",
             "| split | sentences | ROUGE-1 | ROUGE-2 | ROUGE-L | lead-N ROUGE-1/2/L | perplexity | beam | α "
             "| engine |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in records:
        lead = f"N={r.lead['n']}: {r.lead['rouge1']:.2f} / {r.lead['rouge2']:.2f} / {r.lead['rouge_l']:.2f}" \
            if r.lead else "–"
        lines.append(f"| {r.split} | {r.sentences:,} | {r.rouge1:.2f} | {r.rouge2:.2f} | {r.rouge_l:.2f} | {lead} | "
                     f"{r.perplexity:.2f} | {r.beam} | {r.alpha} | {r.engine} |")
    return [*lines, "", f"ROUGE: {records[0].rouge_signature}", ""]
