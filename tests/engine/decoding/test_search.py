"""Beam search: hand-checked n-best lists on a table-driven toy model, then a small real model
(batching, beam 1 = greedy, rescoring, length limits)."""

from __future__ import annotations

import math

import pytest
import torch

from tbuild.components.specs import special
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.components.transformer import DecoderCache
from tbuild.engine.decoding.search import (
    Hypothesis,
    beam_search,
    finished_kept,
    greedy_search,
    length_penalty,
    max_lengths,
    row_topk,
)
from tests.conftest import tiny_model

A, B, C = 4, 5, 6  # the toy models' output tokens
TOY_VOCAB = 7  # PAD UNK BOS EOS A B C

# Next-token probabilities given the output prefix; prefixes not listed use the None entry
# (default: DEFAULT).
Table = dict[tuple[int, ...] | None, dict[int, float]]
DEFAULT = {EOS: 0.5, A: 0.3, B: 0.2}
TABLE_WIDE: Table = {
    (): {A: 0.6, B: 0.3, EOS: 0.1},
    (A,): {A: 0.2, B: 0.3, EOS: 0.5},
    (B,): {A: 0.45, B: 0.35, EOS: 0.2},
    (A, A): {EOS: 0.7, A: 0.3},
    (A, B): {EOS: 0.6, A: 0.4},
    (B, A): {EOS: 0.55, A: 0.45},
    (B, B): {EOS: 0.1, A: 0.9},
}
TABLE_ALPHA: Table = {
    (): {EOS: 0.4, A: 0.5, B: 0.1},
    (A,): {A: 0.9, EOS: 0.06, B: 0.04},
    (B,): {EOS: 0.6, A: 0.4},
    (A, A): {EOS: 0.55, A: 0.25, B: 0.2},
}
TABLE_BOUND: Table = {
    (): {EOS: 0.5, A: 0.3, B: 0.2},
    (A,): {A: 0.99, EOS: 0.01},
    (A, A): {A: 0.99, EOS: 0.01},
    (A, A, A): {A: 0.99, EOS: 0.01},
    (A, A, A, A): {EOS: 0.99, A: 0.01},
}
NEVER_EOS: Table = {None: {A: 0.5, B: 0.3, C: 0.2 - 1e-9, EOS: 1e-9}}


class TableModel:
    """Toy model with the EncoderDecoder interface. Source sentence [10 + t, ...] uses tables[t];
    the prefix lives in the DecoderCache, so wrong reorders give wrong distributions. Its padding is its own:
    the source's PAD ids (a test double's convention; a real model is told its padding)."""

    special = special.DEFAULT

    def __init__(self, tables: list[Table]) -> None:
        self.tables = tables
        self.rows: list[int] = []  # decoder rows of each decode call

    def dist(self, table: int, prefix: tuple[int, ...]) -> dict[int, float]:
        return self.tables[table].get(prefix) or self.tables[table].get(None, DEFAULT)

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return src.float().unsqueeze(-1), src.eq(PAD)  # memory (B, S, 1) holds the source ids

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, memory_pad: torch.Tensor | None,
               cache: DecoderCache | None = None, *, beams: int = 1) -> torch.Tensor:
        assert cache is not None and tgt.size(1) == 1
        # memory keeps one row per sentence, shared by that sentence's beams (consecutive rows)
        assert memory.size(0) == memory_pad.size(0) and tgt.size(0) == memory.size(0) * beams
        table = (memory[:, 0, 0].long() - 10).repeat_interleave(beams)
        if not cache.layers:
            assert tgt.eq(BOS).all()
            cache.layers = [{"self": {"prefix": tgt[:, :0], "table": table}}]
        else:
            state = cache.layers[0]["self"]
            assert torch.equal(state["table"], table), "memory rows do not follow the cache rows"
            state["prefix"] = torch.cat([state["prefix"], tgt], 1)
        cache.offset += 1
        self.rows.append(tgt.size(0))
        logits = torch.full((tgt.size(0), TOY_VOCAB), -math.inf)
        for row, (t, prefix) in enumerate(zip(table.tolist(), cache.layers[0]["self"]["prefix"].tolist(),
                                              strict=True)):
            for token, p in self.dist(t, tuple(prefix)).items():
                logits[row, token] = math.log(p)
        return logits.unsqueeze(1)  # (N, 1, V)


