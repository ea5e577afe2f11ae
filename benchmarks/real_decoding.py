"""The decoding workload users run: a trained run's test split through ``tbuild decode``'s own engines,
as the command loads and calls them (``engine/export/engines.py: load_engine``, then ``translate`` on
every line, then detokenisation), in one process, engines interleaved.

Each engine (native fp32; native default: the run's ``decode.precision``, ``auto`` deciding by the run's
record, ``decoding/precision_record.py``, made first if missing; native int8; CTranslate2 float32 and
int8) decodes the same lines with the run's ``decode`` settings (beam, alpha, length limits, batch
tokens: the sentences sorted by length and cut by tokens as ``tbuild decode`` cuts them). Per engine,
medians of the timed rounds:
- **startup**: loading the engine (weights read, averaged where the spec averages, packed or quantized;
  CTranslate2's cached export opened);
- **first output**: startup plus translating the first line alone: what a user waits for one sentence;
- **decode**: translating every line and detokenising the outputs, which gives sentences/s and
  output tokens/s (EOS counted);
- **BLEU** (sacreBLEU, cased and lowercased) of the outputs: a faster engine that changes the output
  shows it here.
"native exact", "native patience" and "native stop=beam" are the default engine with ``decode.stopping`` exact,
patience (``decode.patience`` × beam finished hypotheses) and beam (a sentence stops once beam hypotheses have
finished, CTranslate2's and fairseq's rule).
The CTranslate2 export is made (and cached in the run) before any timing. Python's start and imports
are the same for every engine and are not counted."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU

from tbuild.engine.data.datasets import read_split
from tbuild.engine.decoding.engines import Engine
from tbuild.engine.decoding.native import check_decoding
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.errors import TbuildError
from tbuild.engine.export.engines import load_engine
from tbuild.engine.run.directory import Run, resolve_run

ENGINES = {"native fp32": ("native", "float32"), "native default": ("native", "float32"),
           "native exact": ("native", "float32"), "native patience": ("native", "float32"),
           "native stop=beam": ("native", "float32"), "native int8": ("native", "int8"),
           "CT2 float32": ("ctranslate2", "float32"), "CT2 int8": ("ctranslate2", "int8")}
# what an engine's row changes in the run's decode section (the others decode as the run says)
FORCED = {"native fp32": ["decode.precision=fp32"], "native exact": ["decode.stopping=exact"],
          "native patience": ["decode.stopping=patience"], "native stop=beam": ["decode.stopping=beam"]}


@dataclass(frozen=True)
class RealRun:
    run: Path  # a trained run directory
    split: str
    lines: int | None  # the split's first N lines (None: all)
    warmup: int
    repeats: int
    average: int | None = None  # the run's last N checkpoints averaged (0: train.average_last, decode --average);
    # None: the best


@dataclass
class _Timing:
    startup: list[float]
    first: list[float]
    decode: list[float]
    tokens: int = 0
    outputs: list[str] | None = None
    precision: str = ""


def _loader(run: Run, engine: str, quantization: str, average: int | None) -> Callable[[], Engine]:
    return lambda: load_engine(run, engine, quantization=quantization, device="cpu", average=average)


def _usable(path: Path, names: list[str], average: int | None
            ) -> tuple[dict[str, tuple[Callable[[], Engine], DecodeRequest]], dict[str, str]]:
    """The engines that can decode this run here, each with its request (each loaded once: CTranslate2's
    export is made and cached now, and the native engine's decoding check, ``check_decoding``, made if the
    run has none for this CPU, untimed), and a one-line reason for each that cannot."""
    loaders, skipped = {}, {}
    for name in names:
        engine, quantization = ENGINES[name]
        run = resolve_run(path, FORCED.get(name, []))
        load = _loader(run, engine, quantization, average)
        try:
            if engine == "native":
                check_decoding(run, device="cpu", quantization=quantization, average=average)
            load()
        except (TbuildError, ImportError) as e:
            skipped[name] = str(e).splitlines()[0]
            continue
        loaders[name] = load, DecodeRequest.of(run.spec.decode)
    return loaders, skipped


def _round(load: Callable[[], Engine], lines: list[str], request: DecodeRequest, timing: _Timing,
           keep: bool) -> None:
    """One timed round of one engine: startup, the first line alone, then every line."""
    start = time.perf_counter()
    engine = load()
    loaded = time.perf_counter()
    engine.translate(lines[:1], request)
    first = time.perf_counter()
    results = engine.translate(lines, request)
    outputs = [engine.tokenizer.decode(h[0].tokens) if h else "" for h in results]
    done = time.perf_counter()
    if keep:
        timing.startup.append(loaded - start)
        timing.first.append(first - start)
        timing.decode.append(done - first)
    timing.tokens = sum(len(h[0].tokens) + 1 for h in results if h)
    timing.outputs, timing.precision = outputs, engine.precision


def run_real(real: RealRun, names: list[str] | None = None) -> dict:
    """Rows (one per engine) for the real workload, interleaved rounds, and the engines skipped."""
    run = resolve_run(real.run, [])
    lines, refs = read_split(run.spec.data, real.split, lambda _: None)
    lines, refs = lines[: real.lines], refs[: real.lines]
    loaders, skipped = _usable(real.run, names or list(ENGINES), real.average)
    timings = {name: _Timing([], [], []) for name in loaders}
    for r in range(real.warmup + real.repeats):
        for name, (load, request) in loaders.items():
            _round(load, lines, request, timings[name], keep=r >= real.warmup)
    rows = [_row(name, t, refs, len(lines)) for name, t in timings.items()]
    base = next((r for r in rows if r["engine"] == "native default"), None)
    for row in rows:
        if base is not None:
            row["native_default_over_engine"] = base["sentences_per_s"] / row["sentences_per_s"]
    decode = run.spec.decode
    return {"run": str(run.dir.path), "split": real.split, "sentences": len(lines), "beam": decode.beam,
            "alpha": decode.alpha, "batch_tokens": decode.batch_tokens, "repeats": real.repeats,
            "warmup": real.warmup, "weights": "best" if real.average is None else "average", "rows": rows,
            "skipped": skipped}


def _row(name: str, t: _Timing, refs: list[str], sentences: int) -> dict:
    decode = statistics.median(t.decode)
    outputs = t.outputs or []
    return {"engine": name, "precision": t.precision, "startup_s": statistics.median(t.startup),
            "first_output_s": statistics.median(t.first), "decode_s": decode, "decode_times": t.decode,
            "sentences_per_s": sentences / decode, "tokens_per_s": t.tokens / decode, "output_tokens": t.tokens,
            "bleu": BLEU().corpus_score(outputs, [refs]).score,
            "bleu_lowercase": BLEU(lowercase=True).corpus_score(outputs, [refs]).score}


def table(report: dict):  # noqa: ANN201 - rich.table.Table, imported late
    from rich.table import Table

    out = Table(title=f"real workload: {report['run']}, {report['split']} ({report['sentences']} lines), beam "
                      f"{report['beam']}, alpha {report['alpha']}, {report['batch_tokens']} batch tokens, "
                      f"{report.get('weights', 'best')} weights; medians "
                      f"of {report['repeats']} interleaved rounds after {report['warmup']} warm-up",
                title_justify="left")
    for name in ("engine", "precision", "startup s", "first output s", "decode s", "sentences/s", "tokens/s",
                 "BLEU", "BLEU lc", "native default ×"):
        out.add_column(name, justify="left" if name in ("engine", "precision") else "right")
    for r in report["rows"]:
        ratio = r.get("native_default_over_engine")
        out.add_row(r["engine"], r["precision"], f"{r['startup_s']:.2f}", f"{r['first_output_s']:.2f}",
                    f"{r['decode_s']:.2f}", f"{r['sentences_per_s']:.1f}", f"{r['tokens_per_s']:,.0f}",
                    f"{r['bleu']:.2f}", f"{r['bleu_lowercase']:.2f}", "" if ratio is None else f"{ratio:.2f}×")
    out.caption = " ".join(f"skipped {name}: {why}." for name, why in report["skipped"].items()) or None
    return out
