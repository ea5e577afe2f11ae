"""A decoder-only translator through the search (engine/decoding/prefix_lm.py): the prefix run once then
cached steps give the full pass's scores, beam 1 equals greedy, a batch of mixed source lengths (left-padded,
each row at its own positions) decodes each line as it would alone; a scheme without a shifted view keeps
batches of one source length; the translator searches a prefix LM so, refuses an ensemble holding one and
its alignments in one line."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.positional import Positional
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.components.transformer import DecoderCache, padding_mask
from tbuild.engine.decoding.ensemble import Ensemble
from tbuild.engine.decoding.model import Single
from tbuild.engine.decoding.native import NativeEngine, length_batches, searched
from tbuild.engine.decoding.prefix_lm import PrefixLMSearch, left_padded
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.errors import TbuildError

from ...components.test_prefix_lm import plm
from ...conftest import tiny_model

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


MIXED = [[5, 6, 7, EOS], [9, EOS], [12, 13, 14, 15, 16, EOS], [20, 21, EOS]]  # four source lengths
KINDS = [["model.positional.kind=sinusoidal"], ["model.positional.kind=rope"],
         ["model.positional.kind=learned", "model.max_positions=14"], ["model.positional.kind=alibi"],
         ["model.positional.kind=none"], ["model.prefix_lm.attention=causal"],
         ["model.attention.kind=relative", "model.attention.max_distance=3"]]


def right_padded(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor([row + [PAD] * (max(map(len, rows)) - len(row)) for row in rows])


def padding(rows: list[list[int]]) -> torch.Tensor:
    """The rows' padding, as their lengths tell it."""
    return padding_mask(torch.tensor([len(r) for r in rows]), max(map(len, rows)))


def caps(model: torch.nn.Module, rows: list[list[int]]) -> torch.Tensor | None:
    """Each row's output limit as the translator sets it (``output_cap``): what max_positions leaves."""
    limit = getattr(model.tgt_embed.positional, "embedding", None)
    return None if limit is None else torch.tensor([max(1, limit.num_embeddings - len(r) - 1) for r in rows])


@pytest.mark.parametrize("overrides", KINDS, ids=lambda o: ",".join(x.split("=")[1] for x in o))
@pytest.mark.parametrize(("beam", "nbest"), [(1, 1), (4, 3)])
def test_a_batch_of_mixed_source_lengths_decodes_each_line_as_alone(overrides: list[str], beam: int,
                                                                    nbest: int) -> None:
    """Left-padded prefixes with each row's own positions: the same tokens and scores (1e-5) as decoding
    every line alone, for beam 1 and beam 4 with an n-best list, for each positional scheme."""
    model = plm(overrides)
    search = PrefixLMSearch(model)
    assert search.mixes_lengths
    options = {"beam": beam, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 4, "nbest": nbest, "token_scores": True}
    batch = beam_search(search, right_padded(MIXED), src_pad=padding(MIXED), max_len_cap=caps(model, MIXED),
                        **options)
    for source, together in zip(MIXED, batch, strict=True):
        alone = beam_search(search, torch.tensor([source]), max_len_cap=caps(model, [source]), **options)[0]
        assert [h.tokens for h in together] == [h.tokens for h in alone] and len(alone) == nbest
        for a, b in zip(together, alone, strict=True):
            assert abs(a.score - b.score) < 1e-5 and abs(a.log_prob - b.log_prob) < 1e-5
            assert torch.allclose(torch.tensor(a.token_log_probs), torch.tensor(b.token_log_probs), atol=1e-5)
    greedy = greedy_search(search, right_padded(MIXED), src_pad=padding(MIXED), max_len_a=1.0, max_len_b=4,
                           max_len_cap=caps(model, MIXED))
    assert greedy == [greedy_search(search, torch.tensor([s]), max_len_a=1.0, max_len_b=4,
                                    max_len_cap=caps(model, [s]))[0] for s in MIXED]


@pytest.mark.parametrize("overrides", KINDS[:2], ids=["sinusoidal", "rope"])
def test_padding_never_changes_a_real_rows_logits(overrides: list[str]) -> None:
    """A left-padded prefix and cached steps after it: each real column's logits are the row's alone, and
    any values at the padding columns change none of them."""
    model = plm(overrides)
    prefix, start = left_padded(right_padded(MIXED), padding(MIXED), BOS, PAD)
    assert prefix[1].tolist() == [PAD] * 4 + [BOS, 9, EOS] and start.tolist() == [2, 4, 0, 3]
    target = torch.tensor([[30, 31], [32, 33], [34, 35], [36, 37]])
    with torch.inference_mode():
        cache = DecoderCache()
        batch = [model.decode(prefix, cache, start=start), model.decode(target[:, :1], cache, start=start),
                 model.decode(target[:, 1:], cache, start=start)]
        noisy = prefix.masked_fill(prefix.eq(PAD), 17)  # other tokens in the padding: still masked
        other = model.decode(noisy, DecoderCache(), start=start)
        for row, source in enumerate(MIXED):
            seq = torch.tensor([[BOS, *source, *target[row].tolist()]])
            alone = model.decode(seq, prefix=torch.tensor([len(source) + 1]))[0]  # (P + 2, V)
            p = len(source) + 1
            assert torch.allclose(batch[0][row, int(start[row]):], alone[:p], atol=1e-5)
            assert torch.allclose(other[row, int(start[row]):], alone[:p], atol=1e-5)
            assert torch.allclose(batch[1][row, 0], alone[p], atol=1e-5)
            assert torch.allclose(batch[2][row, 0], alone[p + 1], atol=1e-5)


class Unshiftable(Positional):
    """A plugin's scheme with no view for left-padded batches (``Positional.shift`` "none")."""


def test_a_scheme_without_a_shifted_view_keeps_batches_of_one_source_length() -> None:
    model = plm(["model.positional.kind=none"])
    model.tgt_embed.positional = Unshiftable()
    search = PrefixLMSearch(model)
    assert not search.mixes_lengths
    with pytest.raises(ValueError, match="one length"):
        search.encode(torch.tensor([[5, EOS], [EOS, 0]]), padding([[5, EOS], [EOS]]))
    search.encode(torch.tensor([[5, EOS], [6, EOS]]))  # one length: decoded as before
    assert length_batches([3, 2, 3, 2, 4], 100, same_length=True) == [[1, 3], [0, 2], [4]]
    assert length_batches([3, 2, 3], 100) == [[1, 0, 2]]


def test_the_translator_searches_the_module_built() -> None:
    """A prefix LM is searched prefix-then-steps, an encoder-decoder as ``Single``, an ensemble of encoder-decoders
    as it is; an ensemble holding a prefix LM and a prefix LM's alignments are refused in one line."""
    prefix_lm, translator = plm(), tiny_model()
    assert isinstance(searched(prefix_lm), PrefixLMSearch)
    assert isinstance(searched(translator), Single)
    both = Ensemble([translator, translator], [1.0, 1.0], "prob")
    assert searched(both) is both
    with pytest.raises(TbuildError, match="an ensemble of decoder-only translators"):
        searched(Ensemble([translator, prefix_lm], [1.0, 1.0], "prob"))
    t = NativeEngine(prefix_lm, None, None, "test", 8, None)  # type: ignore[arg-type]
    with pytest.raises(TbuildError, match="a decoder-only translator .* has none"):
        t.alignments(["a b"], [[]])