def brute_force(model: TableModel, table: int, max_len: int, alpha: float) -> list[tuple[list[int], float]]:
    """Every output with |Y| <= max_len (EOS forced at max_len), best score first."""
    found = []

    def walk(prefix: tuple[int, ...], log_prob: float) -> None:
        dist = model.dist(table, prefix)
        if EOS in dist:
            score = (log_prob + math.log(dist[EOS])) / length_penalty(len(prefix) + 1, alpha)
            found.append((list(prefix), score))
        if len(prefix) + 1 < max_len:
            for token, p in dist.items():
                if token != EOS:
                    walk(prefix + (token,), log_prob + math.log(p))

    walk((), 0.0)
    return sorted(found, key=lambda x: -x[1])


def lp(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


def check(hyps: list[Hypothesis], expected: list[tuple[list[int], float]]) -> None:
    """expected: (tokens, probability of tokens + EOS, alpha) worked out by hand."""
    assert [h.tokens for h in hyps] == [tokens for tokens, *_ in expected]
    for h, (tokens, prob, alpha) in zip(hyps, expected, strict=True):
        assert h.log_prob == pytest.approx(math.log(prob), abs=1e-5)
        assert h.score == pytest.approx(math.log(prob) / lp(len(tokens) + 1, alpha), abs=1e-5)


def toy_src(*tables_and_lengths: tuple[int, int]) -> torch.Tensor:
    """One source sentence per (table, length), padded."""
    width = max(n for _, n in tables_and_lengths)
    src = torch.full((len(tables_and_lengths), width), PAD)
    for i, (t, n) in enumerate(tables_and_lengths):
        src[i, :n] = 10 + t
    return src


# ----------------------------------------------------------------------------- toy model


def test_length_penalty_is_wu_et_al() -> None:
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(13, 1.0) == pytest.approx(3.0)
    assert length_penalty(30, 0.0) == 1.0


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_finds_the_exact_nbest(alpha: float) -> None:
    # |Y| <= 3, so the 7 outputs are: A .6·.5, A B .6·.3·.6, '' .1, A A .6·.2·.7, B A .3·.45·.55,
    # B .3·.2, B B .3·.35·.1. A beam of 6 never prunes here, so the 6-best list is exact.
    model = TableModel([TABLE_WIDE])
    hyps = beam_search(model, toy_src((0, 3)), beam=6, alpha=alpha, max_len_a=0, max_len_b=3, nbest=6)[0]
    outputs = {
        "A": ([A], 0.6 * 0.5), "AB": ([A, B], 0.6 * 0.3 * 0.6), "": ([], 0.1),
        "AA": ([A, A], 0.6 * 0.2 * 0.7), "BA": ([B, A], 0.3 * 0.45 * 0.55), "B": ([B], 0.3 * 0.2),
    }
    # alpha = 0 ranks by probability; alpha = 1 divides by 1, 7/6, 8/6 for |Y| = 1, 2, 3, so the
    # empty output (-2.303 / 1) falls behind A A (-2.477 / 1.333) and B A (-2.600 / 1.333).
    order = ["A", "AB", "", "AA", "BA", "B"] if alpha == 0 else ["A", "AB", "AA", "BA", "", "B"]
    check(hyps, [(*outputs[name], alpha) for name in order])
    assert [(h.tokens, pytest.approx(h.score)) for h in hyps] == brute_force(model, 0, 3, alpha)[:6]


def test_alpha_changes_the_winner_and_search_goes_on_after_k_finished() -> None:
    # '' has P .4 (|Y| 1); A A has .5·.9·.55 = .2475 (|Y| 3). alpha 0: '' wins. alpha 2: lp(3) =
    # (8/6)² = 1.78 and -1.396/1.78 = -0.785 > -0.916: A A wins. With beam 2, '' and B finish
    # by step 2 (k finished, where fairseq's rule would stop with ''); the bound -0.799/lp(4)
    # = -0.36 says A A can still win, so the search goes on and finds it.
    model = TableModel([TABLE_ALPHA])
    src = toy_src((0, 2))
    short = beam_search(model, src, beam=2, alpha=0.0, max_len_a=0, max_len_b=4, nbest=2)[0]
    check(short, [([], 0.4, 0.0), ([A, A], 0.5 * 0.9 * 0.55, 0.0)])
    long = beam_search(model, src, beam=2, alpha=2.0, max_len_a=0, max_len_b=4, nbest=2)[0]
    check(long, [([A, A], 0.5 * 0.9 * 0.55, 2.0), ([], 0.4, 2.0)])
    for alpha, hyps in ((0.0, short), (2.0, long)):
        assert [(h.tokens, pytest.approx(h.score)) for h in hyps] == brute_force(model, 0, 4, alpha)[:2]
    # Beam 1 is greedy: A (.5 > .4), A (.9), EOS (.55), whatever alpha.
    for alpha in (0.0, 2.0):
        assert beam_search(model, src, beam=1, alpha=alpha, max_len_a=0, max_len_b=4)[0][0].tokens == [A, A]


def test_stop_bound_uses_the_longest_allowed_length() -> None:
    # After step 0, '' is finished with log .5 = -0.693 and A lives with log .3 = -1.204. Bounding
    # A's future by its next length, -1.204 / lp(2) = -0.885, would stop here with ''; the true
    # bound at max_len 5 is -1.204 / lp(5) = -0.433 (alpha 2), and indeed A A A A ends with
    # log(.3 · .99⁴) / (10/6)² = -0.448 > -0.693.
    model = TableModel([TABLE_BOUND])
    src = toy_src((0, 1))
    hyps = beam_search(model, src, beam=2, alpha=2.0, max_len_a=0, max_len_b=5)[0]
    check(hyps, [([A, A, A, A], 0.3 * 0.99**4, 2.0)])
    assert (hyps[0].tokens, pytest.approx(hyps[0].score)) == brute_force(model, 0, 5, 2.0)[0]
    check(beam_search(model, src, beam=2, alpha=0.0, max_len_a=0, max_len_b=5)[0], [([], 0.5, 0.0)])


def test_batch_of_toy_sentences_and_finished_sentences_leave_the_batch() -> None:
    # max_len = floor(0.5 · src_len + 2): 4 for the 4-token source, 6 for the 8-token one.
    model = TableModel([TABLE_ALPHA, NEVER_EOS])
    src = toy_src((0, 4), (1, 8))
    kwargs = {"beam": 2, "alpha": 2.0, "max_len_a": 0.5, "max_len_b": 2, "nbest": 2}
    alpha, never = beam_search(model, src, **kwargs)
    check(alpha, [([A, A], 0.5 * 0.9 * 0.55, 2.0), ([], 0.4, 2.0)])  # as decoded alone above
    assert never[0].tokens == [A] * 5 and len(never[1].tokens) == 5
    # Step 0 decodes 1 row per sentence, then 2 per sentence; sentence 0 stops at step 2 (the
    # bound), so steps 3-5 decode sentence 1's 2 rows only, and it ends at its max_len.
    assert model.rows == [2, 4, 4, 2, 2, 2]
    for i, sentence in enumerate((alpha, never)):
        alone = beam_search(model, src[i : i + 1, : 4 * (i + 1)], **kwargs)[0]
        assert [(h.tokens, h.score) for h in alone] == [(h.tokens, h.score) for h in sentence]


def test_length_limit_is_respected_when_eos_never_wins() -> None:
    model = TableModel([NEVER_EOS])
    src = toy_src((0, 1), (0, 3), (0, 6))  # max_len = floor(1.5 · n + 1) = 2, 5, 10
    limits = [2, 5, 10]
    for beam in (1, 3):
        hyps = beam_search(model, src, beam=beam, alpha=0.6, max_len_a=1.5, max_len_b=1, nbest=beam)
        for sentence, limit in zip(hyps, limits, strict=True):
            assert len(sentence) == beam
            assert all(len(h.tokens) == limit - 1 for h in sentence)
    assert [len(t) for t in greedy_search(model, src, max_len_a=1.5, max_len_b=1)] == [1, 4, 9]


def test_max_lengths_floor_and_min_len() -> None:
    pad = torch.zeros(2, 100, dtype=torch.bool)
    pad[1, 50:] = True
    # in floating point 0.29 · 100 = 28.999999999999996 and 1.13 · 100 = 112.99999999999999
    assert max_lengths(pad, 0.29, 0).tolist() == [29, 14]
    assert max_lengths(pad, 1.13, 2).tolist() == [115, 58]
    assert max_lengths(pad, 0.0, 0).tolist() == [1, 1]  # always room for EOS
    model = TableModel([TABLE_ALPHA])
    hyps = beam_search(model, toy_src((0, 2)), beam=2, alpha=0.0, max_len_a=0, max_len_b=4, nbest=2,
                       min_len=3)[0]
    assert all(len(h.tokens) + 1 >= 3 for h in hyps)
    assert hyps[0].tokens == [A, A]


# ----------------------------------------------------------------------------- real model


class EOSRamp:
    """A real model whose EOS logit grows with the position, so outputs end at varied lengths."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.special = model.special

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.encode(src, pad)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, memory_pad: torch.Tensor | None,
               cache: DecoderCache | None = None, *, beams: int = 1) -> torch.Tensor:
        start = 0 if cache is None else cache.offset
        logits = self.model.decode(tgt, memory, memory_pad, cache, beams=beams)
        logits[..., EOS] += -1.0 + 0.7 * torch.arange(start, start + tgt.size(1))
        return logits


@pytest.fixture(scope="module")
def real() -> EOSRamp:
    from tbuild.builder import build_model, load_spec

    torch.manual_seed(0)
    stack = {"layers": 2, "heads": 4, "d_ff": 64}
    model_spec = {"vocab_size": 50, "d_model": 32, "encoder": stack, "decoder": dict(stack)}
    spec = load_spec({"model": model_spec}).spec
    model = build_model(spec).eval()
    with torch.no_grad():  # larger weights: less uniform, more varied outputs
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(3)
    return EOSRamp(model)


def random_src(lengths: list[int], seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, 50, (n,), generator=g)
    return src


def test_batch_equals_one_by_one(real: EOSRamp) -> None:
    src = random_src([7, 3, 9, 1, 5, 8])
    kwargs = {"beam": 4, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 3, "nbest": 3}
    batched = beam_search(real, src, src_pad=src.eq(PAD), **kwargs)  # random_src pads with PAD alone
    lengths = {len(h.tokens) for sentence in batched for h in sentence}
    assert len(lengths) > 3  # outputs of varied lengths: sentences finish at different steps
    for i, sentence in enumerate(batched):
        alone = beam_search(real, src[i : i + 1, : int(src[i].ne(PAD).sum())], **kwargs)[0]
        assert [h.tokens for h in sentence] == [h.tokens for h in alone]
        assert [h.score for h in sentence] == pytest.approx([h.score for h in alone], abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_one_is_greedy(real: EOSRamp, alpha: float) -> None:
    src = random_src(list(range(1, 13)), seed=2)
    greedy = greedy_search(real, src, max_len_a=1.0, max_len_b=3)
    beam = beam_search(real, src, beam=1, alpha=alpha, max_len_a=1.0, max_len_b=3)
    assert [s[0].tokens for s in beam] == greedy
    assert len({len(g) for g in greedy}) > 3


def test_nbest_sorted_distinct_and_rescored(real: EOSRamp) -> None:
    src = random_src([6, 2, 9], seed=3)
    alpha = 0.6
    hyps = beam_search(real, src, src_pad=src.eq(PAD), beam=5, alpha=alpha, max_len_a=1.0, max_len_b=3, nbest=5)
    for sentence, row in zip(hyps, src, strict=True):
        assert len(sentence) == 5
        scores = [h.score for h in sentence]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in sentence}) == 5
        for h in sentence:
            # teacher-forced log P(Y + EOS | X) agrees with the incremental search
            tgt = torch.tensor([[BOS, *h.tokens]])
            x = row[row.ne(PAD)][None]
            memory, pad = real.encode(x)
            lprobs = real.decode(tgt, memory, pad).log_softmax(-1)[0]
            log_prob = lprobs.gather(1, torch.tensor([*h.tokens, EOS])[:, None]).sum().item()
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, alpha))
            assert PAD not in h.tokens and BOS not in h.tokens and EOS not in h.tokens


def test_empty_batch_and_bad_arguments(real: EOSRamp) -> None:
    empty = torch.zeros(0, 4, dtype=torch.long)
    assert beam_search(real, empty, beam=2, alpha=0.6, max_len_a=1, max_len_b=2) == []
    assert greedy_search(real, empty, max_len_a=1, max_len_b=2) == []
    with pytest.raises(ValueError):
        beam_search(real, random_src([3]), beam=2, alpha=0.6, max_len_a=1, max_len_b=2, nbest=3)


def test_output_length_capped_by_learned_positions() -> None:
    """max_len = a·src + b may exceed a learned-position decoder's table; the cap keeps it inside."""
    assert max_lengths(torch.zeros(1, 9, dtype=torch.bool), 1.0, 50, cap=6).tolist() == [6]
    model = tiny_model(["model.positional.kind=learned", "model.max_positions=6"])
    src = torch.randint(4, 40, (2, 5))
    with pytest.raises(ValueError, match="exceeds max_positions"):
        greedy_search(model, src, max_len_a=1.0, max_len_b=50, min_len=7)
    for beam in (1, 3):
        hyps = beam_search(model, src, beam=beam, alpha=0.6, max_len_a=1.0, max_len_b=50, min_len=50,
                           max_len_cap=6)
        assert all(len(h.tokens) == 5 for sentence in hyps for h in sentence)  # 5 tokens + EOS = 6 positions


@pytest.mark.parametrize("vocab", [7, 64 * 8, 8000, 8003])
def test_row_topk_equals_topk(vocab: int) -> None:
    """Chunked selection gives torch.topk's values and, where values are distinct, its indices."""
    k = min(8, vocab)
    x = torch.randn(33, vocab, generator=torch.Generator().manual_seed(vocab))
    x[0, :] = -math.inf  # all tokens but one banned: the k-1 others tie at -inf
    x[0, vocab // 2] = 0.0
    x[1, -3:] = 50.0 + torch.arange(3.0)  # the best tokens sit in the ragged tail
    x[2, :3] = 50.0 + torch.arange(3.0)  # ... or all in the first chunk
    values, index = row_topk(x, k)
    expected = x.topk(k, dim=1)
    assert torch.equal(values, expected.values)
    assert torch.equal(index[1:], expected.indices[1:]) and index[0, 0] == vocab // 2


def test_stopping_at_the_beam_ends_once_k_hypotheses_have_finished() -> None:
    # The case above with fairseq's rule (stopping="beam"): '' finishes at step 0 (log .4, lp(1) = 1) and B at
    # step 1 (log .06 / (7/6)²), the beam's 2 hypotheses, so the sentence stops there with '' although A A
    # would win at alpha 2; two decoder steps instead of the exact search's four.
    model = TableModel([TABLE_ALPHA])
    hyps = beam_search(model, toy_src((0, 2)), beam=2, alpha=2.0, max_len_a=0, max_len_b=4, nbest=2,
                       stopping="beam")[0]
    check(hyps, [([], 0.4, 2.0), ([B], 0.1 * 0.6, 2.0)])
    assert model.rows == [1, 2]
    one = beam_search(model, toy_src((0, 2)), beam=2, alpha=2.0, max_len_a=0, max_len_b=4, stopping="beam")[0]
    check(one, [([], 0.4, 2.0)])  # nbest 1: the best of the k finished


def test_stopping_at_the_beam_on_a_real_model(real: EOSRamp) -> None:
    """Beam 1 is greedy either way; a wider beam never decodes more rows than the exact search, and each
    sentence's outputs are the best of k hypotheses, scored as the exact search scores them."""
    src, rows = random_src([5, 9, 3, 7]), []

    class Counting(EOSRamp):
        def decode(self, tgt: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
            rows.append(tgt.size(0))
            return super().decode(tgt, *args, **kwargs)  # type: ignore[arg-type]

    counting = Counting(real.model)
    for alpha in (0.0, 0.6):
        greedy = beam_search(real, src, beam=1, alpha=alpha, max_len_a=1.0, max_len_b=5, stopping="beam")
        assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam_search(
            real, src, beam=1, alpha=alpha, max_len_a=1.0, max_len_b=5)]
        decoded = []
        for stopping in ("exact", "beam"):
            rows.clear()
            hyps = beam_search(counting, src, beam=4, alpha=alpha, max_len_a=1.0, max_len_b=5, nbest=2,
                               stopping=stopping)
            decoded.append(sum(rows))
            for sentence in hyps:
                assert len(sentence) == 2 and sentence[0].score >= sentence[1].score
                for h in sentence:
                    assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, alpha))
        assert decoded[1] <= decoded[0]
    with pytest.raises(ValueError, match="stopping 'soon'"):
        beam_search(real, src, beam=2, alpha=0.6, max_len_a=1.0, max_len_b=5, stopping="soon")


