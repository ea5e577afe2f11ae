"""Decoding throughput at equal work: one tbuild model with random weights, and the same weights in
each peer engine (CTranslate2 through tbuild's own export; Hugging Face ``generate`` through
``tbuild.engine.export.hf.to_marian``), beam 4 and greedy, in one process, runs interleaved, medians.
On a CPU tbuild decodes in float32 and, as the peers ``bf16`` and ``int8`` ask, with bf16 products and
in int8 (``cpu_variants``), each row with its own ratios to the peers.
Two kinds of lengths: **fixed** (every source ``src_len`` tokens, every output forced to exactly
``out_len`` decoder steps, EOS included: the first rows, kept so that old figures keep their row) and
**test2016** (each sentence's source length and forced output length drawn with a fixed seed from
Multi30k test2016's pairs, ``real_lengths.py``). Sentences are sorted by forced output length, then
source length, and those of equal forced length go to every engine as one call (sources padded): one
call, one length, for every engine alike.

Forcing the length: tbuild ``min_len = max_len = out_len``; Hugging Face ``min_new_tokens =
max_new_tokens = out_len``; CTranslate2 ``min_decoding_length = max_decoding_length = out_len`` (it
then returns out_len tokens and stops without an EOS step, so out_len decoder steps as the others).
The output tokens each engine returns are counted per sentence, and a row where any sentence's count
is not its forced length says so."""

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
from tbuild.components.specs.special import EOS, PAD
from tbuild.engine.decoding.compiled import compile_decoder
from tbuild.engine.decoding.packed import pack_linears
from tbuild.engine.decoding.precision_record import bf16_native
from tbuild.engine.decoding.quantize import quantize_model
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.device.policy import Policy
from tbuild.engine.errors import TbuildError
from tbuild.engine.extras import require

from .real_lengths import Lengths
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
    lengths: Lengths | None = None  # per-sentence lengths (test2016); None: fixed src_len -> out_len

    @property
    def kind(self) -> str:
        if self.lengths is None:
            return f"fixed {self.src_len}->{self.out_len}"
        return f"test2016 ({self.lengths.counted})"


Group = tuple[torch.Tensor, int]  # (B, S) padded sources ending with EOS, and their forced output length
Engine = Callable[[torch.Tensor, int, int], list[int]]  # (src, beam, out) -> output tokens per sentence (EOS counted)


def groups(run: DecodeRun, device: torch.device) -> list[Group]:
    """The sources (seeded random ids, each ending with EOS), one group per forced output length."""
    if run.lengths is None:  # torch's global generator, as the first rows drew them
        src = torch.randint(FIRST_ID, run.vocab, (run.sentences, run.src_len))
        src[:, -1] = EOS
        return [(src.to(device), run.out_len)]
    gen = torch.Generator().manual_seed(0)
    order = sorted(range(len(run.lengths.out)), key=lambda i: (run.lengths.out[i], run.lengths.src[i]))
    out: list[Group] = []
    for length in sorted(set(run.lengths.out)):
        rows = [run.lengths.src[i] for i in order if run.lengths.out[i] == length]
        src = torch.full((len(rows), max(rows)), PAD, dtype=torch.long)
        for j, n in enumerate(rows):
            src[j, : n - 1] = torch.randint(FIRST_ID, run.vocab, (n - 1,), generator=gen)
            src[j, n - 1] = EOS
        out.append((src.to(device), length))
    return out


def expected_tokens(work: list[Group]) -> list[int]:
    """The forced output length of every sentence, in the order the engines answer."""
    return [out for src, out in work for _ in range(src.size(0))]


def tbuild_engine(model: torch.nn.Module, policy: Policy) -> Engine:
    def run(src: torch.Tensor, beam: int, out: int) -> list[int]:
        with torch.inference_mode(), policy.autocast():
            pad = src.eq(PAD)  # the groups pad with PAD alone, after each row's EOS
            if beam == 1:
                return [len(o) + 1 for o in greedy_search(model, src, src_pad=pad, max_len_a=0, max_len_b=out,
                                                          min_len=out)]
            hyps = beam_search(model, src, src_pad=pad, beam=beam, alpha=ALPHA, max_len_a=0, max_len_b=out,
                               min_len=out)
            return [len(h[0].tokens) + 1 for h in hyps]
    return run


