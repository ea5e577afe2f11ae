"""Lexical constraints: positive phrases by dynamic beam allocation (Post & Vilar 2018) and negative
phrases, by hand on toy models and on a small random model over many sentences."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.specs.special import EOS
from tbuild.engine.decoding.constraints import Phrases, Progress, allocate, step
from tbuild.engine.decoding.ensemble import Ensemble
from tbuild.engine.decoding.search import Rules, beam_search
from tests.conftest import tiny_model
from tests.engine.decoding.test_modes import random_src, sampler
from tests.engine.decoding.test_search import A, B, C, TableModel, toy_src

LIMITS = {"alpha": 0.6, "max_len_a": 1.0, "max_len_b": 10}


def contains(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return tiny_model()


def random_phrases(count: int, seed: int, vocab: int = 40) -> list[list[list[int]]]:
    """1-2 phrases of 1-3 tokens per sentence."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        n = int(torch.randint(1, 3, (1,), generator=g))
        out.append([torch.randint(4, vocab, (int(torch.randint(1, 4, (1,), generator=g)),),
                                  generator=g).tolist() for _ in range(n)])
    return out


def test_the_state_follows_phrases_token_by_token() -> None:
    """Phrases [A B] and [C]: A starts the first, B finishes it, C (one token) is met at once, and a
    token that breaks a phrase off starts it over."""
    phrases = Phrases.of([[[A, B], [C]]])
    state = Progress.start(phrases)
    seen = []
    for token in (A, A, C, A, B):
        state = step(state, phrases, torch.tensor([[token]]))
        state = Progress(state.met[:, 0], state.cur[:, 0], state.pos[:, 0])
        seen.append((state.met[0].tolist(), int(state.cur[0]), int(state.pos[0]),
                     int(state.tokens_met(phrases.lengths)[0])))
    assert seen == [([False, False], 0, 1, 1),  # A: writing [A B], one token in
                    ([False, False], 0, 1, 1),  # A again: breaks [A B] off and starts it over
                    ([False, True], -1, 0, 1),  # C: breaks [A B] off, meets [C]
                    ([False, True], 0, 1, 2),
                    ([True, True], -1, 0, 3)]   # B: [A B] met, all three constraint tokens in


def test_allocation_takes_banks_in_turns() -> None:
    """Scores 0 > -1 > -2 > -3 > -4 in banks 0, 0, 1, 2, 0: each bank's best first (the fuller bank
    first), then each bank's second best; -inf never before a possible candidate."""
    score = torch.tensor([[0.0, -1.0, -2.0, -3.0, -4.0, float("-inf")]])
    bank = torch.tensor([[0, 0, 1, 2, 0, 2]])
    assert allocate(score, bank, 6).tolist() == [[3, 2, 0, 1, 4, 5]]


def test_an_unlikely_constraint_enters_the_beam() -> None:
    """The model never wants C (probability 1e-6) yet every output contains it, once, and A B C / A C
    are the most probable outputs that do."""
    table = {(): {A: 0.9, B: 0.1 - 2e-6, C: 1e-6, EOS: 1e-6}, None: {A: 0.1, B: 0.1, C: 1e-6, EOS: 0.8 - 1e-6}}
    toy = TableModel([table])
    free = beam_search(toy, toy_src((0, 3)), beam=2, nbest=2, **LIMITS)
    assert all(C not in h.tokens for h in free[0])
    rules = Rules(include=Phrases.of([[[C]]]))
    held = beam_search(toy, toy_src((0, 3)), beam=2, nbest=2, rules=rules, **LIMITS)
    assert held[0] and all(h.tokens.count(C) == 1 for h in held[0])
    assert held[0][0].tokens == [A, C]


