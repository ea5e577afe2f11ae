"""What every implementation is timed on: the named shapes (as tbuild specs), and the same seeded
random batches, cut by tbuild's own batcher so that they look like `tbuild train`'s."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from tbuild.builder import LoadedSpec, load_spec
from tbuild.components.specs.special import EOS
from tbuild.engine.data.batches import token_batches
from tbuild.engine.data.pairs import Pairs

FIRST_ID = 4  # ids 0-3 are pad, unk, bos, eos (builder/tokens.py)


@dataclass(frozen=True)
class Shape:
    """Model dimensions; the same on every implementation (post-norm, ReLU, sinusoidal positions,
    three-way tied embeddings, as the paper's base)."""

    name: str
    d_model: int
    layers: int
    heads: int
    d_ff: int


SHAPES = {
    "tiny": Shape("tiny", 256, 3, 4, 1024),  # specs/multi30k-v1.yaml's dimensions (the first recipe)
    "base": Shape("base", 512, 6, 8, 2048),  # Table 3 "base"
    "big": Shape("big", 1024, 6, 16, 4096),  # Table 3 "big"
}


@dataclass(frozen=True)
class Lengths:
    """Sentence lengths in tokens (EOS counted): uniform in [low, high] (Multi30k-like), or
    log-normal around ``median`` clipped to [low, high] (WMT-like)."""

    low: int
    high: int
    median: float | None = None

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.median is None:
            return rng.integers(self.low, self.high + 1, n)
        return np.clip(np.rint(rng.lognormal(np.log(self.median), 0.6, n)), self.low, self.high).astype(np.int64)


MULTI30K_LENGTHS = Lengths(12, 30)
WMT_LENGTHS = Lengths(3, 128, median=28.0)


@dataclass(frozen=True)
class Workload:
    """One training comparison's data: shape, vocabulary, token budget per batch, lengths, seed."""

    shape: Shape
    vocab: int
    batch_tokens: int
    lengths: Lengths
    batches: int  # how many distinct batches (one per timed round, warm-up included)
    seed: int = 0

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> Workload:
        return Workload(Shape(**data["shape"]), data["vocab"], data["batch_tokens"], Lengths(**data["lengths"]),
                        data["batches"], data["seed"])


def tbuild_spec(shape: Shape, vocab: int, overrides: dict | None = None) -> LoadedSpec:
    """The shape as a tbuild spec: specs/base.yaml's architecture (post-norm, no final norm, ReLU,
    sinusoidal positions, three-way tying, dropout 0.1; LayerNorm eps 1e-5 as the peers) and training
    settings (Adam β 0.9/0.98, ε 1e-9, label smoothing 0.1, noam schedule), with ``overrides`` on ``train``."""
    stack = {"layers": shape.layers, "heads": shape.heads, "d_ff": shape.d_ff}
    return load_spec({
        "name": f"bench-{shape.name}",
        "model": {"vocab_size": vocab, "d_model": shape.d_model, "encoder": stack, "decoder": stack,
                  "norm_placement": "post", "final_norm": False, "tie_embeddings": "three_way",
                  "positional": {"kind": "sinusoidal"}, "ffn": {"kind": "relu"},
                  # eps 1e-5: nn.Transformer's and MarianMTModel's (fixed), so the weights export to Marian
                  "norm": {"kind": "layernorm", "eps": 1.0e-5},
                  "dropout": {"residual": 0.1, "embedding": 0.1, "attention": 0.0, "activation": 0.0}},
        "train": {"optimizer": {"betas": [0.9, 0.98], "eps": 1e-9}, "label_smoothing": 0.1,
                  "schedule": {"kind": "noam", "warmup": 4000}, **(overrides or {})},
    })


def corpus(work: Workload) -> tuple[Pairs, list[np.ndarray]]:
    """Random pairs (ids in [4, vocab), each ending with EOS) and the first ``work.batches`` training
    batches that tbuild's batcher cuts from them: the same in every process for the same workload."""
    rng = np.random.default_rng(work.seed)
    mean = (work.lengths.low + work.lengths.high) / 2 if work.lengths.median is None else work.lengths.median
    n = int(3 * work.batches * work.batch_tokens / mean) + 64  # enough pairs for the batches asked
    src_len = work.lengths.sample(rng, n)
    # targets correlate with sources, as translations do
    tgt_len = np.clip(src_len + rng.integers(-3, 4, n), work.lengths.low, work.lengths.high)
    src = [_sentence(rng, int(k), work.vocab) for k in src_len]
    tgt = [_sentence(rng, int(k), work.vocab) for k in tgt_len]
    pairs = Pairs(src, tgt)
    batches = token_batches(pairs.src_lengths, pairs.tgt_lengths, work.batch_tokens, seed=work.seed, epoch=0)
    if len(batches) < work.batches:  # pragma: no cover - 3x the pairs needed on average
        raise RuntimeError(f"{len(batches)} batches cut, {work.batches} needed")
    return pairs, batches[: work.batches]  # the batcher shuffles their order


def _sentence(rng: np.random.Generator, length: int, vocab: int) -> list[int]:
    return rng.integers(FIRST_ID, vocab, length - 1).tolist() + [EOS]
