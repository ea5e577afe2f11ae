"""Decoding modes of the one search loop: sampling (seeded, top-k, top-p, temperature), forced target
prefixes, n-gram blocking, per-token log-probabilities and ensembles."""

from __future__ import annotations

import math

import pytest
import torch

from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.decoding.ensemble import Ensemble
from tbuild.engine.decoding.native import sampler as translator_sampler
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.decoding.search import Rules, Sampling, beam_search, greedy_search, top_p
from tests.conftest import tiny_model
from tests.engine.decoding.test_search import A, B, C, TableModel, toy_src

# every step: A 0.5, B 0.3, C 0.2 (EOS almost never)
RANKED = {None: {A: 0.5, B: 0.3, C: 0.2 - 1e-9, EOS: 1e-9}}
LIMITS = {"alpha": 0.6, "max_len_a": 0.0, "max_len_b": 6}


def sampler(kind: str = "temperature", seed: int = 0, topk: int = 10, topp: float = 0.9,
            temperature: float = 1.0) -> Sampling:
    """The translator's step for sampling ``kind``, seeded."""
    request = DecodeRequest(sampling=kind, topk=topk, topp=topp, temperature=temperature, seed=seed)
    return translator_sampler(request, torch.device("cpu"))


def random_src(lengths: list[int], vocab: int = 40, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        src[i, : n - 1] = torch.randint(4, vocab, (n - 1,), generator=g)
        src[i, n - 1] = EOS
    return src


def outputs(hyps: list[list]) -> list[list[list[int]]]:
    return [[h.tokens for h in sentence] for sentence in hyps]


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return tiny_model()


def test_sampling_is_reproducible_per_seed_and_differs_across_seeds(model: torch.nn.Module) -> None:
    src = random_src([5, 7, 3])

    def draw(seed: int) -> list[list[list[int]]]:
        return outputs(beam_search(model, src, beam=4, nbest=4, sampling=sampler(seed=seed), **LIMITS))

    first = draw(1)
    assert draw(1) == first
    assert all(len(sentence) == 4 for sentence in first)  # --nbest 4: four samples each
    assert draw(2) != first


def test_topk_never_leaves_the_k_best() -> None:
    """By hand: A and B are the two most probable tokens at every step, C the third."""
    toy = TableModel([RANKED])
    hyps = beam_search(toy, toy_src((0, 3), (0, 3)), beam=16, nbest=16, sampling=sampler("topk", topk=2), **LIMITS)
    tokens = [t for sentence in hyps for h in sentence for t in h.tokens]
    assert C not in tokens and {A, B} <= set(tokens)
    wide = beam_search(toy, toy_src((0, 3)), beam=16, nbest=16, sampling=sampler("topk", topk=3), **LIMITS)
    assert C in {t for h in wide[0] for t in h.tokens}  # the same draw with k = 3 does reach C


def test_topp_keeps_the_smallest_set_holding_p() -> None:
    lprobs = torch.tensor([[0.5, 0.3, 0.2 - 1e-9, 1e-9]]).log()
    for p, kept in ((0.5, [0]), (0.6, [0, 1]), (0.85, [0, 1, 2]), (1.0, [0, 1, 2, 3])):
        weights = Sampling((top_p(p),)).weights(lprobs)
        assert weights.isfinite()[0].nonzero().flatten().tolist() == kept, p
        assert lprobs[0, kept].exp().sum() >= p - 1e-6  # the set holds at least p of the mass
    toy = TableModel([RANKED])
    hyps = beam_search(toy, toy_src((0, 3)), beam=16, nbest=16, sampling=sampler("topp", topp=0.6), **LIMITS)
    assert {t for h in hyps[0] for t in h.tokens} == {A, B}


def test_temperature_towards_zero_is_greedy(model: torch.nn.Module) -> None:
    src = random_src([5, 7, 3, 9])
    greedy = greedy_search(model, src, max_len_a=1.0, max_len_b=4)
    cold = beam_search(model, src, beam=1, alpha=0.6, max_len_a=1.0, max_len_b=4,
                       sampling=sampler("temperature", temperature=1e-4))
    assert [s[0].tokens for s in cold] == greedy


def test_prefix_is_forced_then_continued(model: torch.nn.Module) -> None:
    """Equal to forcing by hand: a model whose first steps allow only the prefix's tokens."""
    src = random_src([5, 7, 3])
    prefixes = [[7, 9], [], [11]]
    prefix = torch.full((3, 2), PAD)
    for i, p in enumerate(prefixes):
        prefix[i, : len(p)] = torch.tensor(p, dtype=torch.long)

    class Forced:
        special = model.special

        def encode(self, s: torch.Tensor, pad: torch.Tensor | None = None) -> tuple:
            return model.encode(s, pad)

        def decode(self, tgt, memory, pad, cache=None, *, beams=1):  # noqa: ANN001, ANN202 - the Seq2Seq shape
            step = cache.offset
            logits = model.decode(tgt, memory, pad, cache, beams=beams)
            if step < prefix.size(1):  # only the forced token, with its own log-prob (the rest on PAD, banned)
                forced = prefix[hand_rows, step].repeat_interleave(beams)[:, None]
                on = forced[:, 0].ne(PAD)
                keep = logits[:, -1].log_softmax(-1).gather(1, forced)
                row = torch.full_like(logits[:, -1], -math.inf).scatter_(1, forced, keep)
                row[:, PAD] = torch.log1p(-keep.exp()).squeeze(1)
                logits[on, -1] = row[on]
            return logits

    for beam in (1, 3):
        rules = Rules(prefix=prefix, prefix_len=torch.tensor([len(p) for p in prefixes]))
        ours = beam_search(model, src, src_pad=src.eq(PAD), beam=beam, nbest=beam, rules=rules, **LIMITS)
        hand = []
        for i in range(3):  # one sentence at a time, so that the hand model's rows are that sentence's
            hand_rows = torch.tensor([i])
            alone = src[i:i + 1, : int(src[i].ne(PAD).sum())]
            hand.append(beam_search(Forced(), alone, beam=beam, nbest=beam, **LIMITS)[0])
        assert outputs(ours) == [[h.tokens for h in s] for s in hand]
        for p, sentence in zip(prefixes, ours, strict=True):
            assert all(h.tokens[: len(p)] == p for h in sentence)


def test_no_repeat_ngram_holds() -> None:
    toy = TableModel([RANKED])

    def repeats(tokens: list[int], n: int) -> bool:
        grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
        return len(grams) != len(set(grams))

    for n in (1, 2, 3):
        free = beam_search(toy, toy_src((0, 3)), beam=3, nbest=3, alpha=0.6, max_len_a=0, max_len_b=8)
        assert any(repeats(h.tokens, n) for h in free[0])  # without the rule the outputs do repeat
        for sampling in (None, sampler("temperature")):
            held = beam_search(toy, toy_src((0, 3)), beam=3, nbest=3, alpha=0.6, max_len_a=0, max_len_b=8,
                               rules=Rules(no_repeat_ngram=n), sampling=sampling)
            assert held[0] and not any(repeats(h.tokens, n) for h in held[0]), (n, sampling)


def test_token_log_probs_are_the_teacher_forced_ones(model: torch.nn.Module) -> None:
    src = random_src([5, 7, 3])
    for sampling in (None, sampler("topk", topk=5)):
        hyps = beam_search(model, src, src_pad=src.eq(PAD), beam=3, nbest=3, sampling=sampling, token_scores=True,
                           **LIMITS)
        for i, sentence in enumerate(hyps):
            for h in sentence:
                with torch.no_grad():
                    logits = model(src[i:i + 1, : int(src[i].ne(PAD).sum())], torch.tensor([[BOS] + h.tokens]))
                forced = logits.log_softmax(-1)[0].gather(1, torch.tensor([h.tokens + [EOS]]).T).squeeze(1)
                assert h.token_log_probs == pytest.approx(forced.tolist(), abs=1e-4)
                assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)


