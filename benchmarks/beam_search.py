"""Decoding speed on CPU: tbuild's beam search and greedy decoding next to Hugging Face
``MarianMTModel.generate`` at the same shape (random weights, post-norm, tied embeddings, ReLU).

Every output is forced to exactly --out-len decoder steps on both sides (tbuild: min_len = max_len,
so out-len - 1 tokens and EOS; HF: min_new_tokens = max_new_tokens), so both do the same work.
Both run in one process with the same torch settings (tbuild's ``configure_process``: thread count, flushed
denormals, glibc heap reuse), and with ``--precision bf16`` both under the same CPU bf16 autocast.
Needs the optional "bench" extra (transformers). Not a test:

    python benchmarks/beam_search.py [--repeats 3] [--threads 2] [--precision fp32|bf16]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.tokens import BOS, EOS, PAD
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.policy import choose_policy
from tbuild.engine.process import configure_process


def tbuild_model(args: argparse.Namespace) -> torch.nn.Module:
    stack = {"layers": args.layers, "heads": args.heads, "d_ff": args.d_ff}
    spec = load_spec({"model": {
        "vocab_size": args.vocab, "d_model": args.d_model, "encoder": stack, "decoder": stack,
        "tie_embeddings": "three_way", "norm_placement": "post",
    }}).spec
    return build_model(spec).eval()


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


def timed(runs: dict[tuple[str, str], Callable[[], int]], repeats: int,
          precision: str) -> dict[tuple[str, str], tuple[float, int]]:
    """Median wall time of ``repeats`` runs of each function after one warm-up, and the output
    tokens of a run. The runs are interleaved so that other load on the machine hits all alike."""
    with choose_policy(precision, "cpu").autocast():  # type: ignore[arg-type]
        return _timed(runs, repeats)


def _timed(runs: dict[tuple[str, str], Callable[[], int]], repeats: int) -> dict[tuple[str, str], tuple[float, int]]:
    tokens = {key: run() for key, run in runs.items()}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            start = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - start)
    return {key: (statistics.median(times[key]), tokens[key]) for key in runs}


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
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: autocast, both sides")
    parser.add_argument("--skip-hf", action="store_true", help="time tbuild only")
    args = parser.parse_args()
    configure_process(args.threads)
    torch.manual_seed(0)
    src = torch.randint(4, args.vocab, (args.sentences, args.src_len))
    n, out = args.sentences, args.out_len

    ours = tbuild_model(args)

    def ours_beam() -> int:
        hyps = beam_search(ours, src, beam=args.beam, alpha=0.6, max_len_a=0, max_len_b=out, min_len=out)
        return sum(len(h[0].tokens) + 1 for h in hyps)

    def ours_greedy() -> int:
        outputs = greedy_search(ours, src, max_len_a=0, max_len_b=out, min_len=out)
        return sum(len(o) + 1 for o in outputs)

    runs = {("tbuild", "beam"): ours_beam, ("tbuild", "greedy"): ours_greedy}
    if not args.skip_hf:
        theirs = hf_model(args)
        mask = torch.ones_like(src)

        def hf(beams: int) -> Callable[[], int]:
            beam_args = {"length_penalty": 0.6, "early_stopping": True} if beams > 1 else {}

            def run() -> int:
                with torch.no_grad():
                    seqs = theirs.generate(input_ids=src, attention_mask=mask, num_beams=beams, do_sample=False,
                                           min_new_tokens=out, max_new_tokens=out, **beam_args)
                return seqs.numel() - seqs.size(0)  # without the decoder start token
            return run

        runs[("HF", "beam")] = hf(args.beam)
        runs[("HF", "greedy")] = hf(1)
    results = timed(runs, args.repeats, args.precision)

    print(f"{n} sentences x source {args.src_len} -> {out} output steps, d_model {args.d_model}, "
          f"{args.layers}+{args.layers} layers, vocab {args.vocab}, {args.threads} threads, {args.precision}, "
          f"median of {args.repeats}")
    print(f"{'':8}{'search':>10}{'seconds':>10}{'sent/s':>10}{'tokens/s':>10}")
    for (who, search), (seconds, tokens) in results.items():
        label = f"beam {args.beam}" if search == "beam" else search
        print(f"{who:8}{label:>10}{seconds:10.3f}{n / seconds:10.1f}{tokens / seconds:10.0f}")
    for search in ("beam", "greedy"):
        if ("HF", search) in results:
            (ours_s, ours_t), (hf_s, hf_t) = results[("tbuild", search)], results[("HF", search)]
            print(f"tbuild/HF {search}: {(ours_t / ours_s) / (hf_t / hf_s):.2f}x tokens/s")


if __name__ == "__main__":
    main()
