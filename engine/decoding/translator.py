"""Translate lines with a trained run: weights selection, length-sorted batches, beam search."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.builder import build_model
from tbuild.builder.schema import DecodeSpec
from tbuild.components.transformer import EncoderDecoder

from ..checkpoint import CheckpointError, average_checkpoints, load_into, step_checkpoints
from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from ..process import autocast, release_free_memory
from ..run_dir import BEST_FILE, TOKENIZER_FILE, Run
from ..tokens import EOS, PAD
from .search import Hypothesis, beam_search

DEFAULT_MAX_SOURCE = 1024  # source tokens kept when the model has no max_positions


@dataclass
class Translator:
    model: EncoderDecoder
    tokenizer: Tokenizer
    weights: str  # which weights were loaded, for reports
    max_source_tokens: int
    max_output_len: int | None  # |Y| limit (EOS included): the decoder's max_positions, if set


def load_translator(run: Run, *, checkpoint: Path | None = None, average: int | None = None,
                    device: torch.device | None = None) -> Translator:
    """Build the run's model and load weights: a named checkpoint, the average of the newest K,
    the best by validation perplexity, or else the newest checkpoint."""
    tok_path = run.run_dir / TOKENIZER_FILE
    if not tok_path.exists():
        raise TbuildError(f"{run.run_dir}: no tokenizer ({TOKENIZER_FILE}); has this run been trained?")
    tokenizer = Tokenizer.load(tok_path)
    model = build_model(run.spec)
    arch = run.spec.architecture_hash()
    checkpoint = checkpoint or run.checkpoint
    if average:
        paths = step_checkpoints(run.run_dir)[-average:]
        if len(paths) < average:
            raise TbuildError(f"{run.run_dir}: asked to average {average} checkpoints but only {len(paths)} exist")
        tensors, meta = average_checkpoints(paths)
        if meta.get("architecture") != arch:
            raise CheckpointError(f"{paths[-1]}: checkpoint is of another model")
        model.load_state_dict({k[6:]: v for k, v in tensors.items()}, strict=False)
        weights = f"average of {', '.join(p.name for p in paths)}"
    else:
        if checkpoint is None:
            best = run.run_dir / BEST_FILE
            newest = step_checkpoints(run.run_dir)[-1:]
            if best.exists():
                checkpoint = best
            elif newest:
                checkpoint = newest[0]
            else:
                raise TbuildError(f"{run.run_dir}: no checkpoints; train it first with `tbuild train`")
        load_into(checkpoint, model, expect_hash=arch)
        weights = checkpoint.name
    model.eval()
    if device is not None:
        model.to(device)
    max_positions = run.spec.model.max_positions
    return Translator(model, tokenizer, weights, max_positions or DEFAULT_MAX_SOURCE, max_positions)


def length_batches(lengths: list[int], budget: int, beam: int) -> list[list[int]]:
    """Indices sorted by length, cut so that (longest source · sentences · beam) ≤ budget · beam."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and lengths[i] * (len(current) + 1) > budget:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def translate(translator: Translator, lines: list[str], spec: DecodeSpec,
              warn: Callable[[str], None] = lambda _: None,
              progress: Callable[[int], None] = lambda _: None) -> list[list[Hypothesis]]:
    """n-best hypotheses for each line, in input order. Empty lines give an empty hypothesis list;
    lines over the model's source limit are truncated with a warning."""
    tok, model = translator.tokenizer, translator.model
    limit = translator.max_source_tokens
    ids = tok.encode(lines)
    sources: list[list[int]] = []
    for n, pieces in enumerate(ids, 1):
        if len(pieces) + 1 > limit:
            warn(f"line {n}: {len(pieces) + 1} tokens exceed the model's limit of {limit}; truncated")
            pieces = pieces[: limit - 1]
        sources.append(pieces + [EOS] if pieces else [])
    results: list[list[Hypothesis]] = [[] for _ in lines]
    todo = [i for i, s in enumerate(sources) if s]
    device = next(model.parameters()).device
    for batch in length_batches([len(sources[i]) for i in todo], spec.batch_tokens, spec.beam):
        rows = [todo[j] for j in batch]
        width = max(len(sources[i]) for i in rows)
        src = torch.full((len(rows), width), PAD, dtype=torch.long)
        for r, i in enumerate(rows):
            src[r, : len(sources[i])] = torch.tensor(sources[i])
        with autocast(device, spec.precision):
            hyps = beam_search(model, src.to(device), beam=spec.beam, alpha=spec.alpha, max_len_a=spec.max_len_a,
                               max_len_b=spec.max_len_b, nbest=spec.nbest, max_len_cap=translator.max_output_len)
        for i, h in zip(rows, hyps, strict=True):
            results[i] = h
        release_free_memory()
        progress(len(rows))
    return results


def decode_lines(data: bytes, name: str) -> list[str]:
    """Split raw input on newlines and decode UTF-8, naming the first bad line."""
    if not data:
        return []
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    lines = []
    for n, line in enumerate(raw, 1):
        try:
            lines.append(line.decode("utf-8").rstrip("\r").strip())
        except UnicodeDecodeError as e:
            raise TbuildError(f"{name}: line {n} is not valid UTF-8 (byte {e.start})") from None
    return lines
