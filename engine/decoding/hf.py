"""Decoding a run's Hugging Face export (``export/hf.py``) with ``MarianMTModel.generate`` under tbuild's
conventions, so that its output compares with the native engine's (``translator.py``, ``search.py``):

- Length penalty: ``generate`` runs with length_penalty 0 (raw log-probs; HF divides by |Y|^α, tbuild by
  ((5+|Y|)/6)^α), returns its ``beam`` finished hypotheses, and they are re-ranked with tbuild's lp.
  ``early_stopping="never"``: HF's exact stopping rule for length_penalty 0 (no live beam can still
  beat the finished ones).
- Length limit: |Y| ≤ floor(a·|X| + b), EOS counted (``search.max_lengths``) = new tokens, capped by
  the decoder's positions; EOS is forced at the limit (forced_eos_token_id), PAD and BOS are never
  generated (suppress_tokens); no minimum length.
What still differs: a hypothesis cut at the limit scores its forced EOS as log 1 = 0 in HF's beam
(tbuild: the model's log p(EOS)); greedy log-probs are recomputed from the raw logits, so they agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tbuild.builder.schema import DecodeSpec
from tbuild.builder.tokens import BOS, EOS, PAD

from .search import Hypothesis, length_penalty, max_lengths
from .translator import length_batches


def _tokens(row: list[int]) -> list[int]:
    """Output ids of one generated row (decoder start first, PAD after EOS) without BOS and EOS."""
    out = row[1:]
    return out[: out.index(EOS)] if EOS in out else out


def _generate(hf: Any, sources: list[list[int]], spec: DecodeSpec, limit: int) -> list[list[Hypothesis]]:
    """One padded batch through ``generate``: up to ``spec.beam`` hypotheses per source, best first."""
    width = max(map(len, sources))
    ids = torch.tensor([s + [PAD] * (width - len(s)) for s in sources], device=hf.device)  # (B, S)
    greedy = spec.beam == 1
    beam_args = {} if greedy else {"length_penalty": 0.0, "early_stopping": "never"}
    with torch.inference_mode():
        out = hf.generate(input_ids=ids, attention_mask=ids.ne(PAD), num_beams=spec.beam,
                          num_return_sequences=spec.beam, max_length=limit + 1,  # + the decoder start token
                          min_length=0, do_sample=False, decoder_start_token_id=BOS, forced_eos_token_id=EOS,
                          suppress_tokens=[PAD, BOS], bad_words_ids=None, return_dict_in_generate=True,
                          output_scores=not greedy, output_logits=greedy, **beam_args)
    rows = out.sequences.tolist()
    if greedy:  # the model's own log-probs, as tbuild's (HF's processed scores are -inf at banned ids)
        steps = torch.stack(out.logits, 1).float().log_softmax(-1)  # (B, L, V)
        chosen = steps.gather(-1, out.sequences[:, 1:, None]).squeeze(-1)  # (B, L)
        scores = [chosen[i, : len(_tokens(r)) + 1].sum().item() for i, r in enumerate(rows)]
    else:
        scores = out.sequences_scores.tolist()
    hyps: list[list[Hypothesis]] = []
    for i in range(len(sources)):
        mine = [(rows[j], scores[j]) for j in range(i * spec.beam, (i + 1) * spec.beam)]
        ranked = [Hypothesis(_tokens(r), s / length_penalty(len(_tokens(r)) + 1, spec.alpha), s) for r, s in mine]
        hyps.append(sorted(ranked, key=lambda h: -h.score))
    return hyps


def hf_search(hf: Any, sources: list[list[int]], spec: DecodeSpec, max_output_len: int | None,
              progress: Callable[[int], None] = lambda _: None,
              after_batch: Callable[[], None] = lambda: None) -> list[list[Hypothesis]]:
    """The ``spec.nbest`` best hypotheses per source (ids ending with EOS; an empty source gives none)
    from a ``MarianMTModel``, in input order, batched by length (module docstring)."""
    results: list[list[Hypothesis]] = [[] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    for batch in length_batches([len(sources[i]) for i in todo], spec.batch_tokens):
        rows = [todo[j] for j in batch]
        lengths = torch.tensor([len(sources[i]) for i in rows])
        pad = torch.arange(int(lengths.max()))[None, :] >= lengths[:, None]  # (B, S) as the native search sees it
        by_limit: dict[int, list[int]] = {}
        for i, limit in zip(rows, max_lengths(pad, spec.max_len_a, spec.max_len_b, max_output_len).tolist(),
                            strict=True):
            by_limit.setdefault(limit, []).append(i)
        for limit, group in by_limit.items():
            for i, hyps in zip(group, _generate(hf, [sources[i] for i in group], spec, limit), strict=True):
                results[i] = hyps[: spec.nbest]
        after_batch()
        progress(len(rows))
    return results