def test_patience_ends_once_patience_times_beam_hypotheses_have_finished() -> None:
    # TABLE_ALPHA at beam 2, alpha 2: '' finishes at step 0 and B at step 1, where stopping at the beam ends
    # with ''. Patience 1.5 waits for ⌈1.5 · 2⌉ = 3: A A finishes at step 2 (log(.5 · .9 · .55) / lp(3)²
    # beats '''s log .4), so it returns the exact search's n-best, one step after the beam's rule stopped.
    model = TableModel([TABLE_ALPHA])
    src = toy_src((0, 2))
    hyps = beam_search(model, src, beam=2, alpha=2.0, max_len_a=0, max_len_b=4, nbest=2, stopping="patience",
                       patience=1.5)[0]
    check(hyps, [([A, A], 0.5 * 0.9 * 0.55, 2.0), ([], 0.4, 2.0)])
    assert model.rows == [1, 2, 2]
    exact = beam_search(model, src, beam=2, alpha=2.0, max_len_a=0, max_len_b=4, nbest=2)[0]
    assert [(h.tokens, h.score) for h in hyps] == [(h.tokens, h.score) for h in exact]
    with pytest.raises(ValueError, match="patience must be at least 1"):
        beam_search(model, src, beam=2, alpha=2.0, max_len_a=0, max_len_b=4, stopping="patience", patience=0.5)


