"""Preparing a training split: stream the corpus in chunks, encode them in worker processes with
the run's tokenizer, filter, and write memory-mapped arrays (``mapped.py``). Never holds the corpus
whole; a prepared split is reused while its header matches (tokenizer, filters, source files, sampling), so a
resumed run starts without encoding anything. With ``data.tokenizer.sampling`` the split is encoded once per
sampled variant (``sampled.py``), the variants stacked in the one folder (``header["variants"]``: each one's
pairs)."""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from functools import partial
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from tbuild.builder.spec import Spec

from ..errors import DataError
from ..run.directory import RunDir
from .corpus import iter_split, layout_of, split_paths
from .datasets import ensure_data
from .download import sha256_of
from .encoding import Encoded, Sampled, encode_chunk, init_worker
from .mapped import MappedPairs, MappedWriter, read_header, token_dtype
from .sampled import Sampling, sampling_of
from .tokenizer import Tokenizer

Log = Callable[[str], None]
CHUNK_PAIRS = 8192  # pairs per encoding task
INLINE_CHUNKS = 4  # corpora of fewer chunks are encoded in this process (Multi30k: 29,000 pairs)


def prepared_train(spec: Spec, tok: Tokenizer, run: RunDir, log: Log, *, workers: int | None = None) -> MappedPairs:
    """The run's prepared training split: reused if up to date, else (re)built, saying why."""
    folder = run.prepared("train")
    ensure_data(spec.data, log, splits=("train",))
    sampling = sampling_of(spec, tok)
    made_from = _made_from(spec, tok, sampling)
    stale = _stale(read_header(folder), made_from)
    if stale is None:
        pairs = MappedPairs(folder)
        sampled = f" ({len(pairs.variants)} sampled variants)" if pairs.variants else ""
        log(f"data.train: {len(pairs):,} prepared pairs{sampled} in {folder}")
        return pairs
    log(f"data.train: preparing {folder} ({stale})")
    prepare(spec, tok, folder, made_from, log, sampling=sampling, workers=workers)
    return MappedPairs(folder)


def prepared_id(folder: Path) -> str | None:
    """An identity of the prepared data in ``folder`` (its header's digest), for checkpoints to say
    which data their position counts in."""
    header = read_header(folder)
    return None if header is None else hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()[:16]


def _made_from(spec: Spec, tok: Tokenizer, sampling: Sampling | None) -> dict[str, Any]:
    """What a prepared split depends on: the tokenizer's bytes, the filters, the source files and the sampling
    (only when set: data prepared before it existed stays valid)."""
    files = [{"path": str(p.resolve()), "size": p.stat().st_size if p.is_file() else None,
              "mtime_ns": p.stat().st_mtime_ns if p.is_file() else None} for p in split_paths(spec.data, "train")]
    filters: dict[str, Any] = {"max_length": spec.data.max_length, "max_length_ratio": spec.data.max_length_ratio}
    for key in ("max_words", "max_words_ratio"):  # only when set: data prepared before they existed stays valid
        if getattr(spec.data, key) is not None:
            filters[key] = getattr(spec.data, key)
    special = {} if tok.special.is_default else {"special": tok.special.model_dump(mode="json")}  # what each row
    # adds: tbuild's own left out, so data prepared before the record stays valid
    sampled = {} if sampling is None else {"sampling": sampling.record()}
    return {"tokenizer_sha256": sha256_of(tok.path), "filters": filters, "sources": files, **special, **sampled}


def _stale(header: dict[str, Any] | None, made_from: dict[str, Any]) -> str | None:
    """Why a prepared split cannot be used (None: it can)."""
    if header is None:
        return "none yet"
    if header.get("format") != 1:
        return f"format {header.get('format')} is not this version's 1"
    if header.get("tokenizer_sha256") != made_from["tokenizer_sha256"] or header.get("special") != made_from.get(
            "special"):
        return "it was encoded with another tokenizer"
    if header.get("filters") != made_from["filters"]:
        return f"filters changed from {header.get('filters')} to {made_from['filters']}"
    if header.get("sources") != made_from["sources"]:
        return "the source files changed"
    if header.get("sampling") != made_from.get("sampling"):
        return f"data.tokenizer.sampling changed from {header.get('sampling')} to {made_from.get('sampling')}"
    return None


