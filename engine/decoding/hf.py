"""Decoding a run's Hugging Face export (``export/hf.py``: MarianMTModel or PegasusForConditionalGeneration)
with ``generate`` under tbuild's conventions, so that its output compares with the native engine's
(``native.py``, ``search.py``):

- Length penalty: ``generate`` runs with length_penalty 0 (raw log-probs; HF divides by |Y|^α, tbuild by
  ((5+|Y|)/6)^α), returns its ``beam`` finished hypotheses, and they are re-ranked with tbuild's lp.
  ``early_stopping="never"``: HF's exact stopping rule for length_penalty 0 (no live beam can still
  beat the finished ones).
- Length limit: |Y| ≤ floor(a·|X| + b), EOS counted (``search.max_lengths``), capped by the decoder's
  positions, per sentence (``RowLimits``: at its limit a row may only take EOS, scored with the model's
  log p(EOS), as tbuild does); the vocabulary's pad, bos and start are never generated (suppress_tokens);
  no minimum length.
What still differs at beam > 1: HF's stopping test compares raw log-probs, so at α > 0 tbuild may go on
to a longer hypothesis that its length penalty prefers. Greedy log-probs are the raw logits' log-softmax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tbuild.components.specs.special import Specials

from .native import limited_batches
from .request import DecodeRequest
from .search import Hypothesis, length_penalty


def _tokens(row: list[int], stop: int) -> list[int]:
    """Output ids of one generated row (decoder start first, padding after EOS) without the start and EOS."""
    out = row[1:]
    return out[: out.index(stop)] if stop in out else out


class RowLimits:
    """A ``generate`` logits processor: a row whose next token makes |Y| = its limit may only take EOS
    (the others -inf; EOS keeps its score, so the beam scores it with the model's log p(EOS))."""

    def __init__(self, limits: torch.Tensor, start: int, stop: int) -> None:
        self.limits, self.start = limits, start  # (rows,) |Y| limits; tokens before the first generated one
        self.stop = stop  # EOS

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        forced = input_ids.size(1) - self.start + 1 >= self.limits.to(scores.device)  # (rows,)
        if forced.any():
            eos = scores[:, self.stop].clone()
            scores = scores.masked_fill(forced[:, None], float("-inf"))
            scores[:, self.stop] = torch.where(forced, eos, scores[:, self.stop])
        return scores


def _generate(hf: Any, sources: list[list[int]], limits: list[int], spec: DecodeRequest,
              special: Specials) -> list[list[Hypothesis]]:
    """One padded batch through ``generate``: up to ``spec.beam`` hypotheses per source, best first."""
    from transformers import LogitsProcessorList

    width = max(map(len, sources))
    ids = torch.tensor([s + [special.fill] * (width - len(s)) for s in sources], device=hf.device)  # (B, S)
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sources], device=hf.device)
    greedy = spec.beam == 1
    beam_args = {} if greedy else {"length_penalty": 0.0, "early_stopping": "never"}
    rows = torch.tensor(limits).repeat_interleave(spec.beam)  # generate expands each source to beam rows
    with torch.inference_mode():
        out = hf.generate(input_ids=ids, attention_mask=mask, num_beams=spec.beam,
                          num_return_sequences=spec.beam, max_length=max(limits) + 1,  # + the decoder start token
                          min_length=0, do_sample=False, decoder_start_token_id=special.start,
                          forced_eos_token_id=None, suppress_tokens=list(special.never) or None, bad_words_ids=None,
                          return_dict_in_generate=True,
                          logits_processor=LogitsProcessorList([RowLimits(rows, 1, special.stop)]),
                          output_scores=not greedy, output_logits=greedy, **beam_args)
    seqs = out.sequences.tolist()
    if greedy:  # the model's own log-probs, as tbuild's (HF's processed scores are -inf at banned ids)
        steps = torch.stack(out.logits, 1).float().log_softmax(-1)  # (B, L, V)
        chosen = steps.gather(-1, out.sequences[:, 1:, None]).squeeze(-1)  # (B, L)
        scores = [chosen[i, : len(_tokens(r, special.stop)) + 1].sum().item() for i, r in enumerate(seqs)]
    else:
        scores = out.sequences_scores.tolist()
    hyps: list[list[Hypothesis]] = []
    for i in range(len(sources)):
        mine = [(seqs[j], scores[j]) for j in range(i * spec.beam, (i + 1) * spec.beam)]
        ranked = [Hypothesis(t, s / length_penalty(len(t) + 1, spec.alpha), s)
                  for t, s in ((_tokens(r, special.stop), s) for r, s in mine)]
        hyps.append(sorted(ranked, key=lambda h: -h.score))
    return hyps


def hf_search(hf: Any, sources: list[list[int]], spec: DecodeRequest, max_output_len: int | None, special: Specials,
              progress: Callable[[int], None] = lambda _: None,
              after_batch: Callable[[], None] = lambda: None) -> list[list[Hypothesis]]:
    """The ``spec.nbest`` best hypotheses per source (ids ending with EOS; an empty source gives none)
    from an exported MarianMTModel or PegasusForConditionalGeneration, in input order, batched by length
    (module docstring)."""
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for rows, limits in limited_batches(sources, spec, max_output_len):
        for i, hyps in zip(rows, _generate(hf, [sources[i] for i in rows], limits, spec, special), strict=True):
            results[i] = hyps[: spec.nbest]
        after_batch()
        progress(len(rows))
    return results
