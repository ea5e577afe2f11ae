"""Score a run on a split: sacreBLEU BLEU (cased and lowercased) and chrF, and perplexity; the same metrics as
statistics per sentence for paired bootstrap (``translation_measures``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.metrics.base import Metric

from ..data.corpus import read_parallel
from ..data.datasets import read_split
from ..data.joined import for_model
from ..data.pairs import Pairs
from ..loss import evaluate_loss
from ..run.directory import EvalRecord, Run
from ..significance import Measure
from .engines import Engine
from .native import NativeEngine, encode_sources
from .request import DecodeRequest, Hooks


def evaluate(run: Run, translator: NativeEngine, *, engine: Engine | None = None, split: str = "test",
             src: Path | None = None, ref: Path | None = None, after_batch: Callable[[], None] = lambda: None,
             request: DecodeRequest | None = None) -> tuple[EvalRecord, list[str], list[str], list[str]]:
    """Decode the split (or src) with ``engine`` (default: ``translator``) as ``request`` asks (default:
    the spec's ``decode`` section) and score it against the references; also returns the texts. The
    perplexity is ``translator``'s, with its device and precision."""
    request = request or DecodeRequest.of(run.spec.decode)
    if src is None or ref is None:  # the spec's split, fetched by its data set if missing
        sources, references = read_split(run.spec.data, split, lambda _: None)
    else:
        sources, references = read_parallel(src, ref, "--src/--ref")
        split = src.name
    started = time.perf_counter()
    decoder = engine or translator
    results = decoder.translate(sources, request, Hooks(after_batch=after_batch))
    seconds = time.perf_counter() - started
    hyps = [decoder.tokenizer.decode(h[0].tokens) if h else "" for h in results]
    bleu, bleu_lc, chrf = (metric for _, _, metric in sacrebleu_metrics())
    tok = translator.tokenizer
    stop = tok.special.stop
    pairs = Pairs([ids or [stop] for ids in encode_sources(tok, sources, translator.max_source_tokens)],
                  [ids + [stop] for ids in tok.encode(references)])
    ppl = evaluate_loss(translator.model, for_model(run.spec, pairs), batch_tokens=run.spec.train.batch_tokens,
                        label_smoothing=run.spec.train.label_smoothing, policy=translator.policy,
                        special=tok.special)["ppl"]
    result = EvalRecord(
        split=split, sentences=len(sources), weights=translator.weights,
        bleu=bleu.corpus_score(hyps, [references]).score, bleu_signature=str(bleu.get_signature()),
        bleu_lowercase=bleu_lc.corpus_score(hyps, [references]).score,
        bleu_lowercase_signature=str(bleu_lc.get_signature()),
        chrf=chrf.corpus_score(hyps, [references]).score, chrf_signature=str(chrf.get_signature()),
        perplexity=ppl, decode_seconds=seconds, sentences_per_second=len(sources) / max(seconds, 1e-9),
        beam=request.beam, alpha=request.alpha, precision=decoder.precision, engine=decoder.name,
    )
    return result, sources, references, hyps


def sacrebleu_metrics() -> list[tuple[str, str, Metric]]:
    """The translation metrics, each with its name and its key in an evaluation record: sacreBLEU's BLEU (cased,
    then lowercased) and chrF, with sacreBLEU's defaults."""
    return [("BLEU", "bleu", BLEU()), ("BLEU (lowercased)", "bleu_lowercase", BLEU(lowercase=True)),
            ("chrF", "chrf", CHRF())]


def translation_measures(references: list[str]) -> list[Measure]:
    """BLEU, lowercased BLEU and chrF against ``references``, each from sacreBLEU's own statistics per sentence
    and its own score of their sum (what its paired bootstrap resamples)."""

    def measure(name: str, key: str, metric: Metric) -> Measure:
        def stats(outputs: list[str]) -> np.ndarray:
            return np.array(metric._extract_corpus_statistics(outputs, [references]))  # sacreBLEU's paired test's

        def score(summed: Sequence[float]) -> float:
            return metric._compute_score_from_stats(summed).score  # chrF's of float32 sums: float32, as sacreBLEU's

        return Measure(name, key, len(references), stats, score)

    return [measure(*named) for named in sacrebleu_metrics()]