def ct2_engines(model: torch.nn.Module, run: DecodeRun, policy: Policy, folder: Path) -> dict[str, Engine | str]:
    """CTranslate2 float32 and int8 (on CUDA: bf16 compute) of the same weights, or why not."""
    try:
        ctranslate2 = require("ctranslate2", "tbuild[bench]", "the CTranslate2 peer")
    except TbuildError as e:
        return {"ct2": str(e)}
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
        try:  # a CUDA build finds its GPU libraries (cuBLAS 12) only at the first translation
            translator.translate_batch([[names[FIRST_ID]]], max_decoding_length=1)
        except RuntimeError as e:
            return {"ct2": f"ctranslate2 cannot run here: {str(e).splitlines()[0]}"}
        engines[label] = _ct2_run(translator, names)
    return engines


def _ct2_run(translator, names: list[str]) -> Engine:  # noqa: ANN001 - ctranslate2.Translator
    banned = [[names[PAD]], ["<s>"]]

    def run(src: torch.Tensor, beam: int, out: int) -> list[int]:
        # without padding and EOS: the runtime adds EOS itself
        pieces = [[names[i] for i in row if i not in (PAD, EOS)] for row in src.tolist()]
        results = translator.translate_batch(pieces, beam_size=beam, num_hypotheses=1, length_penalty=ALPHA,
                                             min_decoding_length=out, max_decoding_length=out,
                                             max_input_length=0, suppress_sequences=banned)
        return [len(r.hypotheses[0]) for r in results]
    return run


def hf_engine(model: torch.nn.Module, run: DecodeRun, policy: Policy) -> Engine | str:
    """Hugging Face ``generate`` on tbuild's weights exported by ``tbuild.engine.export.hf.to_marian``,
    or why not."""
    try:
        require("transformers", "tbuild[bench]", "the Hugging Face peer")
    except TbuildError as e:
        return str(e)
    try:
        from tbuild.engine.export import hf
    except ImportError:
        return "no tbuild.engine.export.hf yet (HF export of tbuild's weights)"
    convert = getattr(hf, "to_marian", None)
    if convert is None:
        return "tbuild.engine.export.hf has no to_marian(model, spec)"
    try:
        marian = convert(model, tbuild_spec(run.shape, run.vocab).spec).to(policy.device).eval()
    except TbuildError as e:  # the architecture is one Marian cannot hold
        return str(e)

    def generate(src: torch.Tensor, beam: int, out: int) -> list[int]:
        extra = {"length_penalty": ALPHA, "early_stopping": True} if beam > 1 else {}
        with torch.inference_mode(), policy.autocast():
            seqs = marian.generate(input_ids=src, attention_mask=src.ne(PAD), num_beams=beam, do_sample=False,
                                   min_new_tokens=out, max_new_tokens=out, **extra)
        return [seqs.size(1) - 1] * seqs.size(0)  # without the decoder start token
    return generate


def run_decoding(run: DecodeRun, policy: Policy, peers: list[str]) -> list[dict]:
    """One row per (engine, search), tbuild first; skipped peers as rows with a ``skipped`` reason."""
    torch.manual_seed(0)
    model = build_model(tbuild_spec(run.shape, run.vocab).spec).to(policy.device).eval()
    work = groups(run, policy.device)
    with tempfile.TemporaryDirectory(prefix="tbuild-bench-") as tmp:
        engines: dict[str, Engine | str] = {"tbuild": tbuild_engine(_packed(model, policy, torch.float32), policy)}
        if policy.device.type == "cpu":
            engines.update(cpu_variants(model, policy, peers))
        if "compiled" in peers:  # the same weights, decoder step through torch.compile (`--compile`)
            twin = build_model(tbuild_spec(run.shape, run.vocab).spec).to(policy.device).eval()
            twin.load_state_dict(model.state_dict())
            engines["tbuild --compile"] = tbuild_engine(compile_decoder(twin), policy)
        if "hf" in peers:
            engines["hf"] = hf_engine(model, run, policy)
        if "ct2" in peers:
            engines.update(ct2_engines(model, run, policy, Path(tmp)))
        timed = {(name, search): engine for name, engine in engines.items() if not isinstance(engine, str)
                 for search in SEARCHES}
        times, tokens = _interleaved(timed, work, run, policy)
    return _rows(run, policy, engines, times, tokens, expected_tokens(work))


