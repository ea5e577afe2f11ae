"""Lexical constraints: phrases an output must contain (positive) or must not contain (negative).

Positive constraints use dynamic beam allocation (Post & Vilar 2018, as fairseq implements it):
- every step, each row's candidates are its own best tokens plus the tokens that advance a
  constraint (the next token of the phrase it is writing, the first token of each phrase it has not
  met), so a constraint can enter the beam however unlikely the model finds it;
- a candidate's *bank* is the number of constraint tokens its output has met; the beam is filled
  bank by bank in turns (each bank's best, then each bank's second best, ...), the fuller bank first
  at equal rank, so hypotheses that have met more of the constraints keep their place while they
  finish, and an empty bank's slots go to the others;
- EOS is banned while a row has an unmet constraint, unless its length limit forces EOS: every
  output contains every constraint whenever the length limit leaves room for them.

A phrase being written and broken off (the next token differs) starts over; a token that starts a
phrase starts the first unmet phrase beginning with it. Phrases are matched as token sequences, as
the tokenizer splits them alone (so ``Hund`` matches the word ``▁Hund``, not the end of another word).

Negative constraints ban, at every step, the last token of a phrase whose other tokens end the output
so far (the n-gram blocking rule with a given list); a forced target prefix takes precedence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

NEG_INF = float("-inf")
NONE = -1  # a phrase's padding and "no token" (never a vocabulary id)


@dataclass
class Phrases:
    """Each sentence's phrases as token ids: ``ids`` (B, C, L) padded with NONE, ``lengths`` (B, C) (0: no
    phrase)."""

    ids: torch.Tensor
    lengths: torch.Tensor

    @classmethod
    def of(cls, phrases: list[list[list[int]]], *, right: bool = False,
           device: torch.device | str = "cpu") -> Phrases:
        """From token lists per sentence; ``right``: aligned to the right (for negative matching)."""
        count = max(1, *(len(p) for p in phrases))
        width = max([1] + [len(ph) for p in phrases for ph in p])
        ids = torch.full((len(phrases), count, width), NONE, dtype=torch.long)
        lengths = torch.zeros(len(phrases), count, dtype=torch.long)
        for i, sentence in enumerate(phrases):
            for c, phrase in enumerate(sentence):
                start = width - len(phrase) if right else 0
                ids[i, c, start : start + len(phrase)] = torch.tensor(phrase, dtype=torch.long)
                lengths[i, c] = len(phrase)
        return cls(ids.to(device), lengths.to(device))

    def rows(self, sent: torch.Tensor, rows: int) -> Phrases:
        """The phrases of live sentences ``sent``, each repeated for its ``rows`` decoder rows."""
        return Phrases(self.ids[sent].repeat_interleave(rows, 0), self.lengths[sent].repeat_interleave(rows, 0))

    def total(self) -> torch.Tensor:
        """(B,) constraint tokens per sentence."""
        return self.lengths.sum(1)


@dataclass
class Progress:
    """Where each decoder row stands: ``met`` (..., C) phrases in its output, ``cur`` (...) the phrase it
    is writing (-1: none), ``pos`` (...) how many of that phrase's tokens it has written."""

    met: torch.Tensor
    cur: torch.Tensor
    pos: torch.Tensor

    @classmethod
    def start(cls, phrases: Phrases) -> Progress:
        batch, count = phrases.lengths.shape
        device = phrases.lengths.device
        return cls(torch.zeros(batch, count, dtype=torch.bool, device=device),
                   torch.full((batch,), -1, dtype=torch.long, device=device),
                   torch.zeros(batch, dtype=torch.long, device=device))

    def tokens_met(self, lengths: torch.Tensor) -> torch.Tensor:
        """Constraint tokens in the output (met phrases whole, the current one so far): the bank."""
        return (self.met * lengths).sum(-1) + self.pos

    def unmet(self, lengths: torch.Tensor) -> torch.Tensor:
        """True where a phrase is not in the output yet."""
        return (~self.met & lengths.gt(0)).any(-1)

    def take(self, index: torch.Tensor, kept: torch.Tensor | None) -> Progress:
        """Candidates ``index`` (n, k) of (n, c) candidate states, then the live sentences ``kept``,
        flattened to one state per new decoder row."""
        met = self.met.gather(1, index[..., None].expand(-1, -1, self.met.size(-1)))
        cur, pos = self.cur.gather(1, index), self.pos.gather(1, index)
        if kept is not None:
            met, cur, pos = met[kept], cur[kept], pos[kept]
        return Progress(met.flatten(0, 1), cur.flatten(), pos.flatten())


def step(progress: Progress, phrases: Phrases, token: torch.Tensor) -> Progress:
    """The state after each row (N) appends each of its candidate tokens (N, M): (N, M, C), (N, M), (N, M)."""
    ids, lengths = phrases.ids, phrases.lengths
    rows = torch.arange(ids.size(0), device=ids.device)
    cur = progress.cur.clamp(min=0)
    writing = progress.cur.ge(0)
    expected = ids[rows, cur, progress.pos.clamp(max=ids.size(-1) - 1)]  # (N,) next token of the current phrase
    goes_on = writing[:, None] & token.eq(expected[:, None])  # (N, M)
    finishes = goes_on & (progress.pos + 1 == lengths[rows, cur])[:, None]
    # otherwise the token may start the first unmet phrase beginning with it
    open_ = ~progress.met & lengths.gt(0)  # (N, C)
    hit = token[..., None].eq(ids[:, None, :, 0]) & open_[:, None, :]  # (N, M, C)
    which = hit.int().argmax(-1)  # (N, M) first hit
    starts = ~goes_on & hit.any(-1)
    one = starts & lengths.gather(1, which).eq(1)  # a one-token phrase, met at once
    count = ids.size(1)
    met = progress.met[:, None, :] | (F.one_hot(cur, count).bool()[:, None, :] & finishes[..., None])
    met = met | (F.one_hot(which, count).bool() & one[..., None])
    writes_on, writes_new = goes_on & ~finishes, starts & ~one
    new_cur = torch.where(writes_on, progress.cur[:, None], torch.where(writes_new, which, -1))
    new_pos = torch.where(writes_on, progress.pos[:, None] + 1, writes_new.long())
    return Progress(met, new_cur, new_pos)


