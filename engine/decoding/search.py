"""Beam search with length penalty (§6.1) and plain greedy decoding.

Conventions (as fairseq): every length counts the EOS token, |Y| = len(tokens) + 1.

- score(Y) = log P(Y|X) / lp(|Y|), log P summed over the output tokens including EOS, with
  lp(|Y|) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, the paper's ref [31]).
- max_len = floor(max_len_a · src_len + max_len_b), src_len = the source's tokens (its padding mask tells
  them), bounds |Y|: at |Y| = max_len the only possible token is EOS (so at most max_len - 1 real tokens).
  At least 1.
- The output starts from the vocabulary's start id and ends at its EOS; pad, bos and the start are never
  generated (``Specials.never``: the ids of the model's ``special``); log-probs are the model's (not
  renormalised after that).

Legend: B sentences, k beam, n live sentences, r rows per live sentence (1 at the first step, k
after), N = n·r decoder rows, t tokens generated so far, V vocabulary, S source length.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from tbuild.builder.spec.decode import PATIENCE
from tbuild.components.specs.special import Specials

from .constraints import Phrases, Progress, ban_phrases, constrained_candidates
from .model import Cache, SearchModel, Seq2Seq, search_model

NEG_INF = float("-inf")
STOPPING = ("exact", "beam", "patience")  # when a sentence stops (beam_search's docstring)


@dataclass
class Hypothesis:
    """One finished output."""

    tokens: list[int]  # output ids without BOS, without EOS
    score: float  # log P(Y|X) / lp(|Y|)
    log_prob: float  # log P(Y|X) including the EOS step
    token_log_probs: list[float] = field(default_factory=list)  # log P of each token, EOS last (native only)
    complete: bool = True  # every positive lexical constraint is in the output


def length_penalty(length: int | torch.Tensor, alpha: float) -> float | torch.Tensor:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016; §6.1 uses alpha = 0.6); |Y| counts EOS. The
    one definition: a length, or a tensor of them (float64 for the search's stopping bound)."""
    return ((5 + length) / 6) ** alpha


Cap = int | torch.Tensor | None  # the longest |Y| the decoder's positions allow: one, per sentence (B,), or none


def capped(limit: torch.Tensor, cap: Cap) -> torch.Tensor:
    """(B,) ``limit`` at most ``cap`` (one for all, or each sentence's)."""
    if cap is None:
        return limit
    if isinstance(cap, int):
        return limit.clamp(max=cap)
    return torch.minimum(limit, cap.to(limit.device))


def max_lengths(pad: torch.Tensor, max_len_a: float, max_len_b: int, cap: Cap = None) -> torch.Tensor:
    """(B,) longest |Y| per sentence: floor(a · src_len + b), at most ``cap`` (the decoder's position
    limit, if it has one; a prefix LM's is each sentence's), at least 1, from the padding mask (B, S)."""
    src_len = (~pad).sum(1).double()
    # 1e-9: a decimal `a` such as 1.15 is not exact in binary; floor(1.15 · 20) must be 23, not 22.
    return capped(torch.floor(max_len_a * src_len + max_len_b + 1e-9).long(), cap).clamp(min=1)


def _ban(logits: torch.Tensor, length: int, min_len: int, forced: torch.Tensor, special: Specials) -> torch.Tensor:
    """Apply, in place on (N, V) logits or log-probs, the tokens a row may not take when choosing EOS
    now makes |Y| = length: ``special.never`` (pad, bos, the start) always, EOS while length < min_len,
    and anything but EOS in rows with ``forced`` (N,) set (at their max_len; this has priority over min_len)."""
    stop = special.stop
    eos = logits[:, stop].clone()
    if special.never:
        logits[:, list(special.never)] = NEG_INF
    if length < min_len:
        logits[:, stop] = NEG_INF
    if forced.any():
        logits.masked_fill_(forced[:, None], NEG_INF)
        logits[:, stop] = torch.where(forced, eos, logits[:, stop])
    return logits


