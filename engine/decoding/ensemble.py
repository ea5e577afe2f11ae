"""Ensembles: several runs decoding as one model, their next-token distributions combined at every
step. Runs must share the tokenizer (same file, sha256), vocabulary and special ids; this is checked
before any model is loaded.

Combination rules (weights w normalised to sum 1):
- ``prob`` (fairseq): log Σ_i w_i P_i(y | ·), a mixture, already normalised.
- ``logprob`` (Eole): Σ_i w_i log P_i(y | ·), renormalised over the vocabulary by the search's
  log-softmax (a weighted geometric mean of the distributions).

An ensemble is a ``SearchModel`` (``model.py``), as a single model is: the search does not know which
it decodes with. An ensemble of one model is that model (its own scores, as ``Single`` gives them).
A tagger's or classifier's ensemble (``LabelEnsemble``) combines the label distributions by the same rules."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.builder.spec import Spec
from tbuild.components.transformer import DecoderCache

from ..data.tokenizer import Tokenizer, run_tokenizer
from ..errors import TbuildError
from ..run.directory import Run

COMBINE = ("logprob", "prob")
RULES = {"logprob": "log P(y) = log-softmax(Σ_i w_i log P_i(y)) (weighted log-probabilities, renormalised)",
         "prob": "log P(y) = log Σ_i w_i P_i(y) (weighted probabilities)"}


@dataclass
class EnsembleCache:
    """One decoder cache per model, reordered together."""

    caches: list[DecoderCache]

    def reorder(self, index: torch.Tensor, *, sources: torch.Tensor | None = None) -> None:
        for cache in self.caches:
            cache.reorder(index, sources=sources)


class Ensemble:
    """Models combined into one ``SearchModel``; ``decode`` returns the combined log-probabilities."""

    def __init__(self, models: list[torch.nn.Module], weights: list[float], combine: str) -> None:
        self.models, self.combine = models, combine
        self.members = tuple(models)
        self.special = models[0].special  # one for all: the runs share their tokenizer (check_compatible)
        self.weights = shares(weights)

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None
               ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """Each model's memory (a tuple) and the padding mask they share."""
        outs = [m.encode(src, pad) for m in self.models]
        return tuple(memory for memory, _ in outs), outs[0][1]

    def new_cache(self) -> EnsembleCache:
        return EnsembleCache([DecoderCache() for _ in self.models])

    def decode(self, tgt: torch.Tensor, memory: tuple[torch.Tensor, ...], memory_pad: torch.Tensor | None,
               cache: EnsembleCache | None = None, *, beams: int = 1) -> torch.Tensor:
        caches = cache.caches if cache is not None else [None] * len(self.models)
        lprobs = torch.stack([m.decode(tgt, mem, memory_pad, c, beams=beams).float().log_softmax(-1)
                              for m, mem, c in zip(self.models, memory, caches, strict=True)])  # (M, N, T, V)
        return combined(lprobs, self.weights, self.combine)

    def step(self, last: torch.Tensor, memory: tuple[torch.Tensor, ...], pad: torch.Tensor, cache: EnsembleCache,
             beams: int) -> torch.Tensor:
        """(N, V) the next token's combined log-probabilities (the search renormalises them); one model:
        its own scores."""
        if len(self.models) == 1:
            return self.models[0].decode(last, memory[0], pad, cache.caches[0], beams=beams)[:, -1].float()
        return self.decode(last, memory, pad, cache, beams=beams)[:, -1].float()

    @staticmethod
    def select(memory: tuple[torch.Tensor, ...], kept: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Each model's memory rows ``kept``."""
        return tuple(m.index_select(0, kept) for m in memory)

    def __call__(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced combined log-probabilities (B, T, V)."""
        memory, pad = self.encode(src, src_pad)
        return self.decode(tgt, memory, pad)


def shares(weights: list[float]) -> list[float]:
    """``weights`` normalised to sum 1."""
    total = sum(weights)
    return [w / total for w in weights]


def combined(lprobs: torch.Tensor, weights: list[float], combine: str) -> torch.Tensor:
    """(M, ...) each model's log-probabilities, ``weights`` summing to 1 -> the rule's combination (module
    docstring)."""
    shape = (-1,) + (1,) * (lprobs.dim() - 1)
    if combine == "prob":
        log_w = torch.tensor([math.log(w) for w in weights], device=lprobs.device).view(shape)
        return torch.logsumexp(lprobs + log_w, 0)
    return (lprobs * torch.tensor(weights, device=lprobs.device).view(shape)).sum(0)


class LabelEnsemble(torch.nn.Module):
    """Taggers' or classifiers' models as one: each position's combined label log-probabilities, which the
    task reads as a single model's label scores (its best label, its loss)."""

    def __init__(self, models: list[torch.nn.Module], weights: list[float], combine: str) -> None:
        super().__init__()
        self.members = torch.nn.ModuleList(models)
        self.combine = combine
        self.weights = shares(weights)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor | None = None,
                src_pad: torch.Tensor | None = None) -> torch.Tensor:
        lprobs = torch.stack([m(src, None, src_pad).float().log_softmax(-1) for m in self.members])  # (M, B, T, L)
        return combined(lprobs, self.weights, self.combine)


def check_weights(count: int, weights: list[float] | None, combine: str) -> list[float]:
    """One positive weight per model (default: equal)."""
    if combine not in COMBINE:
        raise TbuildError(f"--combine {combine!r}: choose one of {', '.join(COMBINE)}")
    if weights is None:
        return [1.0] * count
    if len(weights) != count:
        raise TbuildError(f"--weights: {len(weights)} weights for {count} models")
    if any(not w > 0 for w in weights):
        raise TbuildError("--weights must all be positive")
    return weights


def check_compatible(runs: list[Run]) -> None:
    """Refuse, naming the field, runs that do not share vocabulary size, special ids and tokenizer
    (sha256 of the tokenizer model): read from the files, before any model is loaded."""
    first = _identity(runs[0])
    for run in runs[1:]:
        other = _identity(run)
        for field, value in first.items():
            if other[field] != value:
                raise TbuildError(f"ensemble: {run.dir.path} has a different {field} than {runs[0].dir.path} "
                                  f"({other[field]} vs {value}); models of an ensemble share one tokenizer")


def _identity(run: Run) -> dict[str, object]:
    if not run.tokenizer.exists():
        raise TbuildError(f"{run.dir.path}: no tokenizer; train the run first")
    tok = run_tokenizer(run.tokenizer, run.spec)
    return {"vocabulary size": _vocab(run.spec, tok), "special ids": tok.special,
            "tokenizer sha256": hashlib.sha256(Path(run.tokenizer).read_bytes()).hexdigest()[:16]}


def _vocab(spec: Spec, tok: Tokenizer) -> int:
    size = spec.model.vocab_size
    return size if isinstance(size, int) else tok.vocab_size


def ensemble_header(count: int, weights: list[float], combine: str) -> str:
    """The rule stated in the output header."""
    each = ", ".join(f"{w:.3g}" for w in shares(weights))
    return f"ensemble of {count} models, --combine {combine}: {RULES[combine]}, weights {each}"


def load_ensemble(runs: list[Run], weights: list[float] | None, combine: str, *, load: Callable,
                  labels: Callable[[Spec], object] | None = None):
    """``load(run)`` each run's native translator (after ``check_compatible``) and join them in one
    translator whose model is the ``Ensemble``; with ``labels`` (what a tagger's or classifier's task reads its
    labels with, checked to be every run's), the ``LabelEnsemble``."""
    from dataclasses import replace

    weights = check_weights(len(runs), weights, combine)
    check_compatible(runs)
    for run in runs[1:] if labels is not None else ():
        if labels(run.spec) != labels(runs[0].spec):
            raise TbuildError(f"ensemble: {run.dir.path} reads other labels than {runs[0].dir.path} "
                              f"({labels(run.spec)} vs {labels(runs[0].spec)}); the members of an ensemble share "
                              "them")
    parts = [load(run) for run in runs]
    model = (Ensemble if labels is None else LabelEnsemble)([p.model for p in parts], weights, combine)
    return replace(parts[0], model=model, weights=" + ".join(p.weights for p in parts),
                   max_source_tokens=min(p.max_source_tokens for p in parts))
