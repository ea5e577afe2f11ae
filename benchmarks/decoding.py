"""Decoding throughput at equal work: one tbuild model with random weights, and the same weights in
each peer engine (CTranslate2 through tbuild's own export; Hugging Face ``generate`` through
``tbuild.engine.export.hf.to_marian``), every output forced to exactly ``out_len`` decoder
steps (EOS included), beam 4 and greedy, in one process, runs interleaved, medians.

Forcing the length: tbuild ``min_len = max_len = out_len``; Hugging Face ``min_new_tokens =
max_new_tokens = out_len``; CTranslate2 ``min_decoding_length = max_decoding_length = out_len`` (it
then returns out_len tokens and stops without an EOS step, so out_len decoder steps as the others).
The output tokens each engine returns are counted, and a row whose count is not sentences × out_len
says so."""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.builder import build_model
from tbuild.builder.tokens import EOS, PAD
from tbuild.engine.decoding.compiled import compile_decoder
from tbuild.engine.decoding.packed import pack_linears
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.policy import Policy

from .workload import FIRST_ID, Shape, tbuild_spec

ALPHA = 0.6  # §6.1's length penalty, for every engine
SEARCHES = {"beam 4": 4, "greedy": 1}


@dataclass(frozen=True)
class DecodeRun:
    shape: Shape
    vocab: int
    sentences: int
    src_len: int
    out_len: int
    warmup: int
    repeats: int
    threads: int


Engine = Callable[[torch.Tensor, int], int]  # (src, beam) -> output tokens (EOS counted)


def tbuild_engine(model: torch.nn.Module, policy: Policy, out: int) -> Engine:
    def run(src: torch.Tensor, beam: int) -> int:
        with torch.inference_mode(), policy.autocast():
            if beam == 1:
                return sum(len(o) + 1 for o in greedy_search(model, src, max_len_a=0, max_len_b=out, min_len=out))
            hyps = beam_search(model, src, beam=beam, alpha=ALPHA, max_len_a=0, max_len_b=out, min_len=out)
            return sum(len(h[0].tokens) + 1 for h in hyps)
    return run


def ct2_engines(model: torch.nn.Module, run: DecodeRun, policy: Policy, folder: Path) -> dict[str, Engine | str]:
    """CTranslate2 float32 and int8 (on CUDA: bf16 compute) of the same weights, or why not."""
    try:
        import ctranslate2
    except ImportError:
        return {"ct2": "ctranslate2 is not installed (pip install -e '.[export]')"}
    from tbuild.engine.export.ctranslate2 import write_ctranslate2

    cuda = policy.device.type == "cuda"
    if cuda and ctranslate2.get_cuda_device_count() == 0:
        return {"ct2": "this ctranslate2 build has no CUDA support"}
    spec = tbuild_spec(run.shape, run.vocab).spec
    names = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(FIRST_ID, run.vocab)]
    kinds = {"ct2-float32": ("float32", "bfloat16" if cuda else "default"),
             "ct2-int8": ("int8", "int8_bfloat16" if cuda else "default")}
    engines: dict[str, Engine | str] = {}
    for label, (quantization, compute) in kinds.items():
        write_ctranslate2(model, spec, names, folder / label, quantization)
        translator = ctranslate2.Translator(str(folder / label), device=policy.device.type, compute_type=compute,
                                            intra_threads=run.threads, inter_threads=1)
        engines[label] = _ct2_run(translator, names, run.out_len)
    return engines


def _ct2_run(translator, names: list[str], out: int) -> Engine:  # noqa: ANN001 - ctranslate2.Translator
    banned = [[names[PAD]], ["<s>"]]

    def run(src: torch.Tensor, beam: int) -> int:
        pieces = [[names[i] for i in row[:-1]] for row in src.tolist()]  # the runtime adds EOS itself
        results = translator.translate_batch(pieces, beam_size=beam, num_hypotheses=1, length_penalty=ALPHA,
                                             min_decoding_length=out, max_decoding_length=out,
                                             max_input_length=0, suppress_sequences=banned)
        return sum(len(r.hypotheses[0]) for r in results)
    return run


