"""A decoder-only language model (``model.kind: decoder_only``) through the search: ``tbuild generate``
continues prompts with greedy or beam search or the sampling modes of ``search.py``, and ``tbuild
evaluate`` reports its perplexity on a split.

The search (``search.beam_search``) sees the model through its ``SearchModel`` protocol
(``model.py``): there is nothing to encode, so ``encode`` hands back the prompts themselves (their
padding mask bounds the output length: prompt + ``max_new_tokens``), and every step is one incremental
``decode`` with the self-attention cache. A prompt is read as its tokenizer encodes it by default
(``prompt_ids``): the first of its ids is fed first, the others are forced as the output's prefix
(``Rules.prefix``, as ``tbuild decode`` forces a target prefix), so the output is the prompt and its
continuation, and greedy search continues it as Hugging Face's ``generate`` does on ``tok(prompt)``; an empty
prompt is an unconditional sample from the vocabulary's start id (BOS).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.components.specs.special import Specials
from tbuild.components.transformer import DecoderCache

from ..data.pairs import load_pairs
from ..errors import TbuildError
from ..loss import evaluate_loss
from ..run.directory import EvalRecord, Run
from .native import NativeEngine, length_batches, load_native_engine, padded, sampler
from .request import DecodeRequest, Hooks
from .search import Hypothesis, Rules, beam_search

PREFIX_LM_COMMANDS = ("decode", "evaluate", "serve")  # what a decoder-only translator's run takes (tasks/)
DEFAULT_MAX_POSITIONS = 1024  # prompt tokens kept when the model has no max_positions


class LanguageModelSearch:
    """A decoder-only model as a ``SearchModel``: no encoder, each step one cached ``decode``."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.members = (model,)
        self.special = model.special.generating()  # an imported model's bans nothing, as HF's generate
        self._decode = model.decode

    @staticmethod
    def encode(src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The prompts (B, P) stand for the memory (never read by ``step``); their padding mask ``pad`` gives
        each row's prompt length to the output's length limit."""
        return src, torch.zeros(src.shape, dtype=torch.bool, device=src.device) if pad is None else pad

    @staticmethod
    def new_cache() -> DecoderCache:
        return DecoderCache()

    def step(self, last: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor, cache: DecoderCache,
             beams: int) -> torch.Tensor:
        """The next token's logits; the first step reads each prompt's first id (the memory's first column:
        ``prompt_ids``) in place of the start id the search feeds."""
        if cache.offset == 0:
            last = memory[:, :1]
        return self._decode(last, cache)[:, -1].float()

    @staticmethod
    def select(memory: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        return memory.index_select(0, kept)


@dataclass
class LanguageModel:
    """A trained language model: its weights on the decoding policy's device, tokenizer and position limit."""

    translator: NativeEngine  # the native loading (weights, device, precision, int8, packing) it shares

    @property
    def max_positions(self) -> int | None:
        return self.translator.max_output_len


def load_language_model(run: Run, *, checkpoint: Path | None = None, average: int | None = None,
                        device: str = "auto", quantization: str = "float32",
                        notify: Callable[[str], None] = lambda _: None) -> LanguageModel:
    """The run's language model, loaded as ``load_native_engine`` loads a translator (the same weights
    choice, device, precision and int8 linears)."""
    return LanguageModel(load_native_engine(run, checkpoint=checkpoint, average=average, device=device,
                                         quantization=quantization, notify=notify))


def prompt_ids(special: Specials, ids: list[int]) -> list[int]:
    """A prompt's ``ids`` as the model reads them, at least one: a run tbuild trained (tbuild's own record,
    ``Specials.is_default``) reads its start then the prompt, as it was trained; an imported one reads what its
    tokenizer gives by default (``source``: GPT-2's ids alone, Llama 3's BOS first), the ids Hugging Face's
    ``tok(prompt)`` gives. An empty prompt is the start alone."""
    if not ids:
        return [special.start]
    if special.is_default:
        return [special.start, *ids]
    return special.wrap(ids, "source")


def prompt_room(special: Specials, max_positions: int | None, max_new_tokens: int) -> int:
    """How many of a prompt's tokens fit the model's positions with ``max_new_tokens`` after them (what
    ``prompt_ids`` adds counted); a refusal where the tokenizer adds something after a sequence (a prompt would
    end with EOS, where generation stops) or nothing fits."""
    before, after = ([special.start], []) if special.is_default else special.around("source")
    if after:
        raise TbuildError(f"the tokenizer adds {list(special.source)} around each sequence "
                          "(data.tokenizer.special.source): a prompt would end with eos, where generation stops")
    room = (max_positions or DEFAULT_MAX_POSITIONS) - max(1, len(before)) - max_new_tokens
    if room < 0:
        raise TbuildError(f"--max-new-tokens {max_new_tokens} does not fit the model's {max_positions} "
                          "positions (BOS included)")
    return room


def encode_prompts(lm: LanguageModel, prompts: list[str], max_new_tokens: int,
                   warn: Callable[[str], None] = lambda _: None) -> list[list[int]]:
    """Each prompt's ids as the model reads them (``prompt_ids``); one too long for the model's positions keeps
    its last tokens, with a warning naming the line."""
    tok = lm.translator.tokenizer
    limit = prompt_room(tok.special, lm.max_positions, max_new_tokens)
    out: list[list[int]] = []
    for n, ids in enumerate(tok.encode(prompts), 1):
        if len(ids) > limit:
            warn(f"line {n}: a prompt of {len(ids)} tokens and {max_new_tokens} new ones exceed the model's "
                 f"positions; its last {limit} tokens kept")
            ids = ids[len(ids) - limit:]
        out.append(prompt_ids(tok.special, ids))
    return out


def _with_first(h: Hypothesis, first: int, special: Specials) -> Hypothesis:
    """``h`` with the prompt's first id in front where it is text (not the start, which output leaves out). It
    was read, not predicted: its log-probability is 0, the prompt being given."""
    if first == special.start:
        return h
    scores = [0.0, *h.token_log_probs] if h.token_log_probs else []
    return dataclasses.replace(h, tokens=[first, *h.tokens], token_log_probs=scores)


def generate(lm: LanguageModel, prompts: list[str], request: DecodeRequest, max_new_tokens: int,
             hooks: Hooks = Hooks()) -> list[list[Hypothesis]]:
    """n-best continuations of each prompt (each output holds its prompt), in input order: beam search
    (beam 1: greedy) or the request's sampling, at most ``max_new_tokens`` tokens after the prompt (an
    EOS may end it sooner). The request's length penalty and n-gram blocking apply; its target prefixes
    and constraints are a translator's and are refused."""
    if request.prefixes is not None or request.constraints is not None:
        raise TbuildError("generate takes prompts only: no target prefixes or constraints")
    model, policy = LanguageModelSearch(lm.translator.model), lm.translator.policy
    ids = encode_prompts(lm, prompts, max_new_tokens, hooks.warn)
    results: list[list[Hypothesis]] = [[] for _ in prompts]
    sampling = sampler(request, policy.device)
    for rows in length_batches([len(p) for p in ids], request.batch_tokens):
        prompt, pad = (t.to(policy.device) for t in padded([ids[i] for i in rows], model.special.fill))
        rules = Rules(prefix=prompt[:, 1:], prefix_len=(~pad).sum(1) - 1, no_repeat_ngram=request.no_repeat_ngram)
        with policy.autocast():  # |Y| at most: the prompt after its first id, the new tokens, EOS
            hyps = beam_search(model, prompt, src_pad=pad, beam=request.width, alpha=request.alpha, max_len_a=1.0,
                               max_len_b=max_new_tokens, nbest=request.nbest, min_len=request.min_len,
                               max_len_cap=lm.max_positions, rules=rules,
                               sampling=sampling, token_scores=request.token_scores, stopping=request.stopping,
                               patience=request.patience)
        for i, h in zip(rows, hyps, strict=True):
            results[i] = [_with_first(one, ids[i][0], model.special) for one in h]
        hooks.after_batch()
        hooks.progress(len(rows))
    return results


def evaluate_perplexity(run: Run, lm: LanguageModel, split: str) -> EvalRecord:
    """The teacher-forced perplexity per token (EOS included) of the split's lines, in eval mode."""
    started = time.perf_counter()
    pairs = load_pairs(run.spec, split, lm.translator.tokenizer, lambda _: None)
    t = lm.translator
    result = evaluate_loss(t.model, pairs, batch_tokens=run.spec.train.batch_tokens,
                           label_smoothing=run.spec.train.label_smoothing, policy=t.policy,
                           special=run.spec.special())
    seconds = time.perf_counter() - started
    return EvalRecord(split=split, sentences=len(pairs), weights=t.weights, perplexity=result["ppl"],
                      nll=result["nll"], tokens=result["tokens"], seconds=seconds, precision=t.precision)