@pytest.mark.parametrize("beam", [1, 4])
def test_every_output_holds_every_constraint(model: torch.nn.Module, beam: int) -> None:
    src = random_src([5, 7, 3, 9, 4, 6, 8, 5], seed=1)
    phrases = random_phrases(src.size(0), seed=2)
    free = beam_search(model, src, beam=beam, nbest=beam, **LIMITS)
    assert not all(contains(h.tokens, p) for s, ps in zip(free, phrases, strict=True) for h in s for p in ps)
    held = beam_search(model, src, beam=beam, nbest=beam, rules=Rules(include=Phrases.of(phrases)), **LIMITS)
    for sentence, ps in zip(held, phrases, strict=True):
        assert sentence and all(h.complete for h in sentence)  # those missing one are dropped
        assert all(contains(h.tokens, p) for h in sentence for p in ps), (sentence[0].tokens, ps)


def test_the_length_limit_makes_room_for_the_constraints(model: torch.nn.Module) -> None:
    """max_len 1 (EOS only) grows to the constraint tokens + EOS."""
    src = random_src([5, 7])
    phrases = [[[11, 12], [13]], [[20]]]
    held = beam_search(model, src, beam=3, alpha=0.6, max_len_a=0.0, max_len_b=1,
                       rules=Rules(include=Phrases.of(phrases)))
    assert sorted(held[0][0].tokens) == [11, 12, 13] and contains(held[0][0].tokens, [11, 12])
    assert held[1][0].tokens == [20]
    capped = beam_search(model, src, beam=3, nbest=3, alpha=0.6, max_len_a=0.0, max_len_b=1, max_len_cap=2,
                         rules=Rules(include=Phrases.of(phrases)))
    # no room under the decoder's position cap: the best outputs that could be made, marked incomplete
    assert capped[0] and all(len(h.tokens) == 1 and not h.complete for h in capped[0])


def test_constraints_with_a_prefix_and_an_ensemble(model: torch.nn.Module) -> None:
    torch.manual_seed(1)
    other = tiny_model()
    src = random_src([5, 7, 3], seed=3)
    phrases = random_phrases(3, seed=4)
    prefix = torch.tensor([[9, 10], [8, 0], [0, 0]])  # right-padded: the lengths say where each prefix ends
    rules = Rules(prefix=prefix, prefix_len=torch.tensor([2, 1, 0]), include=Phrases.of(phrases))
    held = beam_search(Ensemble([model, other], [1.0, 1.0], "prob"), src, src_pad=src.eq(0), beam=3, nbest=3,
                       rules=rules, **LIMITS)
    for sentence, ps, p in zip(held, phrases, ([9, 10], [8], []), strict=True):
        assert all(h.tokens[: len(p)] == p and all(contains(h.tokens, c) for c in ps) for h in sentence)


def test_negative_constraints_never_appear(model: torch.nn.Module) -> None:
    """Ban each sentence's best output's first bigram and its most frequent token: gone from every
    hypothesis, and the outputs change."""
    src = random_src([5, 7, 3, 9, 6], seed=5)
    free = beam_search(model, src, beam=4, nbest=4, **LIMITS)
    banned = [[s[0].tokens[:2], [max(set(s[0].tokens), key=s[0].tokens.count)]] for s in free]
    assert all(len(b[0]) == 2 for b in banned)
    for sampling in (None, sampler("topk", topk=5)):
        held = beam_search(model, src, beam=4, nbest=4, sampling=sampling,
                           rules=Rules(exclude=Phrases.of(banned, right=True)), **LIMITS)
        for sentence, ps in zip(held, banned, strict=True):
            assert sentence and not any(contains(h.tokens, p) for h in sentence for p in ps)
    assert [s[0].tokens for s in held] != [s[0].tokens for s in free]


def test_positive_constraints_refuse_sampling(model: torch.nn.Module) -> None:
    with pytest.raises(ValueError, match="beam search"):
        beam_search(model, random_src([5]), beam=2, nbest=2, sampling=sampler(),
                    rules=Rules(include=Phrases.of([[[7]]])), **LIMITS)