@pytest.mark.parametrize("combine", ["logprob", "prob"])
def test_ensembles_of_one_and_of_two_identical_models_equal_the_model(model: torch.nn.Module, combine: str) -> None:
    src = random_src([5, 7, 3, 9])
    alone = beam_search(model, src, beam=3, nbest=3, **LIMITS)
    for members, weights in (([model], [1.0]), ([model, model], [0.3, 0.7])):
        together = beam_search(Ensemble(members, weights, combine), src, beam=3, nbest=3, **LIMITS)
        assert outputs(together) == outputs(alone)
        for a, b in zip(alone, together, strict=True):
            assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-4)


def test_ensemble_of_two_models_mixes_them() -> None:
    """By hand on two toy models: prob averages the next-token probabilities, logprob the log-probs."""
    sure = TableModel([{(): {A: 0.9, B: 0.1}, None: {EOS: 1.0}}])
    other = TableModel([{(): {A: 0.3, B: 0.7}, None: {EOS: 1.0}}])
    for combine, p_a in (("prob", 0.6), ("logprob", math.sqrt(0.27) / (math.sqrt(0.27) + math.sqrt(0.07)))):
        both = Ensemble([sure, other], [1.0, 1.0], combine)
        best = beam_search(both, toy_src((0, 2)), beam=2, nbest=2, alpha=0.0, max_len_a=0, max_len_b=3)[0]
        assert [h.tokens for h in best] == [[A], [B]]
        assert best[0].log_prob == pytest.approx(math.log(p_a), abs=1e-5)
