"""Parity of an exported CTranslate2 model with tbuild's own decoding: both decode the same lines at
the same beam and length penalty, and both score the same references teacher-forced.

What still differs between the two searches (so a few lines may differ at beam > 1; greedy agrees):
- Length penalty: CTranslate2 divides by |Y|^α (|Y| without EOS), tbuild by ((5+|Y|)/6)^α with EOS
  (Wu et al. 2016, engine/decoding/search.py). The check runs CTranslate2 with length_penalty 0
  (raw log-probs), asks for its ``beam`` finished hypotheses and re-ranks them with tbuild's lp
  (``decoding/ct2.py: ct2_search``, which ``--engine ctranslate2`` decodes with too).
- Stopping: CTranslate2 stops once ``beam`` hypotheses have finished; tbuild goes on until no live
  beam can beat the best finished one, so it can find a better-scoring, longer hypothesis.
- Hypotheses cut at the length limit: tbuild forces and scores EOS, CTranslate2 just stops.
Set in both: PAD and BOS are never generated, no minimum length, the same maximum length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.builder.schema import DecodeSpec
from tbuild.builder.tokens import BOS, EOS

from ..decoding.ct2 import ct2_search
from ..decoding.translator import Translator, encode_sources, translate
from ..run_dir import Run

TEACHER_FORCED_LINES = 16  # the batch whose per-token log-probs are compared


@dataclass
class ParityReport:
    sentences: int
    beam: int
    alpha: float
    bleu_tbuild: float
    bleu_export: float
    identical: float  # share of identical output lines
    first_difference: tuple[int, str, str] | None  # (line number, tbuild, export)
    max_logprob_diff: float  # teacher-forced, per target token, over TEACHER_FORCED_LINES lines

    @property
    def delta(self) -> float:
        return self.bleu_export - self.bleu_tbuild


def ct2_translate(ct2, translator: Translator, lines: list[str], decode: DecodeSpec) -> list[str]:  # noqa: ANN001
    """Decode with a ``ctranslate2.Translator`` under tbuild's conventions (``decoding/ct2.py``): the best line each."""
    tok = translator.tokenizer
    sources = encode_sources(tok, lines, translator.max_source_tokens)
    hyps = ct2_search(ct2, tok, sources, decode, translator.max_output_len)
    return [tok.decode(h[0].tokens) if h else "" for h in hyps]


def teacher_forced_diff(ct2, translator: Translator, sources: list[str], references: list[str]) -> float:  # noqa: ANN001
    """Largest |log p_tbuild - log p_export| over every reference token (EOS included)."""
    tok, model = translator.tokenizer, translator.model
    pairs = [(s, r) for s, r in zip(sources, references, strict=True) if s.strip() and r.strip()]
    pairs = pairs[:TEACHER_FORCED_LINES]
    if not pairs:
        return 0.0
    limit = translator.max_source_tokens
    src_ids = encode_sources(tok, [s for s, _ in pairs], limit)
    tgt_ids = [ids[: limit - 1] for ids in tok.encode([r for _, r in pairs])]
    results = ct2.score_batch([[tok.sp.id_to_piece(i) for i in s[:-1]] for s in src_ids],
                              [[tok.sp.id_to_piece(i) for i in t] for t in tgt_ids], max_input_length=0)
    worst = 0.0
    device = translator.policy.device
    for s, t, r in zip(src_ids, tgt_ids, results, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([s], device=device), torch.tensor([[BOS] + t], device=device))
        gold = torch.tensor(t + [EOS], device=device)
        ours = logits[0].float().log_softmax(-1).gather(-1, gold[:, None]).squeeze(-1).cpu()
        worst = max(worst, (ours - torch.tensor(r.log_probs)).abs().max().item())
    return worst


def check_parity(run: Run, translator: Translator, exported: Path, sources: list[str],
                 references: list[str], *, after_batch=lambda: None) -> ParityReport:  # noqa: ANN001
    """Decode ``sources`` with tbuild and with the CTranslate2 model in ``exported`` (CPU, float32
    unless quantized) at the run's beam and α, and compare (``ParityReport``)."""
    import ctranslate2
    import sacrebleu

    decode = run.spec.decode
    hyps = translate(translator, sources, decode, after_batch=after_batch)
    ours = [translator.tokenizer.decode(h[0].tokens) if h else "" for h in hyps]
    ct2 = ctranslate2.Translator(str(exported), device="cpu")
    theirs = ct2_translate(ct2, translator, sources, decode)
    same = [a == b for a, b in zip(ours, theirs, strict=True)]
    first = next(((i + 1, ours[i], theirs[i]) for i, ok in enumerate(same) if not ok), None)
    return ParityReport(
        sentences=len(sources), beam=decode.beam, alpha=decode.alpha,
        bleu_tbuild=sacrebleu.corpus_bleu(ours, [references]).score,
        bleu_export=sacrebleu.corpus_bleu(theirs, [references]).score,
        identical=sum(same) / max(1, len(same)), first_difference=first,
        max_logprob_diff=teacher_forced_diff(ct2, translator, sources, references),
    )
