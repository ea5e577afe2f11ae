"""Data for the trainer: the tokenizer of a run and the encoded, filtered pairs of a split."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tbuild.builder.schema import Spec

from .corpus import DataError, ensure_data, read_parallel, split_files
from .tokenizer import Tokenizer
from ..tokens import EOS

Log = Callable[[str], None]


@dataclass
class Pairs:
    """Encoded parallel data. ``src`` and ``tgt`` rows end with EOS; the trainer feeds
    ``[BOS] + tgt[:-1]`` to the decoder and predicts ``tgt``."""

    src: list[list[int]]
    tgt: list[list[int]]

    def __len__(self) -> int:
        return len(self.src)


def _read_split(spec: Spec, split: str, log: Log) -> tuple[list[str], list[str], Path, Path]:
    ensure_data(spec.data, log)
    src_path, tgt_path = split_files(spec.data, split)
    source, target = read_parallel(src_path, tgt_path, f"data.{split}")
    if not source:
        raise DataError(f"data.{split}: no lines in {src_path} and {tgt_path}")
    return source, target, src_path, tgt_path


def prepare_tokenizer(spec: Spec, run_dir: Path, log: Log) -> Tokenizer:
    """data.tokenizer.model if set, else the run's spm.model, else train one on the training split."""
    tspec = spec.data.tokenizer
    stored = run_dir / "spm.model"
    if tspec.model is not None:
        tok = Tokenizer.load(Path(tspec.model))
        log(f"tokenizer: {tok.path} ({tok.vocab_size} pieces)")
    elif stored.is_file():
        tok = Tokenizer.load(stored)
        log(f"tokenizer: {stored} ({tok.vocab_size} pieces, from an earlier run)")
    else:
        source, target, _, _ = _read_split(spec, "train", log)
        if tspec.max_sentences is not None and len(source) > tspec.max_sentences:
            # max_sentences is per side: sample pairs so both languages stay balanced.
            keep = sorted(random.Random(spec.train.seed).sample(range(len(source)), tspec.max_sentences))
            source, target = [source[i] for i in keep], [target[i] for i in keep]
        log(f"tokenizer: training a shared {tspec.kind} model, vocab {tspec.vocab_size}, "
            f"on {len(source)} + {len(target)} sentences -> {stored}")
        tmp_prefix = run_dir / f".spm.{os.getpid()}"
        Tokenizer.train(source + target, tspec.model_copy(update={"max_sentences": None}),
                        tmp_prefix, seed=spec.train.seed)
        for ext in (".vocab", ".model"):  # .model last: its presence means the pair is complete
            os.replace(f"{tmp_prefix}{ext}", run_dir / f"spm{ext}")
        tok = Tokenizer.load(stored)
    _check_vocab(spec, tok, log)
    return tok


def _check_vocab(spec: Spec, tok: Tokenizer, log: Log) -> None:
    """Explicit embedding sizes need a row for every piece id; from_tokenizer follows the tokenizer."""
    for name in ("vocab_size", "src_vocab_size"):
        size = getattr(spec.model, name)
        if isinstance(size, int) and size < tok.vocab_size:
            raise DataError(f"model.{name} ({size}) is smaller than the tokenizer's {tok.vocab_size} pieces "
                            f"({tok.path}); set it to {tok.vocab_size} or use vocab_size: from_tokenizer")
    if spec.model.vocab_size == "from_tokenizer" and tok.vocab_size != spec.data.tokenizer.vocab_size:
        log(f"tokenizer: {tok.path} has {tok.vocab_size} pieces, not data.tokenizer.vocab_size "
            f"{spec.data.tokenizer.vocab_size}; the model follows the tokenizer")


def load_pairs(spec: Spec, split: str, tok: Tokenizer, log: Log, *, filter: bool) -> Pairs:
    """Read and encode a split. With ``filter`` (training) drop empty pairs, pairs with a side longer
    than data.max_length tokens (EOS counted) and pairs over data.max_length_ratio."""
    source, target, src_path, tgt_path = _read_split(spec, split, log)
    src_ids, tgt_ids = tok.encode(source), tok.encode(target)
    if not filter:
        log(f"data.{split}: {len(source)} pairs from {src_path}, {tgt_path}")
        return Pairs([s + [EOS] for s in src_ids], [t + [EOS] for t in tgt_ids])
    max_len, ratio = spec.data.max_length, spec.data.max_length_ratio
    dropped = {"empty": 0, "long": 0, "ratio": 0}
    pairs = Pairs([], [])
    for s, t in zip(src_ids, tgt_ids, strict=True):
        if not s or not t:
            dropped["empty"] += 1
        elif len(s) + 1 > max_len or len(t) + 1 > max_len:
            dropped["long"] += 1
        elif ratio is not None and max(len(s), len(t)) / min(len(s), len(t)) > ratio:
            dropped["ratio"] += 1
        else:
            pairs.src.append(s + [EOS])
            pairs.tgt.append(t + [EOS])
    summary = (f"dropped {dropped['empty']} empty, {dropped['long']} longer than {max_len} tokens, "
               f"{dropped['ratio']} over length ratio {ratio if ratio is not None else '-'}")
    log(f"data.{split}: kept {len(pairs)} of {len(source)} pairs from {src_path}, {tgt_path}; {summary}")
    if not pairs.src:
        raise DataError(f"data.{split}: no pairs left after filtering ({summary})")
    return pairs