def log_softmax_(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the last dimension, in place: a step's (N, V) logits are the largest tensor of
    the search, and a fresh one per step pays for the new memory's first writes (docs/benchmarks.md).
    Same values as ``logits.log_softmax(-1)``."""
    return torch.log_softmax(logits, -1, out=logits)


def row_topk(x: torch.Tensor, k: int, chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.topk(k, dim=1)`` for (N, V) rows, through chunk maxima: a row's k largest values lie in
    the k chunks with the largest maxima (any other chunk's values are each below k chunk maxima),
    so only those k·chunk values are ranked. One vectorised max over V instead of a selection over
    V per row (faster at a search's sizes: docs/benchmarks.md)."""
    n, vocab = x.shape
    whole = vocab // chunk
    if whole <= k:
        return x.topk(k, dim=1)
    maxima = x[:, : whole * chunk].view(n, whole, chunk).amax(-1)  # (N, V/chunk)
    starts = maxima.topk(k, dim=1).indices.mul_(chunk)  # (N, k)
    index = (starts.unsqueeze(-1) + torch.arange(chunk, device=x.device)).view(n, k * chunk)
    if whole * chunk < vocab:  # the ragged tail is always a candidate
        index = torch.cat([index, torch.arange(whole * chunk, vocab, device=x.device).expand(n, -1)], 1)
    values, pick = x.gather(1, index).topk(k, dim=1)
    return values, index.gather(1, pick)


LogitsFilter = Callable[[torch.Tensor], torch.Tensor]  # (N, V) log-weights -> (N, V), -inf where cut


def temperature(value: float) -> LogitsFilter:
    """Divide by ``value`` (-> 0: all mass on the argmax, i.e. greedy)."""
    scale = max(value, 1e-6)
    return lambda x: x / scale


def top_k(k: int) -> LogitsFilter:
    """Keep each row's ``k`` best tokens (all of them when k is 0 or at least the vocabulary)."""

    def cut(x: torch.Tensor) -> torch.Tensor:
        if not 0 < k < x.size(-1):
            return x
        values, index = row_topk(x, k)
        return torch.full_like(x, NEG_INF).scatter_(1, index, values)

    return cut


def top_p(p: float) -> LogitsFilter:
    """Keep each row's smallest set of best tokens holding ``p`` of the mass (nucleus sampling,
    Holtzman et al. 2020); p = 1 keeps all."""

    def cut(x: torch.Tensor) -> torch.Tensor:
        if p >= 1.0:
            return x
        values, index = x.sort(dim=-1, descending=True)
        probs = values.softmax(-1)
        before = probs.cumsum(-1) - probs  # mass of the better tokens: keep while it is below p
        return torch.empty_like(x).scatter_(1, index, values.masked_fill(before >= p, NEG_INF))

    return cut


@dataclass(frozen=True)
class Sampling:
    """The step that draws instead of ranking: each row draws its next token from the model's
    distribution passed through ``filters`` in order (e.g. temperature then top-k)."""

    filters: tuple[LogitsFilter, ...] = ()
    generator: torch.Generator | None = None

    def weights(self, lprobs: torch.Tensor) -> torch.Tensor:
        """(N, V) log-weights to draw from: the filters applied in order."""
        x = lprobs
        for keep in self.filters:
            x = keep(x)
        return x

    def candidates(self, lprobs: torch.Tensor, logp: torch.Tensor, k: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """k drawn candidates per sentence: k draws from its one row at the first step, then one per
        row. Returns cumulative log-probs (the model's), parent rows and tokens, each (n, k)."""
        n, rows = logp.shape
        draws = k // rows
        probs = self.weights(lprobs).softmax(-1)
        token = torch.multinomial(probs, draws, replacement=True, generator=self.generator)  # (N, draws)
        top = lprobs.gather(1, token).add_(logp.view(-1, 1)).view(n, k)
        parent = torch.arange(rows, device=logp.device).repeat_interleave(draws).expand(n, k)
        return top, parent, token.view(n, k)


class Ranking:
    """The beam search step: the 2k best (prefix, token) extensions of each sentence (``_top_candidates``)."""

    @staticmethod
    def candidates(lprobs: torch.Tensor, logp: torch.Tensor, k: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _top_candidates(lprobs, logp, 2 * k, k)


RANKING = Ranking()


class StepRule(Protocol):
    """A ban applied every step: -inf, in place on (N, V) log-probs, for what rows with ``history`` (N, t)
    may not take next (``sent``: each live sentence's batch index, ``rows`` per sentence, ``limit`` (n,)
    each live sentence's max |Y|, EOS counted)."""

    def ban(self, lprobs: torch.Tensor, history: torch.Tensor, sent: torch.Tensor, rows: int,
            limit: torch.Tensor | None) -> None: ...


@dataclass
class Rules:
    """What constrains each step besides the length limits: a forced target prefix per sentence,
    n-gram blocking and lexical constraints (``constraints.py``)."""

    prefix: torch.Tensor | None = None  # (B, P) target ids forced first, right-padded
    prefix_len: torch.Tensor | None = None  # (B,) each prefix's length (its padding: columns past it)
    no_repeat_ngram: int = 0  # n: no n-gram twice in an output (0: off)
    include: Phrases | None = None  # phrases each output must contain (B sentences)
    exclude: Phrases | None = None  # phrases no output may contain, right-aligned (B sentences)
    step_rule: StepRule | None = None  # any other ban, e.g. well-formed trees (parsing/constrained.py)

    def apply(self, lprobs: torch.Tensor, history: torch.Tensor, sent: torch.Tensor, rows: int,
              limit: torch.Tensor | None = None) -> None:
        """Ban, in place on (N, V) log-probs, what the rules forbid at step t = history.size(1)."""
        t, n = history.size(1), self.no_repeat_ngram
        if 0 < n <= t:
            grams = history.unfold(1, n, 1)  # (N, G, n) the n-grams so far
            match = grams[..., :-1].eq(history[:, t - n + 1:].unsqueeze(1)).all(-1)  # (N, G) same n-1 prefix
            banned = torch.full(match.shape, NEG_INF, device=lprobs.device).masked_fill_(~match, math.inf)
            lprobs.scatter_reduce_(1, grams[..., -1], banned, reduce="amin")  # -inf where an n-gram would repeat
        if self.exclude is not None:
            ban_phrases(lprobs, history, self.exclude.rows(sent, rows))
        if self.step_rule is not None:
            self.step_rule.ban(lprobs, history, sent, rows, limit)
        if self.prefix is not None and self.prefix_len is not None and t < self.prefix.size(1):
            token = self.prefix[sent, t].repeat_interleave(rows).unsqueeze(1)  # (N, 1), padding past a prefix
            forced = self.prefix_len[sent].gt(t).repeat_interleave(rows).unsqueeze(1)  # (N, 1): within the prefix
            kept = lprobs.gather(1, token)
            lprobs.masked_fill_(forced, NEG_INF)
            lprobs.scatter_(1, token, torch.where(forced, kept, lprobs.gather(1, token)))  # the forced token's own

    def limits(self, limit: torch.Tensor, cap: Cap) -> torch.Tensor:
        """Max |Y| per sentence, long enough for each prefix, its positive constraints and EOS."""
        if self.prefix is None and self.include is None:
            return limit
        need = torch.ones_like(limit)
        if self.prefix_len is not None:
            need += self.prefix_len.to(limit.device)
        if self.include is not None:
            need += self.include.total().to(limit.device)
        limit = torch.maximum(limit, need)
        return capped(limit, cap)  # a prefix past the cap is cut there


@dataclass
class _Beams:
    """The live part of a search. n live sentences, r rows each (N = n·r), t tokens so far."""

    sent: torch.Tensor  # (n,) original index of each live sentence
    limit: torch.Tensor  # (n,) max |Y|
    lp_limit: torch.Tensor  # (n,) lp(max |Y|)
    memory: Any  # the model's memory: one row per sentence, shared by its beams
    pad: torch.Tensor  # (n, S)
    cache: Cache
    last: torch.Tensor  # (N, 1) tokens fed this step
    history: torch.Tensor  # (N, t) tokens so far
    token_lp: torch.Tensor | None  # (N, t) each token's log-prob, when asked for
    logp: torch.Tensor  # (n, r) cumulative log-prob of each row
    progress: Progress | None = None  # (N) each row's positive constraints, when there are some
    rows: int = 1


def _start(model: SearchModel, src: torch.Tensor, src_pad: torch.Tensor | None, alpha: float, limit_args: tuple,
           rules: Rules, scores: bool) -> _Beams:
    """Encode the source once; one row per sentence, fed the vocabulary's start id."""
    memory, pad = model.encode(src, src_pad)
    batch, device = src.size(0), pad.device
    max_len_a, max_len_b, cap = limit_args
    limit = rules.limits(max_lengths(pad, max_len_a, max_len_b, cap).to(device), cap)
    return _Beams(sent=torch.arange(batch, device=device), limit=limit,
                  lp_limit=length_penalty(limit.double(), alpha),  # type: ignore[arg-type]
                  memory=memory, pad=pad, cache=model.new_cache(),
                  last=torch.full((batch, 1), model.special.start, dtype=torch.long, device=device),
                  history=torch.empty(batch, 0, dtype=torch.long, device=device),
                  token_lp=torch.empty(batch, 0, device=device) if scores else None,
                  logp=torch.zeros(batch, 1, device=device),
                  progress=None if rules.include is None else Progress.start(rules.include))


def _step_log_probs(model: SearchModel, b: _Beams, t: int, min_len: int, rules: Rules) -> torch.Tensor:
    """(N, V) log-probs of the next token, with every banned token at -inf."""
    forced = (t + 1 >= b.limit).repeat_interleave(b.rows)  # (N,)
    logits = model.step(b.last, b.memory, b.pad, b.cache, b.rows)  # (N, V)
    lprobs = _ban(log_softmax_(logits), t + 1, min_len, forced, model.special)  # the model's, not renormalised
    rules.apply(lprobs, b.history, b.sent, b.rows, b.limit)
    if b.progress is not None and rules.include is not None:  # no EOS before every constraint is met
        unmet = b.progress.unmet(rules.include.lengths[b.sent].repeat_interleave(b.rows, 0))
        lprobs[:, model.special.stop].masked_fill_(unmet & ~forced, NEG_INF)
    return lprobs


@torch.inference_mode()
def beam_search(model: Seq2Seq | SearchModel, src: torch.Tensor, *, beam: int, alpha: float, max_len_a: float,
                max_len_b: int, src_pad: torch.Tensor | None = None, nbest: int = 1, min_len: int = 0,
                max_len_cap: Cap = None, rules: Rules | None = None, sampling: Sampling | None = None,
                token_scores: bool = False, stopping: str = "exact", patience: float = PATIENCE
                ) -> list[list[Hypothesis]]:
    """Translate src (B, S) (right-padded ids, ``src_pad`` (B, S) True at the padding; None: none) with beam
    size ``beam``, from the model's start id to its EOS (``model.special``); per sentence up to ``nbest``
    distinct hypotheses, best score first (fewer only if fewer outputs have non-zero probability).

    Each step ranks the 2k best (prefix, token) candidates of a sentence by log-prob; EOS candidates
    among the first k become finished hypotheses and the k best others stay alive (fairseq and
    Hugging Face do the same). ``min_len`` (benchmarks) bans EOS while |Y| < min_len; ``max_len_cap``
    bounds every max_len (a decoder with learned positions has no position past max_positions; one
    bound, or each sentence's (B,): a prefix LM's prefix takes positions of its own).
    ``rules`` forces target prefixes, blocks repeated n-grams and holds lexical constraints (positive
    ones choose the beam by dynamic beam allocation, ``constraints.py``). With ``sampling`` (a step that draws
    through its logits filters), the k rows are k independent samples (``nbest`` = k of them, sorted by
    score): each draws its token instead of ranking.
    ``token_scores`` fills each hypothesis' ``token_log_probs``.

    Stopping. A sentence stops when its live beams cannot change its n-best list, which is then the
    list that running every beam to max_len would give. A live prefix with log-prob L (≤ 0) ends
    with log P ≤ L (log-probs only decrease) at some length m ≤ max_len, so it scores at most
    L / lp(m) ≤ L / max(lp(next length), lp(max_len)): for alpha ≥ 0 that is L / lp(max_len) (the
    longest ending is the least penalised); the max() also covers alpha < 0. The sentence stops once
    it has ``nbest`` finished hypotheses and the best live bound is ≤ the nbest-th finished score
    (the bound over the k-th would give the same list, only later), or when no row is alive.
    With beam = 1 the search is greedy, as in fairseq, tensor2tensor and Hugging Face: it stops at
    the first EOS, since the bound would otherwise keep a single beam looking for a longer output
    when alpha > 0, and returns exactly ``greedy_search``'s tokens.
    ``stopping="beam"`` stops a sentence once ``beam`` hypotheses have finished, as fairseq's
    sequence generator and Hugging Face's ``early_stopping=True`` do: fewer steps, and an n-best that a
    longer search could still improve (``exact``, the default, is the bound above).
    ``stopping="patience"`` stops it once ⌈patience · beam⌉ hypotheses have finished (Kasai et al.
    2022, "Beam Decoding with Controlled Patience"; ``beam`` is patience 1). Both also stop a sentence
    where the bound above already proves its n-best final: the same outputs, fewer steps.

    Batching: the source is encoded once and every step is one ``decode`` of all live rows. Memory,
    padding and cross-attention K/V keep one row per sentence, shared by its beams (``decode``
    folds the beams into the queries); self-attention K/V follow the surviving beams, and finished
    sentences leave the batch.
    """
    if beam < 1 or not 1 <= nbest <= beam:
        raise ValueError(f"need beam >= 1 and 1 <= nbest <= beam (got beam={beam}, nbest={nbest})")
    if stopping not in STOPPING:
        raise ValueError(f"stopping {stopping!r}: choose one of {', '.join(STOPPING)}")
    if patience < 1:
        raise ValueError(f"patience must be at least 1 (got {patience})")
    k, batch, rules, model = beam, src.size(0), rules or Rules(), search_model(model)
    choose: Sampling | Ranking = RANKING if sampling is None else sampling
    if sampling is not None and rules.include is not None:
        raise ValueError("positive lexical constraints need beam search, not sampling")
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    if batch == 0:
        return finished
    b = _start(model, src, src_pad, alpha, (max_len_a, max_len_b, max_len_cap), rules, token_scores)
    # nbest-th best finished score per sentence; +inf once a beam-1 (greedy) sentence has ended, or, stopping
    # at the beam or by patience, once it has its `keep` finished hypotheses (the n-best is their best nbest).
    threshold = torch.full((batch,), NEG_INF, dtype=torch.float64, device=b.pad.device)
    if sampling is not None and stopping == "patience":
        stopping = "beam"  # samples are not ranked: patience does not apply, and a sampled row stops as before
    keep = finished_kept(stopping, k, nbest, patience)
    for t in range(int(b.limit.max())):
        lprobs = _step_log_probs(model, b, t, min_len, rules)
        cand = _candidates(lprobs, b, k, rules, choose, token_scores)
        is_eos = cand.token.eq(model.special.stop)
        ends = is_eos[:, :k] & cand.top[:, :k].isfinite()  # (n, k) finished hypotheses this step
        if ends.any():
            _collect(ends, cand, b, t + 1, alpha, (nbest, keep), k == 1 or stopping != "exact", finished, threshold)
        if not _advance(model, b, t, cand, is_eos, k, alpha, threshold):
            break
    return [hyps[:nbest] for hyps in finished]


@dataclass
class _Candidates:
    """A step's candidates per live sentence, in the order the beam takes them, each (n, c)."""

    top: torch.Tensor  # cumulative log-prob
    row: torch.Tensor  # parent decoder row (in N)
    token: torch.Tensor
    step_lp: torch.Tensor | None  # the token's own log-prob, when asked for
    progress: Progress | None  # positive constraints after the token, when there are some
    complete: torch.Tensor | None  # True where the output holds every positive constraint


def _candidates(lprobs: torch.Tensor, b: _Beams, k: int, rules: Rules, choose: Sampling | Ranking,
                token_scores: bool) -> _Candidates:
    """The step's choice (ranked or drawn), or, with positive constraints, the candidates allocated to
    constraint banks (``constraints.py``)."""
    progress = complete = None
    if b.progress is None or rules.include is None:
        top, parent, token = choose.candidates(lprobs, b.logp, k)
    else:
        per_row = row_topk(lprobs, min(2 * k, lprobs.size(-1)))[1]
        if per_row.size(1) < 2 * k:  # tiny vocabularies: the row's worst candidate again fills the width
            per_row = torch.cat([per_row, per_row[:, -1:].expand(-1, 2 * k - per_row.size(1))], 1)
        top, parent, token, progress = constrained_candidates(lprobs, b.logp, b.progress,
                                                              rules.include.rows(b.sent, b.rows), 2 * k, per_row)
        complete = ~progress.unmet(rules.include.lengths[b.sent][:, None, :])
    row = torch.arange(top.size(0), device=top.device).unsqueeze(1) * b.rows + parent  # (n, c) in N
    step_lp = lprobs[row, token] if token_scores else None
    return _Candidates(top, row, token, step_lp, progress, complete)


def _top_candidates(lprobs: torch.Tensor, logp: torch.Tensor, width: int, k: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``width`` best (prefix, token) extensions of each sentence, best first.

    lprobs (N, V) of the n·r live rows, logp (n, r) their prefixes' log-probs. Returns the candidates'
    cumulative log-probs, parent row within the sentence and token, each (n, c) with c ≥ k (padded
    with impossible candidates for tiny vocabularies). A sentence's best ``width`` candidates are among
    its rows' own best ``width``, so each row's top ``width`` is taken first (N parallel searches) and
    only those n·r·width get the prefix log-prob and a second ranking: the same candidates as ranking
    all r·V of a sentence at once.
    """
    n, rows = logp.shape
    per_row = min(width, lprobs.size(-1))
    top, token = row_topk(lprobs, per_row)  # (N, w)
    top = top.add_(logp.view(-1, 1)).view(n, rows * per_row)
    top, pick = top.topk(min(width, rows * per_row), dim=1)  # (n, c)
    parent, token = pick.div(per_row, rounding_mode="floor"), token.view(n, rows * per_row).gather(1, pick)
    if top.size(1) < k:  # tiny vocabularies
        short = k - top.size(1)
        top = torch.cat([top, top.new_full((n, short), NEG_INF)], 1)
        parent, token = (torch.cat([x, x.new_zeros(n, short)], 1) for x in (parent, token))
    return top, parent, token


def _advance(model: SearchModel, b: _Beams, t: int, cand: _Candidates, is_eos: torch.Tensor, k: int,
             alpha: float, threshold: torch.Tensor) -> bool:
    """Keep the k best non-EOS candidates of each sentence (in rank order: a stable sort puts EOS
    last), drop the sentences that are done (module docstring: stopping) and follow the kept rows.
    False when no sentence is left."""
    keep_rank = is_eos.to(torch.uint8).argsort(dim=1, stable=True)[:, :k]  # (n, k)
    index, new_token = cand.row.gather(1, keep_rank), cand.token.gather(1, keep_rank)
    new_lp = None if cand.step_lp is None else cand.step_lp.gather(1, keep_rank)
    new_logp = cand.top.gather(1, keep_rank).masked_fill(is_eos.gather(1, keep_rank), NEG_INF)  # (n, k)
    lp_future = torch.clamp(b.lp_limit, min=length_penalty(t + 2, alpha))  # (n,)
    done = (t + 1 >= b.limit) | (new_logp.amax(1).double() / lp_future <= threshold[b.sent])  # (n,)
    kept = None
    if done.any():
        kept = (~done).nonzero().squeeze(1)  # live sentences that stay
        if kept.numel() == 0:
            return False
        index, new_token, new_logp = index[kept], new_token[kept], new_logp[kept]
        new_lp = None if new_lp is None else new_lp[kept]
        b.sent, b.limit, b.lp_limit, b.pad = b.sent[kept], b.limit[kept], b.lp_limit[kept], b.pad[kept]
        b.memory = model.select(b.memory, kept)
    if cand.progress is not None:
        b.progress = cand.progress.take(keep_rank, kept)
    index = index.view(-1)  # (n'·k,)
    b.cache.reorder(index, sources=kept)
    b.history = torch.cat([b.history.index_select(0, index), new_token.view(-1, 1)], 1)  # (n'·k, t+1)
    if b.token_lp is not None and new_lp is not None:
        b.token_lp = torch.cat([b.token_lp.index_select(0, index), new_lp.view(-1, 1)], 1)
    b.last, b.logp, b.rows = new_token.view(-1, 1), new_logp, k
    return True


def finished_kept(stopping: str, k: int, nbest: int, patience: float) -> int:
    """How many finished hypotheses a sentence keeps (``beam_search``'s stopping): its n-best under
    ``exact``; the first k, or ⌈patience · k⌉, whose arrival stops it, under ``beam`` or ``patience``."""
    if stopping == "exact" or k == 1:  # beam 1 is greedy: its first EOS ends it
        return nbest
    return max(nbest, k if stopping == "beam" else math.ceil(patience * k - 1e-9))  # 1e-9: 0.7 · 10 is 7.000…01


def _collect(ends: torch.Tensor, cand: _Candidates, b: _Beams, length: int, alpha: float, sizes: tuple[int, int],
             ends_all: bool, finished: list[list[Hypothesis]], threshold: torch.Tensor) -> None:
    """Add this step's finished hypotheses (``ends`` (n, k) over the ranked candidates) to
    ``finished``, each sentence's list kept sorted best first and at most ``keep`` long (``sizes``:
    nbest, keep), and update ``threshold``: the nbest-th best score once there is one, +inf when a full
    list ``ends_all`` the sentence. With positive constraints, an output missing one (ended by its length
    limit) is kept only while no output holds them all."""
    nbest, keep = sizes
    lp = length_penalty(length, alpha)
    where = ends.nonzero()
    src_rows = cand.row[where[:, 0], where[:, 1]]
    prefixes = b.history[src_rows].tolist()
    token_lps = [[] for _ in prefixes] if b.token_lp is None else b.token_lp[src_rows].tolist()
    eos_lps = [] if cand.step_lp is None else cand.step_lp[where[:, 0], where[:, 1]].tolist()
    complete = [True] * len(prefixes) if cand.complete is None else cand.complete[where[:, 0], where[:, 1]].tolist()
    for n, ((i, j), tokens) in enumerate(zip(where.tolist(), prefixes, strict=True)):
        s = int(b.sent[i])
        log_prob = float(cand.top[i, j])
        hyps = finished[s]
        hyp = Hypothesis(tokens=tokens, score=log_prob / lp, log_prob=log_prob,
                         token_log_probs=token_lps[n] + eos_lps[n : n + 1], complete=complete[n])
        # after any equal score: the earlier hypothesis keeps its place
        pos = bisect.bisect_right([(not h.complete, -h.score) for h in hyps], (not hyp.complete, -hyp.score))
        if pos < keep:
            hyps.insert(pos, hyp)
            del hyps[keep:]
        if hyps[0].complete and not hyps[-1].complete:
            hyps[:] = [h for h in hyps if h.complete]
        if len(hyps) == keep and ends_all:
            threshold[s] = math.inf
        elif len(hyps) >= nbest:
            threshold[s] = hyps[nbest - 1].score


@torch.inference_mode()
def greedy_search(model: Seq2Seq | SearchModel, src: torch.Tensor, *, alpha: float = 0.0, max_len_a: float,
                  max_len_b: int, src_pad: torch.Tensor | None = None, min_len: int = 0,
                  max_len_cap: Cap = None) -> list[list[int]]:
    """The most probable next token at each step until EOS or max_len (same conventions as
    ``beam_search``); the reference that beam 1 must match. ``alpha`` is unused (accepted so the
    two functions take the same arguments)."""
    del alpha
    batch = src.size(0)
    if batch == 0:
        return []
    model = search_model(model)
    special = model.special
    memory, pad = model.encode(src, src_pad)
    device = pad.device
    limit = max_lengths(pad, max_len_a, max_len_b, max_len_cap).to(device)
    cache = model.new_cache()
    last = torch.full((batch, 1), special.start, dtype=torch.long, device=device)
    ended = torch.zeros(batch, dtype=torch.bool, device=device)
    steps: list[torch.Tensor] = []
    for t in range(int(limit.max())):
        logits = model.step(last, memory, pad, cache, 1)
        last = _ban(logits, t + 1, min_len, t + 1 >= limit, special).argmax(-1, keepdim=True)  # (B, 1)
        steps.append(last.squeeze(1).masked_fill(ended, special.stop))
        ended |= last.squeeze(1).eq(special.stop)
        if ended.all():
            break
    out = torch.stack(steps, 1).tolist()  # (B, T)
    return [row[: row.index(special.stop)] if special.stop in row else row for row in out]
