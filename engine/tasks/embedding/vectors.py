"""`tbuild embed`: one vector per input line from an encoder-only run, its final states pooled as its
``sentence_embedding`` head says (the folder's pooling, stored at import) or as asked (``--pooling``), computed
as sentence-transformers computes them (``Pooling``: the mean over the attention mask, or the [CLS] state;
``Normalize``: divided by the L2 norm) on the ids its tokenizer gives ([CLS] … [SEP]: the run's ``source``).

A line longer than the head's ``max_length`` (sentence-transformers' ``max_seq_length``), else the model's
positions, is cut to it as sentence-transformers cuts it (the text's last pieces dropped, [SEP] kept), with a
warning naming the line. An empty line (or one the tokenizer keeps nothing of), and a run that is not an
encoder, are refused in one line. The vectors are computed in float32 on the chosen device."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.builder import build_model
from tbuild.builder.spec import Spec
from tbuild.components.heads import SentenceEmbedding
from tbuild.components.specs.graph import with_article
from tbuild.components.specs.head import SentenceEmbeddingSpec

from ...data.tokenizer import run_tokenizer
from ...decoding.native import encode_sources, length_batches, max_source, padded
from ...device.policy import choose_device
from ...errors import TbuildError
from ...run.directory import Run
from ...run.weights import load_weights

Log = Callable[[str], None]


@dataclass(frozen=True)
class Embedding:
    """How a run's vectors are made: the pooling head and the most tokens an input keeps."""

    head: SentenceEmbeddingSpec
    limit: int


def embedding_of(spec: Spec, pooling: str | None = None) -> Embedding:
    """The run's pooling (``pooling``: mean or cls, else its ``sentence_embedding`` head's, else the mean over
    the input, sentence-transformers' default) and input limit; a run that is not an encoder: one line."""
    if spec.model.graph.stacks != ("encoder",):
        raise TbuildError(f"tbuild embed pools an encoder's states, and {spec.name or 'this run'} is "
                          f"{with_article(spec.model.kind)} model: give an encoder_only run (e.g. one imported "
                          "from a BertModel folder with tbuild import hf)")
    head = spec.model.head if isinstance(spec.model.head, SentenceEmbeddingSpec) else SentenceEmbeddingSpec()
    if pooling is not None:
        if pooling not in ("mean", "cls"):
            raise TbuildError(f"--pooling {pooling!r}: choose mean or cls")
        head = head.model_copy(update={"pooling": pooling})
    return Embedding(head, head.max_length or max_source(spec))


def embed_lines(run: Run, lines: list[str], name: str, *, pooling: str | None = None, device: str = "auto",
                checkpoint: Path | None = None, warn: Log = lambda _: None) -> torch.Tensor:
    """(lines, d_model) float32 vectors of ``lines`` (read from ``name``, for messages) by ``run``."""
    embedding = embedding_of(run.spec, pooling)
    empty = next((n for n, line in enumerate(lines, 1) if not line), None)
    if empty is not None:
        raise TbuildError(f"{name}: line {empty} is empty: a sentence vector needs text")
    tok = run_tokenizer(run.tokenizer, run.spec)
    rows = encode_sources(tok, lines, embedding.limit, lambda message: warn(f"{name}: {message}"))
    empty = next((n for n, row in enumerate(rows, 1) if not row), None)
    if empty is not None:  # its text all dropped by the tokenizer's normalizer
        raise TbuildError(f"{name}: line {empty} gives no token: a sentence vector needs text")
    dev = choose_device(device)
    model = build_model(run.spec)
    load_weights(model, run, checkpoint=checkpoint)
    model = model.eval().to(dev)
    head = SentenceEmbedding(embedding.head, d_model=run.spec.model.d_model)
    out = torch.empty(len(rows), run.spec.model.d_model)
    with torch.inference_mode():
        for batch in length_batches([len(r) for r in rows], run.spec.decode.batch_tokens):
            ids, pad = padded([rows[i] for i in batch], tok.special.fill)
            states, pad = model.encode(ids.to(dev), pad.to(dev))
            out[batch] = head(states, pad)[:, 0].float().cpu()
    return out


def vector_file(vectors: torch.Tensor, npy: bool) -> bytes:
    """The vectors as one JSON array a line, or (``npy``) a float32 array in NumPy's ``.npy`` format."""
    if not npy:
        return "".join(json.dumps(row) + "\n" for row in vectors.tolist()).encode()
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, vectors.numpy().astype(np.float32))
    return buffer.getvalue()