def _packed(model: torch.nn.Module, policy: Policy, products: torch.dtype) -> torch.nn.Module:
    """A copy of ``model`` packed as the translator packs it (``engine/decoding/packed.py``) for products in
    ``products``; ``model`` itself under autocast (a GPU)."""
    if policy.autocast_dtype is not None:
        return model
    ours = copy.deepcopy(model)
    pack_linears(ours, products)
    return ours


def cpu_variants(model: torch.nn.Module, policy: Policy, peers: list[str]) -> dict[str, Engine | str]:
    """tbuild's other CPU arithmetic on the same weights: bf16 products (``decode.precision: bf16``; where
    this CPU has bf16 instructions) and int8 (``--quantization int8``, its output projection too)."""
    engines: dict[str, Engine | str] = {}
    if "bf16" in peers:
        emulated = bf16_native()
        engines["tbuild bf16"] = emulated or tbuild_engine(_packed(model, policy, torch.bfloat16), policy)
    if "int8" in peers:
        engines["tbuild int8"] = tbuild_engine(quantize_model(copy.deepcopy(model), "int8"), policy)
    return engines


def _interleaved(timed: dict[tuple[str, str], Engine], work: list[Group], run: DecodeRun,
                 policy: Policy) -> tuple[dict, dict]:
    sync = torch.cuda.synchronize if policy.device.type == "cuda" else (lambda: None)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in timed}
    tokens: dict[tuple[str, str], list[int]] = {}
    for r in range(run.warmup + run.repeats):
        for (name, search), engine in timed.items():
            sync()
            start = time.perf_counter()
            tokens[name, search] = [n for src, out in work for n in engine(src, SEARCHES[search], out)]
            sync()
            if r >= run.warmup:
                times[name, search].append(time.perf_counter() - start)
    return times, tokens


def _rows(run: DecodeRun, policy: Policy, engines: dict, times: dict, tokens: dict,
          expected: list[int]) -> list[dict]:
    lengths = run.lengths
    base = {"part": "decode", "shape": run.shape.name, "device": policy.device.type, "precision": policy.precision,
            "lengths": run.kind, "sentences": len(expected),
            "src_len": run.src_len if lengths is None else sum(lengths.src) / len(lengths.src),
            "out_len": run.out_len if lengths is None else sum(expected) / len(expected)}
    rows = [{**base, "impl": name, "search": "beam 4, greedy", "skipped": engine}
            for name, engine in engines.items() if isinstance(engine, str)]
    for search in SEARCHES:
        group = []
        for (name, s), seconds in times.items():
            if s != search:
                continue
            total = sum(tokens[name, s])
            row = {**base, "impl": name, "search": search, "tokens_per_s": total / statistics.median(seconds),
                   "output_tokens": total, "per_sentence": tokens[name, s], "seconds": seconds}
            if tokens[name, s] != expected:
                wrong = sum(a != b for a, b in zip(tokens[name, s], expected, strict=True))
                row["note"] = f"unequal work: {wrong} sentences not at their forced length ({total} output tokens, " \
                              f"{sum(expected)} expected)"
            group.append(row)
        for ours in (r for r in group if r["impl"].startswith("tbuild")):  # tbuild and its CPU variants
            # per round: a peer's time over this tbuild's, both per output token
            ours["ratios"] = {r["impl"]: statistics.median(
                (p / r["output_tokens"]) / (o / ours["output_tokens"]) for o, p in zip(ours["seconds"], r["seconds"],
                                                                                       strict=True))
                for r in group if r is not ours and (ours["impl"] == "tbuild" or not r["impl"].startswith("tbuild"))}
        rows[len(rows):] = group
    return rows
