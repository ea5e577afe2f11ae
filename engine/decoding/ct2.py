"""Decoding through CTranslate2: the run's export (``RUN/ctranslate2-<quantization>/``, cached by
``export/cache.py``) searched under tbuild's conventions, so that its input and output behave as the
native engine's (``native.py``).

tbuild's conventions in CTranslate2's search (what still differs: ``engine/export/parity.py``):
- Length penalty: CTranslate2 runs with length_penalty 0 (raw log-probs) and returns its ``beam``
  finished hypotheses; they are re-ranked with tbuild's lp ((5+|Y|)/6)^α, |Y| counting EOS.
- Length limit: |Y| ≤ floor(a·|X| + b), EOS counted in both (``search.max_lengths``), capped by the
  decoder's max_positions; the vocabulary's pad, bos and start are never generated; no minimum length.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.tokenizer import Tokenizer, run_tokenizer
from ..errors import TbuildError
from ..extras import require
from ..run.directory import Run
from .native import DEFAULT_MAX_SOURCE, encode_constraints, encode_sources, limited_batches
from .request import NO_HOOKS, DecodeRequest, Hooks, check_request
from .search import Hypothesis, length_penalty


def ct2_search(ct2: Any, tok: Tokenizer, sources: list[list[int]], spec: DecodeRequest, max_output_len: int | None,
               progress: Callable[[int], None] = lambda _: None,
               after_batch: Callable[[], None] = lambda: None,
               prefixes: list[list[int]] | None = None, banned: list[list[int]] = (),
               token_scores: bool = False) -> list[list[Hypothesis]]:
    """The ``spec.nbest`` best hypotheses per source (ids ending with EOS; an empty source gives none)
    from a ``ctranslate2.Translator``, in input order, batched by length (module docstring).

    The runtime takes one length limit per call, tbuild one per sentence. Beam search runs each batch
    once at its largest limit; a row whose hypotheses all stay below its own limit got what a run at
    that limit gives (with length penalty 0 the search ends when its ``beam``-th hypothesis finishes,
    so it never reached the own limit), and only the other rows run again at their own limits (one
    call per limit). (300 test2016 sentences at beam 4, a 20-minute model: 15 calls, 30 rows run
    twice.) Sampling and target prefixes run one call per limit at once (a second draw would differ;
    a prefix raises its row's limit as the native search does). ``banned``: phrases (ids) no output
    may contain, for every source (the runtime's ``suppress_sequences``). ``token_scores``: each
    token's log-probability, where the runtime returns its logits (greedy search only)."""
    extra = {"banned": banned, "token_scores": token_scores and spec.beam == 1 and spec.sampling is None}
    results: list[list[Hypothesis]] = [[] for _ in sources]
    once = spec.sampling is not None or prefixes is not None
    for rows, row_limits in limited_batches(sources, spec, max_output_len):
        if prefixes is not None:
            row_limits = [min(max(lim, len(prefixes[i]) + 1), max_output_len or lim + len(prefixes[i]) + 1)
                          for i, lim in zip(rows, row_limits, strict=True)]
        limits = dict(zip(rows, row_limits, strict=True))
        by_limit: dict[int, list[int]] = {}
        if once:
            for i in rows:
                by_limit.setdefault(limits[i], []).append(i)
        else:
            by_limit = _first_pass(ct2, tok, sources, spec, limits, results, extra)
        for limit, group in by_limit.items():
            group_prefixes = None if prefixes is None else [prefixes[i] for i in group]
            outs = _translate(ct2, tok, [sources[i] for i in group], spec, limit, group_prefixes, **extra)
            for i, out in zip(group, outs, strict=True):
                results[i] = _rerank(tok, out, spec.alpha)[: spec.nbest]
        after_batch()
        progress(len(rows))
    return results


def _first_pass(ct2: Any, tok: Tokenizer, sources: list[list[int]], spec: DecodeRequest, limits: dict[int, int],
                results: list[list[Hypothesis]], extra: dict) -> dict[int, list[int]]:
    """Beam search of a batch at its largest limit: fills ``results`` for the rows it settles and
    returns the others grouped by their own limit."""
    rows, top = list(limits), max(limits.values())
    again: dict[int, list[int]] = {}
    for i, out in zip(rows, _translate(ct2, tok, [sources[i] for i in rows], spec, top, **extra), strict=True):
        if limits[i] == top or max(len(h) for h in out.hypotheses) < limits[i] - 1:
            results[i] = _rerank(tok, out, spec.alpha)[: spec.nbest]
        else:
            again.setdefault(limits[i], []).append(i)
    return again


def _translate(ct2: Any, tok: Tokenizer, sources: list[list[int]], spec: DecodeRequest, limit: int,
               prefixes: list[list[int]] | None = None, banned: list[list[int]] = (),
               token_scores: bool = False) -> list[Any]:
    """CTranslate2's finished hypotheses per source at output length limit ``limit`` (EOS counted): the
    ``beam`` best, or ``nbest`` samples; never the vocabulary's pad, bos or start, or a ``banned`` phrase."""
    before, after = map(len, tok.special.around("source"))
    pieces = [[tok.sp.id_to_piece(t) for t in source[before:len(source) - after]]
              for source in sources]  # the runtime adds what the vocabulary adds (the export's config)
    never = [[i] for i in tok.special.never]
    suppress = [[tok.sp.id_to_piece(t) for t in phrase] for phrase in [*never, *banned]]
    options: dict[str, Any] = {"beam_size": spec.beam, "num_hypotheses": spec.beam}
    if spec.sampling is not None:
        options = {"beam_size": 1, "num_hypotheses": spec.nbest, "sampling_temperature": spec.temperature,
                   "sampling_topk": spec.topk if spec.sampling == "topk" else 0,
                   "sampling_topp": spec.topp if spec.sampling == "topp" else 1.0}
    if prefixes is not None:
        options["target_prefix"] = [[tok.sp.id_to_piece(t) for t in p] or None for p in prefixes]
    if token_scores:
        options["return_logits_vocab"] = True
    return ct2.translate_batch(pieces, length_penalty=0.0, return_scores=True, min_decoding_length=0,
                               max_decoding_length=limit - 1, max_input_length=0, suppress_sequences=suppress,
                               no_repeat_ngram_size=spec.no_repeat_ngram, **options)


def _rerank(tok: Tokenizer, result: Any, alpha: float) -> list[Hypothesis]:
    """CTranslate2's finished beams (raw log-probs, EOS step included) ranked by tbuild's score
    log P / lp(|Y|), |Y| counting EOS; with each token's log-probability where it returned logits."""
    logits = getattr(result, "logits", None) or [None] * len(result.hypotheses)
    hyps = []
    for pieces, log_p, steps in zip(result.hypotheses, result.scores, logits, strict=True):
        ids = [tok.sp.piece_to_id(p) for p in pieces]
        hyps.append(Hypothesis(ids, log_p / length_penalty(len(pieces) + 1, alpha), log_p,
                               _token_log_probs(steps, ids, tok.special.stop) if steps else []))
    return sorted(hyps, key=lambda h: -h.score)


def _token_log_probs(steps: list[Any], ids: list[int], stop: int) -> list[float]:
    """The log-probability of each token (EOS last, when the runtime took an EOS step) from the
    runtime's per-step logits over the vocabulary."""
    import numpy as np
    import torch

    lprobs = torch.as_tensor(np.stack([np.asarray(step) for step in steps])).float().log_softmax(-1)
    chosen = (ids + [stop])[: lprobs.size(0)]
    return lprobs[torch.arange(len(chosen)), torch.tensor(chosen)].tolist()


@dataclass
class CTranslate2Engine:
    """A run's CTranslate2 export, with the ``NativeEngine``'s ``translate`` shape."""

    ct2: Any  # ctranslate2.Translator
    tokenizer: Tokenizer
    weights: str  # which weights were exported, for reports
    quantization: str
    device: str  # cpu or cuda
    max_source_tokens: int
    max_output_len: int | None
    name = "ctranslate2"

    @property
    def precision(self) -> str:
        return f"{self.quantization} ({self.device})"

    def translate(self, lines: list[str], request: DecodeRequest, hooks: Hooks = NO_HOOKS) -> list[list[Hypothesis]]:
        """As ``translator.translate``: empty lines give no hypothesis, over-long lines are truncated
        with the same warning; sampling (seeded by ``request.seed``), target prefixes, n-gram blocking
        and phrases to exclude map to CTranslate2's own options (lines grouped by their excluded
        phrases, which the runtime takes per call); what it lacks is refused (``request.LACKS``). Token
        log-probabilities (jsonl) with greedy search only (the runtime returns no logits from its beam
        search)."""
        import ctranslate2

        check_request(self.name, request)
        spec, warn = request, hooks.warn
        sources = encode_sources(self.tokenizer, lines, self.max_source_tokens, warn)
        targets = self.tokenizer.encode(list(spec.prefixes)) if spec.prefixes else None
        _, exclude = encode_constraints(self.tokenizer, spec.constraints)
        groups: dict[str, list[int]] = {}
        for i in range(len(sources)):
            groups.setdefault(json.dumps(exclude[i] if exclude else []), []).append(i)
        results: list[list[Hypothesis]] = [[] for _ in sources]
        ctranslate2.set_random_seed(spec.seed)
        for key, rows in groups.items():
            found = ct2_search(self.ct2, self.tokenizer, [sources[i] for i in rows], spec, self.max_output_len,
                               hooks.progress, hooks.after_batch,
                               None if targets is None else [targets[i] for i in rows], json.loads(key),
                               spec.token_scores)
            for i, hyps in zip(rows, found, strict=True):
                results[i] = hyps
        return results

    def alignments(self, lines: list[str], results: list[list[Hypothesis]]) -> list[list[int]]:
        check_request(self.name, DecodeRequest(format="jsonl", align=True))
        return []


def ct2_device(device: str) -> str:
    """``device`` for CTranslate2 (auto: CUDA when CTranslate2 sees a GPU); refuses a missing package
    or a device it does not know."""
    ctranslate2 = require("ctranslate2", "tbuild[export]", "--engine ctranslate2")
    if device not in ("auto", "cpu", "cuda"):
        raise TbuildError(f"--device must be auto, cpu or cuda, not {device!r}")
    if device == "auto":
        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    return device


def open_ct2_translator(run: Run, folder: Path, weights: str, *, quantization: str,
                        device: str) -> CTranslate2Engine:
    """The run's CTranslate2 export in ``folder`` (holding ``weights``) loaded on ``device`` (``ct2_device``)."""
    import ctranslate2

    max_positions = run.spec.model.max_positions
    return CTranslate2Engine(ctranslate2.Translator(str(folder), device=device),
                                 run_tokenizer(folder / run.dir.tokenizer.name, run.spec), weights, quantization,
                                 device,
                                 max_positions or DEFAULT_MAX_SOURCE, max_positions)