def prepare(spec: Spec, tok: Tokenizer, folder: Path, made_from: dict[str, Any], log: Log, *,
            sampling: Sampling | None = None, workers: int | None = None) -> dict[str, Any]:
    """Stream, encode, filter and write the training split into ``folder`` (once, or once per variant of
    ``sampling``); returns the header."""
    files = ", ".join(map(str, split_paths(spec.data, "train")))
    layout = layout_of(spec.data)  # a language model's text: every source is empty (EOS alone)
    started = time.monotonic()
    writer = MappedWriter(folder, token_dtype(tok.vocab_size))
    dropped = {"empty": 0, "long": 0, "ratio": 0, "words": 0}
    counted = {"read": 0}
    passes = [None] if sampling is None else [partial(sampling.chunk, v) for v in range(sampling.variants)]
    try:
        variants = [_write_pass(spec, tok, writer, (dropped, counted), sampled, workers) for sampled in passes]
        read = counted["read"] // len(variants)
        ratio = spec.data.max_length_ratio
        summary = (f"dropped{' (all variants)' if sampling else ''} {dropped['empty']} empty, "
                   f"{dropped['long']} longer than {spec.data.max_length} tokens, "
                   f"{dropped['ratio']} over length ratio {ratio if ratio is not None else '-'}")
        if spec.data.max_words is not None or spec.data.max_words_ratio is not None:
            summary += (f", {dropped['words']} over {spec.data.max_words or '-'} words or word ratio "
                        f"{spec.data.max_words_ratio or '-'}")
        if read == 0:
            raise DataError(f"data.train: no lines in {files}")
        if min(variants) == 0:
            raise DataError(f"data.train: no pairs left after filtering ({summary})")
        header = {**made_from, "source_pairs": read, "dropped": dropped,
                  **({"variants": variants} if sampling else {})}
        writer.commit(header)
    except OSError as e:
        writer.abort()
        if e.errno == errno.ENOSPC:
            raise DataError(f"data.train: no space left on the device while writing {folder}; "
                            "nothing was kept (free some space and run again)") from None
        raise DataError(f"data.train: cannot write {folder}: {e.strerror or e}") from None
    except BaseException:
        writer.abort()
        raise
    seconds = time.monotonic() - started
    kept = f"{writer.pairs:,} of {read:,} {layout.unit}"
    if sampling:
        kept = (f"{min(variants):,} to {max(variants):,} of {read:,} {layout.unit} in each of {len(variants)} "
                f"sampled variants (alpha {sampling.alpha})")
    log(f"data.train: kept {kept} from {files}; {summary} "
        f"({seconds:.1f} s, {len(variants) * read / max(seconds, 1e-9):,.0f} pairs/s)")
    return header


def _write_pass(spec: Spec, tok: Tokenizer, writer: MappedWriter, counts: tuple[dict[str, int], dict[str, int]],
                sampled: Callable[[int], Sampled] | None, workers: int | None) -> int:
    """Read, encode, filter and append the training split once (``sampled``: how each chunk is sampled, None:
    deterministically), counting into ``counts`` (dropped, read); returns the pairs kept."""
    (dropped, counted), before = counts, writer.pairs
    pairs = word_filter(iter_split(spec.data, "train"), spec.data.max_words, spec.data.max_words_ratio, dropped,
                        counted)
    added = tuple(map(len, tok.special.around("source"))), 1  # ids added around a source, after a target
    for encoded in _encoded_chunks(pairs, tok, workers, sampled):
        _write_kept(writer, encoded, (spec.data.max_length, spec.data.max_length_ratio), added, dropped,
                    not layout_of(spec.data).sourced)
    return writer.pairs - before


