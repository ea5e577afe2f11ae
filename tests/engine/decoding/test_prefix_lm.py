"""A decoder-only translator through the search (engine/decoding/prefix_lm.py): the prefix run once then
cached steps give the full pass's scores, beam 1 equals greedy, a batch holds one source length."""

from __future__ import annotations

import pytest
import torch

from tbuild.builder.tokens import BOS, EOS
from tbuild.engine.decoding.prefix_lm import PrefixLMSearch
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.decoding.translator import length_batches

from ...components.test_prefix_lm import plm

SRC = torch.tensor([[5, 6, 7, EOS], [9, 8, 10, EOS], [12, 13, 14, EOS]])


@torch.inference_mode()
def full_pass_log_prob(model: torch.nn.Module, source: list[int], output: list[int]) -> float:
    """log P(output, EOS | source) from one full pass over BOS, source, output (the prefix mask)."""
    seq = torch.tensor([[BOS, *source, *output]])
    logp = model.decode(seq, prefix=torch.tensor([len(source) + 1])).log_softmax(-1)[0]
    start = len(source)  # the separator's position predicts the first output token
    return float(sum(logp[start + i, tok] for i, tok in enumerate([*output, EOS])))


@pytest.mark.parametrize("overrides", [[], ["model.prefix_lm.attention=causal"], ["model.positional.kind=rope"]])
def test_beam_scores_equal_the_full_pass(overrides: list[str]) -> None:
    model = plm(overrides)
    hyps = beam_search(PrefixLMSearch(model), SRC, beam=4, alpha=0.0, max_len_a=0.0, max_len_b=6, nbest=3)
    for source, nbest in zip(SRC.tolist(), hyps, strict=True):
        assert len(nbest) == 3
        for h in nbest:
            if h.tokens and h.tokens[-1] != EOS:
                assert abs(h.log_prob - full_pass_log_prob(model, source, h.tokens)) < 1e-4


def test_beam_one_equals_greedy_and_greedy_equals_full_passes() -> None:
    model = plm()
    search = PrefixLMSearch(model)
    beam = beam_search(search, SRC, beam=1, alpha=0.0, max_len_a=0.0, max_len_b=6)
    greedy = greedy_search(search, SRC, max_len_a=0.0, max_len_b=6)
    assert [h[0].tokens for h in beam] == greedy
    for source, tokens in zip(SRC.tolist(), greedy, strict=True):  # by hand: argmax of a full pass each step
        out: list[int] = []
        for _ in range(5):  # max_len_b 6 counts EOS: at most 5 tokens, then EOS is forced
            seq = torch.tensor([[BOS, *source, *out]])
            nxt = int(model.decode(seq, prefix=torch.tensor([len(source) + 1]))[0, -1].argmax())
            if nxt == EOS:
                break
            out.append(nxt)
        assert tokens == out


def test_a_batch_holds_one_source_length() -> None:
    with pytest.raises(ValueError, match="one length"):
        PrefixLMSearch(plm()).encode(torch.tensor([[5, EOS], [EOS, 0]]))
    assert length_batches([3, 2, 3, 2, 4], 100, same_length=True) == [[1, 3], [0, 2], [4]]
    assert length_batches([3, 2, 3], 100) == [[1, 0, 2]]