def constraint_tokens(progress: Progress, phrases: Phrases) -> torch.Tensor:
    """(N, C + 1) tokens that advance a row's constraints (NONE where none): the next token of the
    phrase it writes, the first token of each phrase it has not met."""
    rows = torch.arange(phrases.ids.size(0), device=phrases.ids.device)
    cur = progress.cur.clamp(min=0)
    expected = phrases.ids[rows, cur, progress.pos.clamp(max=phrases.ids.size(-1) - 1)]
    expected = expected.masked_fill(progress.cur.lt(0), NONE)
    firsts = phrases.ids[:, :, 0].masked_fill(progress.met | phrases.lengths.eq(0), NONE)
    return torch.cat([expected[:, None], firsts], 1)


def allocate(score: torch.Tensor, bank: torch.Tensor, width: int) -> torch.Tensor:
    """Indices (n, width) of candidates (n, R) in the order the beam takes them: round-robin over banks
    (every bank's best, then every bank's second best, ...; at equal turn the fuller bank first),
    impossible candidates (-inf) last."""
    order = score.argsort(dim=1, descending=True, stable=True)
    bank_sorted = bank.gather(1, order)
    top = int(bank.max()) + 1
    turn = F.one_hot(bank_sorted, top).cumsum(1).gather(2, bank_sorted[..., None]).squeeze(2) - 1
    key = (turn * top + (top - 1 - bank_sorted)).masked_fill_(~score.gather(1, order).isfinite(), 2**62)
    return order.gather(1, key.argsort(dim=1, stable=True)[:, :width])


def constrained_candidates(lprobs: torch.Tensor, logp: torch.Tensor, progress: Progress, phrases: Phrases,
                           width: int, per_row: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Progress]:
    """The ``width`` candidates of each sentence chosen by dynamic beam allocation (module docstring).

    ``lprobs`` (N, V) with banned tokens at -inf, ``logp`` (n, r) the rows' cumulative log-probs,
    ``per_row`` (N, w) each row's own best tokens. Returns cumulative log-probs, parent rows, tokens
    and the candidates' constraint states, each (n, c)."""
    n, rows = logp.shape
    extra = constraint_tokens(progress, phrases)  # (N, C + 1)
    seen = extra[:, :, None].eq(per_row[:, None, :]).any(-1)  # already a best token of the row
    earlier = torch.ones(extra.size(1), extra.size(1), dtype=torch.bool, device=extra.device).tril(-1)
    seen |= (extra[:, :, None].eq(extra[:, None, :]) & earlier).any(-1)  # or an earlier extra token
    token = torch.cat([per_row, extra], 1)  # (N, M)
    score = lprobs.gather(1, token.clamp(min=0))
    score[:, per_row.size(1):].masked_fill_(seen | extra.eq(NONE), NEG_INF)  # no token: an impossible candidate
    score = score.add_(logp.view(-1, 1)).view(n, -1)  # (n, r·M)
    state = step(progress, phrases, token)
    bank = state.tokens_met(phrases.lengths[:, None, :]).view(n, -1)
    pick = allocate(score, bank, width)  # (n, c)
    m = token.size(1)
    flat = Progress(state.met.view(n, rows * m, -1), state.cur.view(n, -1), state.pos.view(n, -1))
    chosen = Progress(flat.met.gather(1, pick[..., None].expand(-1, -1, flat.met.size(-1))),
                      flat.cur.gather(1, pick), flat.pos.gather(1, pick))
    chosen_token = token.view(n, -1).gather(1, pick).clamp(min=0)  # an impossible candidate (-inf) reads row 0
    return score.gather(1, pick), pick.div(m, rounding_mode="floor"), chosen_token, chosen


def ban_phrases(lprobs: torch.Tensor, history: torch.Tensor, banned: Phrases) -> None:
    """In place on (N, V): -inf for the last token of every (right-aligned) phrase of ``banned`` (one set
    per row) whose other tokens end ``history`` (N, t)."""
    ids = banned.ids  # (N, E, L)
    need = ids.size(-1) - 1
    tail = history[:, max(0, history.size(1) - need):]
    if tail.size(1) < need:  # too short an output: those positions match no token
        tail = torch.cat([tail.new_full((tail.size(0), need - tail.size(1)), -1), tail], 1)
    head = ids[..., :-1]
    match = (head.eq(tail[:, None, :]) | head.eq(NONE)).all(-1) & banned.lengths.gt(0)  # (N, E)
    banned_lp = torch.full(match.shape, NEG_INF, device=lprobs.device).masked_fill_(~match, math.inf)
    lprobs.scatter_reduce_(1, ids[..., -1].clamp(min=0), banned_lp, reduce="amin")  # -inf where a phrase ends