def word_filter(pairs: Iterator[tuple[str, str]], max_words: int | None, max_ratio: float | None,
                dropped: dict[str, int], counted: dict[str, int]) -> Iterator[tuple[str, str]]:
    """The pairs within ``max_words`` whitespace-separated words a side and a word-count ratio of
    ``max_ratio`` (Moses' clean-corpus-n, the usual WMT filter); counts what it reads and drops.
    An empty side is left to the token filters (counted there as empty)."""
    for source, target in pairs:
        counted["read"] += 1
        if max_words is not None or max_ratio is not None:
            s, t = len(source.split()), len(target.split())
            too_long = max_words is not None and max(s, t) > max_words
            skewed = max_ratio is not None and min(s, t) > 0 and max(s, t) > max_ratio * min(s, t)
            if too_long or skewed:
                dropped["words"] += 1
                continue
        yield source, target


def _encoded_chunks(pairs: Iterator[tuple[str, str]], tok: Tokenizer, workers: int | None,
                    sampled: Callable[[int], Sampled] | None = None) -> Iterator[Encoded]:
    """Encoded chunks in corpus order (``sampled``: chunk i sampled as ``sampled(i)`` says). Worker processes
    encode while the next chunks are read; at most two chunks per worker are in flight, so memory does not grow
    with the corpus."""
    chunks = iter(lambda: list(islice(pairs, CHUNK_PAIRS)), [])
    how = (lambda i: ()) if sampled is None else (lambda i: (sampled(i),))  # encode_chunk's sampling argument
    n = workers or min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    head = list(islice(chunks, INLINE_CHUNKS))
    if n <= 1 or len(head) < INLINE_CHUNKS:  # one worker, or a corpus too small to repay starting processes
        init_worker(str(tok.path), tok.special)
        for i, chunk in enumerate(chain(head, chunks)):
            yield encode_chunk([s for s, _ in chunk], [t for _, t in chunk], *how(i))
        return
    chunks = chain(head, chunks)
    # Fork where there is one (Linux): the workers run only sentencepiece and numpy, never torch, and
    # fork, unlike spawn, does not re-run the caller's main module (a script or stdin without a
    # ``__name__ == "__main__"`` guard would break).
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with ProcessPoolExecutor(n, mp_context=context, initializer=init_worker,
                             initargs=(str(tok.path), tok.special)) as pool:
        window: deque[Future[Encoded]] = deque()
        for i, chunk in enumerate(chunks):
            window.append(pool.submit(encode_chunk, [s for s, _ in chunk], [t for _, t in chunk], *how(i)))
            if len(window) >= 2 * n:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


def _write_kept(writer: MappedWriter, encoded: Encoded, limits: tuple[int, float | None], added: tuple[int, int],
                dropped: dict[str, int], text: bool = False) -> None:
    """Apply the training filters (``limits``: max length, counting what is added, and max ratio) to a chunk and
    append the pairs kept (``added``: the ids each side adds to its pieces; ``text``: a language model's,
    whose sources are all empty: only the target side can be)."""
    (max_length, max_ratio), (src_added, tgt_added) = limits, added
    src_ids, src_len, tgt_ids, tgt_len = encoded
    s, t = src_len - sum(src_added), tgt_len - tgt_added  # the pieces alone
    empty = (t == 0) if text else (s == 0) | (t == 0)
    long = ~empty & ((src_len > max_length) | (tgt_len > max_length))
    ratio = np.zeros_like(empty)
    if max_ratio is not None:
        ratio = ~empty & ~long & (np.maximum(s, t) > max_ratio * np.minimum(s, t))
    keep = ~(empty | long | ratio)
    for name, mask in (("empty", empty), ("long", long), ("ratio", ratio)):
        dropped[name] += int(mask.sum())
    writer.append("src", src_ids[np.repeat(keep, src_len)], src_len[keep])
    writer.append("tgt", tgt_ids[np.repeat(keep, tgt_len)], tgt_len[keep])
