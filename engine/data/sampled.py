"""Subword regularisation (``data.tokenizer.sampling``): how the training split's sampled variants are encoded,
checked against the run's tokenizer, and the seed of each chunk a variant is encoded in.

Each variant is the whole training split encoded with sentencepiece's sampling (Kudo 2018, Subword
Regularization, §3.1, for a unigram model; BPE-dropout, Provilkov et al. 2020, §2, for a BPE model), every
chunk of it with a seed drawn from (train.seed, variant, chunk, side): the same on every preparation and with
any number of encoding processes. The variants are stacked in the one prepared folder (``prepare.py``) and
epoch e reads variant e mod K (``batches.epoch_rows``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tbuild.builder.spec import Spec

from ..errors import DataError
from .encoding import Sampled
from .tokenizer import Tokenizer
from .tokenizers_file import SUFFIX

UNIGRAM, BPE = 1, 2  # sentencepiece's TrainerSpec.ModelType (WORD 3 and CHAR 4 have one segmentation)


@dataclass(frozen=True)
class Sampling:
    """The sampling the training split is encoded with: sentencepiece's ``alpha`` and ``nbest`` (-1: the whole
    lattice; a BPE model ignores it), the number of ``variants`` and the run's ``seed``."""

    alpha: float
    nbest: int
    variants: int
    seed: int

    def record(self) -> dict[str, Any]:
        """What the prepared data's header keeps (a change of any of them prepares the split again)."""
        return {"alpha": self.alpha, "nbest": self.nbest, "variants": self.variants, "seed": self.seed}

    def chunk(self, variant: int, chunk: int) -> Sampled:
        """How chunk ``chunk`` of variant ``variant`` is encoded: its source and target seeds."""
        return Sampled(self.alpha, self.nbest, (self._seed(variant, chunk, "src"), self._seed(variant, chunk, "tgt")))

    def _seed(self, variant: int, chunk: int, side: str) -> int:
        digest = hashlib.sha256(f"tbuild-sampling:{self.seed}:{variant}:{chunk}:{side}".encode()).digest()
        return int.from_bytes(digest[:4], "little") % 0xFFFFFFFF  # sentencepiece's 2^32 - 1 means "unseeded"


def sampling_of(spec: Spec, tok: Tokenizer) -> Sampling | None:
    """The run's sampling (None: off), refused in one line where ``tok`` has a single segmentation (a word or
    character model), is not a sentencepiece model (an imported tokenizers file), or is a BPE model and
    ``nbest`` is set."""
    sampling = spec.data.tokenizer.sampling
    if sampling is None:
        return None
    kind = _model_type(tok)
    if kind == BPE and sampling.nbest is not None:
        raise DataError(f"data.tokenizer.sampling.nbest: {tok.path} is a bpe model, sampled by BPE-dropout, which "
                        "has no n-best: leave nbest unset")
    return Sampling(sampling.alpha, -1 if sampling.nbest is None else sampling.nbest, sampling.variants,
                    spec.train.seed)


def _model_type(tok: Tokenizer) -> int:
    """The sentencepiece model type of ``tok`` (``UNIGRAM`` or ``BPE``), else a DataError naming the field."""
    if tok.path.suffix == SUFFIX:
        raise DataError(f"data.tokenizer.sampling: the run's tokenizer {tok.path} is a Hugging Face tokenizers "
                        "file; sampling needs a sentencepiece bpe or unigram model")
    from sentencepiece import sentencepiece_model_pb2 as pb  # needs protobuf (a dependency)

    kind = pb.ModelProto.FromString(tok.sp.serialized_model_proto()).trainer_spec.model_type
    if kind not in (UNIGRAM, BPE):
        name = pb.TrainerSpec.ModelType.Name(kind).lower()
        raise DataError(f"data.tokenizer.sampling: the run's tokenizer {tok.path} is a sentencepiece {name} model, "
                        "which has one segmentation of a text; sampling needs a bpe or unigram model")
    return kind
