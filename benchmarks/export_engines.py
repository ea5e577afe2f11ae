"""Decoding speed and quality of one trained run through every engine that can hold it: tbuild's own
search, Hugging Face ``MarianMTModel.generate`` on the ``--to hf`` export, and CTranslate2 float32 and
int8 (the run's cached exports, ``RUN/ctranslate2-Q/``). Peers come from the optional "export" extra;
a peer that is missing, or that cannot hold the architecture, is skipped with its one-line reason.

Two workloads on the run's test split (``data.test``; ``--limit N``: its first N lines), each at beam
``--beam`` and greedy:
- real: each engine stops as it does (tbuild's conventions in all: ``decoding/hf.py``, ``decoding/ct2.py``),
  |Y| ≤ a·|X| + b; BLEU of the outputs against the references.
- fixed: every output is exactly ``--out-len`` decoder steps (EOS banned before, so equal work), the
  same length-sorted batches for all engines; no BLEU.
Tokens are output tokens with EOS (real) or steps (fixed). Every engine runs fp32 (CTranslate2 int8
aside) with ``--threads`` threads, in one process; runs are interleaved (each repeat times every
engine once, so other load on the machine hits all alike) after a warm-up, and the table shows the
median of ``--repeats`` and tbuild's tokens/s over each engine's in the same row group (above 1:
tbuild is faster), the direction of every tbuild benchmark. Not a test:

    python benchmarks/export_engines.py RUN [--limit 200] [--repeats 3] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tbuild.builder.spec import DecodeSpec
from tbuild.components.specs.special import PAD
from tbuild.engine.data.datasets import read_split
from tbuild.engine.decoding.native import NativeEngine, encode_sources, length_batches, load_native_engine
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.device.process import configure_process
from tbuild.engine.run.directory import Run, resolve_run

Fixed = Callable[[list[list[int]], int, int], None]  # (batch of source ids, beam, steps)


@dataclass
class Peer:
    name: str
    real: Callable[[list[list[int]], DecodeSpec], list[list[int]]]  # sources -> best output ids (no EOS)
    fixed: Fixed


def native(tr: NativeEngine) -> Peer:
    def real(sources: list[list[int]], spec: DecodeSpec) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in sources]
        for batch in length_batches([len(s) for s in sources], spec.batch_tokens):
            with tr.policy.autocast():
                src = padded([sources[i] for i in batch], tr.policy.device)
                hyps = beam_search(tr.model, src, src_pad=src.eq(PAD), beam=spec.beam, alpha=spec.alpha,
                                   max_len_a=spec.max_len_a, max_len_b=spec.max_len_b, max_len_cap=tr.max_output_len)
            for i, h in zip(batch, hyps, strict=True):
                out[i] = h[0].tokens
        return out

    def fixed(sources: list[list[int]], beam: int, steps: int) -> None:
        src = padded(sources, tr.policy.device)
        with tr.policy.autocast():
            if beam == 1:
                greedy_search(tr.model, src, src_pad=src.eq(PAD), max_len_a=0, max_len_b=steps, min_len=steps)
            else:
                beam_search(tr.model, src, src_pad=src.eq(PAD), beam=beam, alpha=0.6, max_len_a=0, max_len_b=steps,
                            min_len=steps)

    return Peer("tbuild", real, fixed)


def hf_peer(run: Run, folder: Path, device: str) -> Peer:
    from transformers import MarianMTModel
    from transformers.utils import logging

    from tbuild.engine.decoding.hf import hf_search
    from tbuild.engine.export.hf import export_run

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    export_run(run, folder)
    hf = MarianMTModel.from_pretrained(str(folder)).eval().to(device)
    rows = hf.config.max_position_embeddings
    cap = min(run.spec.model.max_positions or rows, rows)

    def real(sources: list[list[int]], spec: DecodeSpec) -> list[list[int]]:
        return [h[0].tokens for h in hf_search(hf, sources, spec, cap)]

    def fixed(sources: list[list[int]], beam: int, steps: int) -> None:
        src = padded(sources, hf.device)
        beam_args = {"length_penalty": 0.6, "early_stopping": True} if beam > 1 else {}
        with torch.inference_mode():  # steps tokens, EOS banned before the last (min_new_tokens), none forced
            hf.generate(input_ids=src, attention_mask=src.ne(PAD), num_beams=beam, do_sample=False,
                        min_new_tokens=steps, max_new_tokens=steps, forced_eos_token_id=None, **beam_args)

    return Peer("HF generate", real, fixed)


def ct2_peer(run: Run, quantization: str, threads: int, device: str) -> Peer:
    import ctranslate2

    from tbuild.engine.data.tokenizer import Tokenizer
    from tbuild.engine.decoding.ct2 import ct2_search
    from tbuild.engine.export.cache import cached_export

    folder, _ = cached_export(run, quantization=quantization)
    ct2 = ctranslate2.Translator(str(folder), device=device, intra_threads=threads, inter_threads=1)
    tok = Tokenizer.load(run.tokenizer)
    piece = tok.sp.id_to_piece

    def real(sources: list[list[int]], spec: DecodeSpec) -> list[list[int]]:
        return [h[0].tokens for h in ct2_search(ct2, tok, sources, spec, run.spec.model.max_positions)]

    def fixed(sources: list[list[int]], beam: int, steps: int) -> None:
        ct2.translate_batch([[piece(t) for t in s[:-1]] for s in sources], beam_size=beam, length_penalty=0.6,
                            min_decoding_length=steps, max_decoding_length=steps, max_input_length=0)

    return Peer(f"CT2 {quantization}", real, fixed)


def padded(rows: list[list[int]], device: Any) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], device=device)  # (B, S)


def load_peers(run: Run, tr: NativeEngine, args: argparse.Namespace, device: str,
               folder: Path) -> tuple[list[Peer], dict[str, str]]:
    """The engines that can run here, and a reason for each that cannot."""
    peers = [native(tr)]
    skipped: dict[str, str] = {}
    try:
        peers.append(hf_peer(run, folder, device))
    except Exception as e:  # noqa: BLE001 - any failure of an optional peer is reported, not fatal
        skipped["HF generate"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    for q in ("float32", "int8"):
        try:
            import ctranslate2

            ct2_device = "cuda" if device == "cuda" and ctranslate2.get_cuda_device_count() > 0 else "cpu"
            peers.append(ct2_peer(run, q, args.threads, ct2_device))
        except Exception as e:  # noqa: BLE001
            skipped[f"CT2 {q}"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    return peers, skipped


def workloads(peers: list[Peer], sources: list[list[int]], spec: DecodeSpec, args: argparse.Namespace,
              outputs: dict) -> dict[tuple[str, str, str], Callable[[], int]]:
    """(engine, search, workload) -> a run returning its output tokens; real runs store their outputs."""
    batches = [[sources[i] for i in b] for b in length_batches([len(s) for s in sources], spec.batch_tokens)]
    runs: dict[tuple[str, str, str], Callable[[], int]] = {}
    for search, beam in ((f"beam {args.beam}", args.beam), ("greedy", 1)):
        s = spec.model_copy(update={"beam": beam, "nbest": 1})
        for p in peers:
            def real(p: Peer = p, s: DecodeSpec = s, key: tuple = (p.name, search)) -> int:
                outputs[key] = p.real(sources, s)
                return sum(len(o) + 1 for o in outputs[key])

            def fixed(p: Peer = p, beam: int = beam) -> int:
                for b in batches:
                    p.fixed(b, beam, args.out_len)
                return len(sources) * args.out_len

            runs[(p.name, search, "real")] = real
            runs[(p.name, search, "fixed")] = fixed
    return runs


def timed(runs: dict, repeats: int) -> dict:
    """Median seconds of ``repeats`` interleaved runs after a warm-up, and the tokens of a run."""
    tokens = {key: run() for key, run in runs.items()}
    times: dict = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            start = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - start)
    return {key: (statistics.median(times[key]), tokens[key], times[key]) for key in runs}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a trained run directory (or its spec)")
    parser.add_argument("--limit", type=int, default=None, help="the test split's first N lines (default: all)")
    parser.add_argument("--beam", type=int, default=None, help="default: the run's decode.beam")
    parser.add_argument("--out-len", type=int, default=30, help="decoder steps per output, fixed workload")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    configure_process(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    run = resolve_run(args.run, ["decode.precision=fp32"])
    spec = run.spec.decode
    args.beam = args.beam or spec.beam
    lines, refs = read_split(run.spec.data, "test", print)
    lines, refs = lines[: args.limit], refs[: args.limit]
    tr = load_native_engine(run, device=device)
    sources = encode_sources(tr.tokenizer, lines, tr.max_source_tokens)
    keep = [i for i, s in enumerate(sources) if s]  # every engine gives an empty line no output
    sources, refs = [sources[i] for i in keep], [refs[i] for i in keep]
    with tempfile.TemporaryDirectory() as tmp:
        peers, skipped = load_peers(run, tr, args, device, Path(tmp) / "hf")
        outputs: dict = {}
        results = timed(workloads(peers, sources, spec, args, outputs), args.repeats)
    report(run, args, device, len(sources), results, outputs, tr.tokenizer, refs, skipped)


def report(run: Run, args: argparse.Namespace, device: str, n: int, results: dict, outputs: dict, tok: Any,
           refs: list[str], skipped: dict[str, str]) -> None:
    import sacrebleu

    rows = []
    for (engine, search, work), (seconds, tokens, all_times) in results.items():
        bleu = sacrebleu.corpus_bleu([tok.decode(o) for o in outputs[(engine, search)]], [refs]).score \
            if work == "real" else None
        ours_s, ours_t, _ = results[("tbuild", search, work)]
        rows.append({"engine": engine, "search": search, "workload": work, "seconds": seconds, "times": all_times,
                     "sentences_per_s": n / seconds, "tokens_per_s": tokens / seconds, "tokens": tokens,
                     "bleu": bleu, "tbuild_over_engine": (ours_t / ours_s) / (tokens / seconds)})
    rows.sort(key=lambda r: (r["workload"] != "real", r["search"] != f"beam {args.beam}"))
    head = (f"{run.dir.path}: {n} test sentences, {device} ({cpu_name()}), {args.threads} threads, fp32 "
            f"(CT2 int8 aside), median of {args.repeats}; fixed = {args.out_len} steps per output")
    print(head)
    print(f"{'workload':9}{'search':>8}  {'engine':14}{'seconds':>9}{'sent/s':>9}{'tokens/s':>10}{'BLEU':>7}"
          f"{'tbuild ×':>10}")
    for r in rows:
        bleu = f"{r['bleu']:7.2f}" if r["bleu"] is not None else f"{'-':>7}"
        print(f"{r['workload']:9}{r['search']:>8}  {r['engine']:14}{r['seconds']:9.3f}{r['sentences_per_s']:9.1f}"
              f"{r['tokens_per_s']:10.0f}{bleu}{r['tbuild_over_engine']:9.2f}×")
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    if args.json is not None:
        args.json.write_text(json.dumps({"run": str(run.dir.path), "sentences": n, "device": device,
                                         "cpu": cpu_name(), "threads": args.threads, "repeats": args.repeats,
                                         "out_len": args.out_len, "rows": rows, "skipped": skipped}, indent=2) + "\n")


if __name__ == "__main__":
    main()