def test_finished_hypotheses_kept_by_each_stopping_rule() -> None:
    assert finished_kept("exact", 4, 2, 2.0) == 2
    assert finished_kept("beam", 4, 1, 2.0) == 4
    assert finished_kept("patience", 4, 1, 2.0) == 8
    assert finished_kept("patience", 4, 1, 1.1) == 5  # ⌈4.4⌉
    assert finished_kept("patience", 4, 1, 1.0) == finished_kept("beam", 4, 1, 2.0)
    assert finished_kept("patience", 1, 1, 3.0) == 1  # beam 1 is greedy: the first EOS ends it


def test_patience_between_the_beam_and_the_exact_search(real: EOSRamp) -> None:
    """Patience 1 is stopping at the beam, output for output; a patience no sentence reaches stops only where the
    exact bound does, so it gives the exact search's outputs; rows decoded grow with the patience; sampling and
    greedy search are as they were."""
    src, rows = random_src([5, 9, 3, 7, 6, 8], seed=3), []

    class Counting(EOSRamp):
        def decode(self, tgt: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
            rows.append(tgt.size(0))
            return super().decode(tgt, *args, **kwargs)  # type: ignore[arg-type]

    counting, decoded, outputs = Counting(real.model), {}, {}
    args = {"beam": 4, "alpha": 1.2, "max_len_a": 1.0, "max_len_b": 6, "nbest": 2}
    for name, rule in {"beam": ("beam", 2.0), "p1": ("patience", 1.0), "p2": ("patience", 2.0),
                       "never": ("patience", 1000.0), "exact": ("exact", 2.0)}.items():
        rows.clear()
        hyps = beam_search(counting, src, **args, stopping=rule[0], patience=rule[1])
        decoded[name], outputs[name] = sum(rows), [[(h.tokens, h.score) for h in s] for s in hyps]
    assert outputs["p1"] == outputs["beam"] and decoded["p1"] == decoded["beam"]
    assert outputs["never"] == outputs["exact"] and decoded["never"] == decoded["exact"]
    assert decoded["beam"] < decoded["p2"] < decoded["exact"] and outputs["beam"] != outputs["exact"]
    greedy = beam_search(real, src, beam=1, alpha=1.2, max_len_a=1.0, max_len_b=6)
    assert beam_search(real, src, beam=1, alpha=1.2, max_len_a=1.0, max_len_b=6, stopping="patience") == greedy
