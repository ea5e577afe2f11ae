"""Decoding speed on CPU: tbuild's beam search and greedy decoding next to Hugging Face
``MarianMTModel.generate`` and CTranslate2 (float32 and int8) at the same shape (random weights,
post-norm, tied embeddings, ReLU).

Every output is forced to exactly --out-len decoder steps on every side (tbuild: min_len = max_len,
so out-len - 1 tokens and EOS; HF: min_new_tokens = max_new_tokens; CTranslate2:
min_decoding_length = max_decoding_length = out-len, without an EOS step), so all do the same work.
CTranslate2 gets the tbuild model's weights (``write_ctranslate2``) and --threads intra-op threads.
Both run in one process with the same torch settings (tbuild's ``configure_process``: thread count, flushed
denormals, glibc heap reuse), and with ``--precision bf16`` both under the same CPU bf16 autocast.
Needs the optional "bench" extra (transformers). Not a test:

    python benchmarks/beam_search.py [--repeats 3] [--threads 2] [--precision fp32|bf16] [--skip-hf]
        [--ct2] [--quantize int8] [--base]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.spec import Spec
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.device.policy import choose_policy
from tbuild.engine.device.process import configure_process


def tbuild_spec(args: argparse.Namespace) -> Spec:
    stack = {"layers": args.layers, "heads": args.heads, "d_ff": args.d_ff}
    return load_spec({"model": {
        "vocab_size": args.vocab, "d_model": args.d_model, "encoder": stack, "decoder": stack,
        "tie_embeddings": "three_way", "norm_placement": "post",
    }}).spec


def tbuild_model(args: argparse.Namespace) -> torch.nn.Module:
    return build_model(tbuild_spec(args)).eval()


def beam_run(model: torch.nn.Module, src: torch.Tensor, args: argparse.Namespace) -> Callable[[], int]:
    def run() -> int:
        hyps = beam_search(model, src, beam=args.beam, alpha=0.6, max_len_a=0, max_len_b=args.out_len,
                           min_len=args.out_len)
        return sum(len(h[0].tokens) + 1 for h in hyps)
    return run


def greedy_run(model: torch.nn.Module, src: torch.Tensor, args: argparse.Namespace) -> Callable[[], int]:
    def run() -> int:
        outputs = greedy_search(model, src, max_len_a=0, max_len_b=args.out_len, min_len=args.out_len)
        return sum(len(o) + 1 for o in outputs)
    return run


def hf_runs(args: argparse.Namespace, src: torch.Tensor) -> dict[tuple[str, str], Callable[[], int]]:
    theirs = hf_model(args)
    mask = torch.ones_like(src)

    def hf(beams: int) -> Callable[[], int]:
        beam_args = {"length_penalty": 0.6, "early_stopping": True} if beams > 1 else {}

        def run() -> int:
            with torch.no_grad():
                seqs = theirs.generate(input_ids=src, attention_mask=mask, num_beams=beams, do_sample=False,
                                       min_new_tokens=args.out_len, max_new_tokens=args.out_len, **beam_args)
            return seqs.numel() - seqs.size(0)  # without the decoder start token
        return run

    return {("HF", "beam"): hf(args.beam), ("HF", "greedy"): hf(1)}


def hf_model(args: argparse.Namespace) -> torch.nn.Module:
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=args.vocab, d_model=args.d_model, encoder_layers=args.layers, decoder_layers=args.layers,
        encoder_attention_heads=args.heads, decoder_attention_heads=args.heads, encoder_ffn_dim=args.d_ff,
        decoder_ffn_dim=args.d_ff, activation_function="relu", scale_embedding=True, dropout=0.0,
        max_position_embeddings=512, pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS,
        decoder_start_token_id=BOS, forced_eos_token_id=None,
    )
    return MarianMTModel(config).eval()


Timing = tuple[float, float, int]  # median wall seconds, median process CPU seconds, output tokens


def timed(runs: dict[tuple[str, str], Callable[[], int]], repeats: int,
          precision: str) -> dict[tuple[str, str], Timing]:
    """Median wall and process CPU time of ``repeats`` runs of each function after one warm-up, and
    the output tokens of a run. The runs are interleaved so that other load on the machine hits all
    alike; CPU time (all threads of this process) is the steadier figure on a shared machine."""
    with choose_policy(precision, "cpu").autocast():  # type: ignore[arg-type]
        return _timed(runs, repeats)


def _timed(runs: dict[tuple[str, str], Callable[[], int]], repeats: int) -> dict[tuple[str, str], Timing]:
    tokens = {key: run() for key, run in runs.items()}
    wall: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            wall[key].append(time.perf_counter() - start)
            cpu[key].append(time.process_time() - start_cpu)
    return {key: (statistics.median(wall[key]), statistics.median(cpu[key]), tokens[key]) for key in runs}


def ct2_runs(ours: torch.nn.Module, args: argparse.Namespace, src: torch.Tensor,
             folder: Path) -> dict[tuple[str, str], Callable[[], int]]:
    """CTranslate2 beam and greedy runs of ``ours``'s weights, float32 and int8."""
    import ctranslate2

    from tbuild.engine.export.ctranslate2 import write_ctranslate2

    vocabulary = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, args.vocab)]
    pieces = [[vocabulary[t] for t in row] for row in src.tolist()]
    runs: dict[tuple[str, str], Callable[[], int]] = {}
    for quantization in ("float32", "int8"):
        out = folder / quantization
        write_ctranslate2(ours, tbuild_spec(args), vocabulary, out, quantization)
        translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=args.threads, inter_threads=1)

        def run(beams: int, translator: ctranslate2.Translator = translator) -> Callable[[], int]:
            def go() -> int:
                results = translator.translate_batch(
                    pieces, beam_size=beams, length_penalty=0.6 if beams > 1 else 0.0, max_batch_size=0,
                    min_decoding_length=args.out_len, max_decoding_length=args.out_len)
                return sum(len(r.hypotheses[0]) for r in results)
            return go

        runs[(f"CT2 {quantization}", "beam")] = run(args.beam)
        runs[(f"CT2 {quantization}", "greedy")] = run(1)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--src-len", type=int, default=30)
    parser.add_argument("--out-len", type=int, default=30, help="decoder steps per output (EOS included)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--base", action="store_true", help="the paper's base shape: 512, 8 heads, 2048, 6+6 layers")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: autocast, both sides")
    parser.add_argument("--skip-hf", action="store_true", help="do not time Hugging Face")
    parser.add_argument("--ct2", action="store_true", help="time CTranslate2 float32 and int8 too")
    parser.add_argument("--quantize", choices=["int8"], default=None, help="time tbuild's int8 decoding too")
    parser.add_argument("--only", default=None, help="comma-separated searches to time (beam, greedy)")
    args = parser.parse_args()
    if args.base:
        args.d_model, args.heads, args.d_ff, args.layers = 512, 8, 2048, 6
    configure_process(args.threads)
    torch.manual_seed(0)
    src = torch.randint(4, args.vocab, (args.sentences, args.src_len))
    n, out = args.sentences, args.out_len

    ours = tbuild_model(args)
    runs = {("tbuild", "beam"): beam_run(ours, src, args), ("tbuild", "greedy"): greedy_run(ours, src, args)}
    if args.quantize:
        from tbuild.engine.decoding.quantize import quantize_model

        small = quantize_model(tbuild_model(args), args.quantize)
        small.load_state_dict(ours.state_dict(), strict=False)
        runs[("tbuild " + args.quantize, "beam")] = beam_run(small, src, args)
        runs[("tbuild " + args.quantize, "greedy")] = greedy_run(small, src, args)
    if not args.skip_hf:
        runs.update(hf_runs(args, src))
    with tempfile.TemporaryDirectory() as tmp:
        if args.ct2:
            runs.update(ct2_runs(ours, args, src, Path(tmp)))
        if args.only:
            runs = {key: run for key, run in runs.items() if key[1] in args.only.split(",")}
        results = timed(runs, args.repeats, args.precision)

    print(f"{n} sentences x source {args.src_len} -> {out} output steps, d_model {args.d_model}, "
          f"{args.layers}+{args.layers} layers, vocab {args.vocab}, {args.threads} threads, {args.precision}, "
          f"median of {args.repeats}")
    print(f"{'':14}{'search':>8}{'wall s':>8}{'cpu s':>8}{'sent/s':>8}{'tok/s':>8}  speed vs tbuild (wall, cpu)")
    for (who, search), (seconds, cpu, tokens) in results.items():
        label = f"beam {args.beam}" if search == "beam" else search
        ours_s, ours_cpu, _ = results[("tbuild", search)]
        print(f"{who:14}{label:>8}{seconds:8.3f}{cpu:8.3f}{n / seconds:8.1f}{tokens / seconds:8.0f}"
              f"  {ours_s / seconds:.2f}x, {ours_cpu / cpu:.2f}x")


if __name__ == "__main__":
    main()
