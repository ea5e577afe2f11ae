"""A decoder-only language model through the search (engine/decoding/lm.py): the prompt forced as the
output's prefix, greedy equal to argmax over full passes (the cache changes nothing), beams and seeded
samples."""

from __future__ import annotations

import copy

import torch

from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.decoding.lm import LanguageModelSearch, prompt_ids
from tbuild.engine.decoding.model import SearchModel
from tbuild.engine.decoding.native import padded
from tbuild.engine.decoding.search import Rules, beam_search

from ...conftest import TINY, tiny_model

LM = copy.deepcopy(TINY)
LM["model"].pop("encoder")
LM["model"]["kind"] = "decoder_only"


def reference_greedy(model: torch.nn.Module, prompt: list[int], new: int) -> list[int]:
    """Argmax of full (uncached) passes over BOS + the tokens so far; PAD and BOS never chosen."""
    tokens = list(prompt)
    while len(tokens) < len(prompt) + new:
        logits = model.decode(torch.tensor([[BOS, *tokens]]))[0, -1].clone()
        logits[[PAD, BOS]] = float("-inf")
        token = int(logits.argmax())
        if token == EOS:
            break
        tokens.append(token)
    return tokens


def search(model: torch.nn.Module, prompts: list[list[int]], new: int, **options: object) -> list:
    """As generate searches: each prompt as the model reads it (BOS first, tbuild's record), its first id fed
    first, the rest forced."""
    src, pad = padded([prompt_ids(model.special, p) for p in prompts], PAD)
    return beam_search(LanguageModelSearch(model), src, src_pad=pad, alpha=0.0, max_len_a=1.0, max_len_b=new,
                       rules=Rules(prefix=src[:, 1:], prefix_len=(~pad).sum(1) - 1),
                       **options)  # type: ignore[arg-type]


def test_the_adapter_is_a_search_model() -> None:
    assert isinstance(LanguageModelSearch(tiny_model(spec=LM)), SearchModel)


def test_greedy_continues_each_prompt_as_full_passes_would() -> None:
    model = tiny_model(["model.positional.kind=rope"], spec=LM)
    prompts = [[5, 6, 7], [], [9]]
    hyps = search(model, prompts, 6, beam=1)
    for prompt, h in zip(prompts, hyps, strict=True):
        assert h[0].tokens[: len(prompt)] == prompt  # the prompt is the output's prefix
        assert h[0].tokens == reference_greedy(model, prompt, 6)
        assert len(h[0].tokens) <= len(prompt) + 6


def test_beam_search_scores_at_least_greedy() -> None:
    model = tiny_model(spec=LM)
    greedy = search(model, [[5, 6]], 5, beam=1)[0][0]
    beams = search(model, [[5, 6]], 5, beam=4, nbest=2)[0]
    assert len(beams) == 2 and beams[0].score >= greedy.score - 1e-5
    assert all(h.tokens[:2] == [5, 6] for h in beams)


def test_seeded_samples_are_reproducible() -> None:
    from tbuild.engine.decoding.search import Sampling, top_k

    model = tiny_model(spec=LM)

    def draw(seed: int) -> list[list[int]]:
        generator = torch.Generator().manual_seed(seed)
        hyps = search(model, [[5], []], 8, beam=3, nbest=3, sampling=Sampling((top_k(10),), generator))
        return [h.tokens for row in hyps for h in row]

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)


def test_a_prompt_reads_as_its_tokenizer_adds_and_an_added_end_is_refused() -> None:
    """tbuild's own record: BOS first; an imported one's: what its tokenizer adds (GPT-2 nothing, Llama 3 BOS);
    a tokenizer that adds EOS after each sequence cannot continue a prompt: one line."""
    import pytest

    from tbuild.components.specs.special import DEFAULT, Specials
    from tbuild.engine.decoding.lm import prompt_room
    from tbuild.engine.errors import TbuildError

    gpt2 = Specials(pad=None, unk=9, bos=9, eos=9, source=("text",), target=("bos", "text", "eos"))
    llama3 = Specials(pad=None, unk=None, bos=7, eos=8, source=("bos", "text"), target=("bos", "text", "eos"))
    assert prompt_ids(DEFAULT, [5, 6]) == [BOS, 5, 6] and prompt_ids(DEFAULT, []) == [BOS]
    assert prompt_ids(gpt2, [5, 6]) == [5, 6] and prompt_ids(gpt2, []) == [9]
    assert prompt_ids(llama3, [5, 6]) == [7, 5, 6]
    assert prompt_room(gpt2, 16, 6) == prompt_room(DEFAULT, 16, 6) == 9
    ended = llama3.model_copy(update={"source": ("bos", "text", "eos")})
    with pytest.raises(TbuildError, match=r"adds \['bos', 'text', 'eos'\] around each sequence"):
        prompt_room(ended, 16, 6)
    assert gpt2.generating().never == () and DEFAULT.generating().never == DEFAULT.never == (PAD, BOS)