def hf_engine(model: torch.nn.Module, run: DecodeRun, policy: Policy) -> Engine | str:
    """Hugging Face ``generate`` on tbuild's weights exported by ``tbuild.engine.export.hf.to_marian``,
    or why not."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "transformers is not installed (pip install -e '.[bench]')"
    try:
        from tbuild.engine.export import hf
    except ImportError:
        return "no tbuild.engine.export.hf yet (HF export of tbuild's weights)"
    convert = getattr(hf, "to_marian", None)
    if convert is None:
        return "tbuild.engine.export.hf has no to_marian(model, spec)"
    from tbuild.engine.errors import TbuildError

    try:
        marian = convert(model, tbuild_spec(run.shape, run.vocab).spec).to(policy.device).eval()
    except TbuildError as e:  # the architecture is one Marian cannot hold
        return str(e)
    out = run.out_len

    def generate(src: torch.Tensor, beam: int) -> int:
        extra = {"length_penalty": ALPHA, "early_stopping": True} if beam > 1 else {}
        with torch.inference_mode(), policy.autocast():
            seqs = marian.generate(input_ids=src, attention_mask=src.ne(PAD), num_beams=beam, do_sample=False,
                                   min_new_tokens=out, max_new_tokens=out, **extra)
        return seqs.numel() - seqs.size(0)  # without the decoder start token
    return generate


def run_decoding(run: DecodeRun, policy: Policy, peers: list[str]) -> list[dict]:
    """One row per (engine, search), tbuild first; skipped peers as rows with a ``skipped`` reason."""
    torch.manual_seed(0)
    model = build_model(tbuild_spec(run.shape, run.vocab).spec).to(policy.device).eval()
    src = torch.randint(FIRST_ID, run.vocab, (run.sentences, run.src_len))
    src[:, -1] = EOS
    src = src.to(policy.device)
    with tempfile.TemporaryDirectory(prefix="tbuild-bench-") as tmp:
        ours = model
        if policy.autocast_dtype is None:  # float32: packed as the translator packs it (engine/decoding/packed.py)
            ours = copy.deepcopy(model)
            pack_linears(ours)
        engines: dict[str, Engine | str] = {"tbuild": tbuild_engine(ours, policy, run.out_len)}
        if "compiled" in peers:  # the same weights, decoder step through torch.compile (`--compile`)
            twin = build_model(tbuild_spec(run.shape, run.vocab).spec).to(policy.device).eval()
            twin.load_state_dict(model.state_dict())
            engines["tbuild --compile"] = tbuild_engine(compile_decoder(twin), policy, run.out_len)
        if "hf" in peers:
            engines["hf"] = hf_engine(model, run, policy)
        if "ct2" in peers:
            engines.update(ct2_engines(model, run, policy, Path(tmp)))
        timed = {(name, search): engine for name, engine in engines.items() if not isinstance(engine, str)
                 for search in SEARCHES}
        times, tokens = _interleaved(timed, src, run, policy)
    return _rows(run, policy, engines, times, tokens)


def _interleaved(timed: dict[tuple[str, str], Engine], src: torch.Tensor, run: DecodeRun,
                 policy: Policy) -> tuple[dict, dict]:
    sync = torch.cuda.synchronize if policy.device.type == "cuda" else (lambda: None)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in timed}
    tokens: dict[tuple[str, str], int] = {}
    for r in range(run.warmup + run.repeats):
        for (name, search), engine in timed.items():
            sync()
            start = time.perf_counter()
            tokens[name, search] = engine(src, SEARCHES[search])
            sync()
            if r >= run.warmup:
                times[name, search].append(time.perf_counter() - start)
    return times, tokens


def _rows(run: DecodeRun, policy: Policy, engines: dict, times: dict, tokens: dict) -> list[dict]:
    base = {"part": "decode", "shape": run.shape.name, "device": policy.device.type, "precision": policy.precision,
            "sentences": run.sentences, "src_len": run.src_len, "out_len": run.out_len}
    rows = [{**base, "impl": name, "search": "beam 4, greedy", "skipped": engine}
            for name, engine in engines.items() if isinstance(engine, str)]
    expected = run.sentences * run.out_len
    for search in SEARCHES:
        group = []
        for (name, s), seconds in times.items():
            if s != search:
                continue
            row = {**base, "impl": name, "search": search, "tokens_per_s": tokens[name, s] / statistics.median(seconds),
                   "output_tokens": tokens[name, s], "seconds": seconds}
            if tokens[name, s] != expected:
                row["note"] = f"unequal work: {tokens[name, s]} output tokens, {expected} expected"
            group.append(row)
        ours = next(r for r in group if r["impl"] == "tbuild")
        # per round: a peer's time over tbuild's, both per output token
        ours["ratios"] = {r["impl"]: statistics.median(
            (p / r["output_tokens"]) / (o / ours["output_tokens"]) for o, p in zip(ours["seconds"], r["seconds"],
                                                                                   strict=True))
            for r in group if r is not ours}
        rows[len(rows):] = group
    return rows
