"""python -m benchmarks: tbuild's training and decoding speed next to its peers, measured in one run
on this machine, as one table of medians, ratios and MFU (and ``--json PATH``).

CPU: training at each shape in fp32 and bf16 autocast (bf16 skipped where tbuild's precision probe
finds it emulated, under a quarter of fp32's matmul speed), Multi30k-like lengths (12-30 tokens),
4,096-token batches, vocabulary 8,000; decoding, beam 4 and greedy, 64 sentences of fixed lengths (30 tokens
-> 30 output steps) and all 1,000 of Multi30k test2016's lengths (each sentence's source and forced output
length drawn from its pairs: with all of them the ratio to CTranslate2 predicts the real workload's, with 64
the calls are too small to); training on a recipe's real batches (train-real: benchmarks/training_real.py).
GPU (when CUDA is present): bf16 training on WMT-like lengths (up to 128 tokens),
25,000-token batches, vocabulary 37,000, and the same decoding on the GPU. Peers: torch.nn.Transformer,
Hugging Face Marian (the "bench" extra) and CTranslate2 (the "export" extra); a missing one is a row saying why."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tbuild.builder.loader import SpecError
from tbuild.builder.spec import TrainSpec
from tbuild.engine.device.policy import choose_policy
from tbuild.engine.device.precision import bf16_probe
from tbuild.engine.device.process import configure_process
from tbuild.engine.errors import TbuildError

from . import hardware, report
from .decoding import DecodeRun, run_decoding
from .real_decoding import ENGINES, RealRun, run_real
from .real_lengths import draw
from .training import TrainRun, run_training
from .training_real import RealTrain, run_training_real
from .workload import MULTI30K_LENGTHS, SHAPES, WMT_LENGTHS, Workload, tbuild_spec

PEERS = ("torch", "hf", "ct2", "compiled", "bf16", "int8")  # the last three: tbuild --compile, bf16, int8 (CPU)
LENGTHS = ("fixed", "test2016")  # the decoding rows' lengths (benchmarks/real_lengths.py)
LENGTHS_SEED = 0
RECIPES = (Path("specs/multi30k-v1.yaml"), Path("specs/multi30k.yaml"))  # train-real's default: the first there
DEVICES = ("cpu", "cuda")
# TrainSpec settings for tbuild on a GPU, applied when this tbuild's TrainSpec has them
EMULATED_BF16 = 0.25  # bf16 at under this share of fp32 matmul speed: emulated (Zen 3: 0.02); too slow to time
GPU_TRAIN_SETTINGS = {"compile": "auto"}  # pad_multiple and row_steps: the CUDA defaults


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["train", "decode", "real", "train-real"],
                        help="run one part only (real: the --run workload alone; train-real: training on a recipe's "
                             "real batches alone)")
    parser.add_argument("--lengths", default=",".join(LENGTHS),
                        help="decoding lengths, comma-separated: fixed (30 -> 30), test2016 (drawn from Multi30k's; "
                             "counted with --run's tokenizer when given, else words)")
    parser.add_argument("--sentences", type=int, help="decoding sentences (default: 64 of fixed length, all 1,000 "
                        "of test2016's lengths; --quick 8)")
    parser.add_argument("--spec", type=Path, help="train-real's recipe (default: specs/multi30k-v1.yaml, else "
                                                  "specs/multi30k.yaml)")
    parser.add_argument("--steps", type=int, help="train-real: optimizer steps per round (default 5; --quick 2)")
    parser.add_argument("--runs-root", type=Path, default=Path.home() / ".cache" / "tbuild" / "bench-runs",
                        help="train-real: where its run directories (tokenizer, prepared data) are kept")
    parser.add_argument("--run", type=Path, help="a trained run: its test split through every decoding engine as "
                                                 "`tbuild decode` runs them (benchmarks/real_decoding.py)")
    parser.add_argument("--average", action="store_true", help="with --run: decode the average of the run's last "
                        "checkpoints (decode --average, as scripts/multi30k.sh evaluates), not the best")
    parser.add_argument("--lines", type=int, help="with --run: the split's first N lines (default: all)")
    parser.add_argument("--engines", help="with --run: comma-separated rows, from " + ", ".join(ENGINES)
                        + " (default: all)")
    parser.add_argument("--shapes", help=f"comma-separated, from {', '.join(SHAPES)} (default tiny,base; "
                                         "--quick: tiny)")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated, from {', '.join(PEERS)}")
    parser.add_argument("--devices", default=",".join(DEVICES), help="cpu, cuda or both (cuda: when present)")
    parser.add_argument("--repeats", type=int, help="timed rounds per comparison (default 5; --quick 2)")
    parser.add_argument("--warmup", type=int, help="untimed rounds first (default 2; --quick 1)")
    parser.add_argument("--threads", type=int, help="CPU threads for every implementation (default: all cores)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small vocabulary, batches and outputs")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--profile", type=int, metavar="N", help="training rows: after the timed rounds, N more "
                        "steps of each implementation under torch.profiler; prints each one's table (GPU busy %%, "
                        "host gaps, top kernels) and writes its trace into --profile-dir")
    parser.add_argument("--profile-dir", type=Path, default=Path("bench-profile"),
                        help="where --profile writes the traces (default: bench-profile/)")
    args = parser.parse_args(argv)
    args.shapes = _choices("--shapes", args.shapes or ("tiny" if args.quick else "tiny,base"), SHAPES)
    args.peers = _choices("--peers", args.peers, PEERS)
    args.lengths = _choices("--lengths", args.lengths, LENGTHS)
    args.fixed_sentences = args.sentences or (8 if args.quick else 64)
    args.sentences = args.sentences or (8 if args.quick else None)  # test2016 rows: None is all of it
    args.steps = args.steps or (2 if args.quick else 5)
    args.spec = args.spec or next((p for p in RECIPES if p.exists()), RECIPES[-1])
    args.devices = _choices("--devices", args.devices, DEVICES)
    args.repeats = args.repeats or (2 if args.quick else 5)
    args.warmup = (1 if args.quick else 2) if args.warmup is None else args.warmup
    for name in ("repeats", "threads", "sentences", "steps"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be 0 or more")
    if args.only == "real" and args.run is None:
        parser.error("--only real needs --run RUN")
    if args.engines is not None:
        args.engines = [n.strip() for n in args.engines.split(",")]
    unknown = sorted(set(args.engines or []) - set(ENGINES))
    if unknown:
        parser.error(f"--engines: no engine {', '.join(unknown)} (choose from {', '.join(ENGINES)})")
    return args


def _choices(option: str, text: str, known: dict | tuple) -> list[str]:
    picked = [t.strip() for t in text.split(",") if t.strip()]
    bad = [p for p in picked if p not in known]
    if bad or not picked:
        raise SystemExit(f"python -m benchmarks: {option} {text!r}: choose from {', '.join(known)}")
    return picked


def gpu_train_settings(shape_name: str, vocab: int) -> dict:
    """The GPU settings this tbuild's TrainSpec accepts (another branch adds them)."""
    settings = {}
    for key, value in GPU_TRAIN_SETTINGS.items():
        if key in TrainSpec.model_fields:
            try:
                tbuild_spec(SHAPES[shape_name], vocab, {key: value})
            except SpecError:
                continue
            settings[key] = value
    return settings


def device_part(args: argparse.Namespace, hw: hardware.Hardware, device: str, out: dict) -> None:
    """Training and decoding rows on ``device``, appended to ``out``."""
    cpu, quick = device == "cpu", args.quick
    if args.only in (None, "train-real") and cpu:
        _add(args, out, _train_real(args))
    if args.only == "train-real":  # no MFU column: no matmul peaks to measure
        return
    gemm = (512, 5) if quick else ((2048, 5) if cpu else (8192, 10))
    peaks = hardware.measured_peaks(torch.device(device), *gemm)
    out["peaks"][device] = peaks
    precisions = ["fp32", "bf16"] if cpu else ["bf16"]
    vocab = 1000 if quick else (8000 if cpu else 37000)
    for shape in args.shapes:
        if args.only != "decode":
            for precision in precisions:
                _add(args, out, _train(args, hw, device, shape, precision, vocab, peaks, out))
        if args.only != "train":
            length = 10 if quick else 30
            policy = choose_policy("fp32" if cpu else "bf16", device)
            for kind in args.lengths:
                try:
                    lengths = None if kind == "fixed" else _drawn(args, cap=2 * length if quick else None)
                except TbuildError as e:  # offline without a mirror: the fixed rows still run
                    _add(args, out, [{"part": "decode", "shape": shape, "device": device, "lengths": kind,
                                        "precision": policy.precision, "impl": "tbuild",
                                        "search": "beam 4, greedy", "skipped": str(e)}])
                    continue
                run = DecodeRun(SHAPES[shape], vocab, args.fixed_sentences, length, length, args.warmup, args.repeats,
                                args.threads, lengths)
                _add(args, out, run_decoding(run, policy, args.peers))


def _add(args: argparse.Namespace, out: dict, rows: list[dict]) -> None:
    """Rows as they finish: kept, printed to stderr at once, and the JSON rewritten (a run cut short keeps them)."""
    out["rows"].extend(rows)
    for row in rows:
        print(report.line(row), file=sys.stderr, flush=True)
    if args.json is not None:
        report.write_json(out, args.json)


def _drawn(args: argparse.Namespace, cap: int | None):  # noqa: ANN202 - real_lengths.Lengths
    """test2016's lengths for the decoding rows, counted with --run's tokenizer when given."""
    tokenizer = None
    if args.run is not None:
        from tbuild.engine.data.tokenizer import Tokenizer
        from tbuild.engine.run.directory import resolve_run

        tokenizer = Tokenizer.load(resolve_run(args.run, []).tokenizer)
    return draw(args.sentences, LENGTHS_SEED, tokenizer, cap=cap)


def _train_real(args: argparse.Namespace) -> list[dict]:
    """The train-real rows (fp32 and precision auto), or one row saying why not."""
    from tbuild.engine.errors import TbuildError

    try:
        return run_training_real(RealTrain(args.spec, args.runs_root, args.steps, args.warmup, args.repeats))
    except (TbuildError, SpecError) as e:
        return [{"part": "train-real", "shape": f"real {args.spec}", "device": "cpu", "precision": "fp32, auto",
                 "impl": "tbuild", "error": str(e).splitlines()[0]}]


def _train(args: argparse.Namespace, hw: hardware.Hardware, device: str, shape: str, precision: str, vocab: int,
           peaks: dict, out: dict) -> list[dict]:
    row = {"part": "train", "shape": shape, "device": device, "precision": precision, "impl": "tbuild"}
    if device == "cpu" and precision == "bf16":
        probe = bf16_probe(SHAPES[shape].d_model, SHAPES[shape].d_ff)  # what precision auto decides on
        row["bf16_matmul_ratio"] = round(probe.ratio, 3)
        if probe.ratio < EMULATED_BF16:
            return [{**row, "skipped": f"bf16 emulated on this CPU ({probe.describe()})"}]
    cpu, quick = device == "cpu", args.quick
    batch_tokens = 512 if quick else (4096 if cpu else 25000)
    work = Workload(SHAPES[shape], vocab, batch_tokens, MULTI30K_LENGTHS if cpu else WMT_LENGTHS,
                    args.warmup + args.repeats)
    settings = {} if cpu else gpu_train_settings(shape, vocab)
    peak, source = hardware.mfu_peak(hw, device, precision, peaks)
    out["settings"]["mfu_peaks"][f"{device} {precision}"] = source
    out["settings"]["train"][f"{device} {shape}"] = {"vocab": vocab, "batch_tokens": batch_tokens,
                                                     "lengths": work.lengths.__dict__, "tbuild_train": settings}
    impls = ["tbuild"] + [p for p in args.peers if p in ("torch", "hf")]
    rows = run_training(TrainRun(work, precision, device, args.threads, args.warmup, args.repeats, settings,
                                 peak, source, args.profile or 0, args.profile_dir), impls)
    return [{**r, **({"bf16_matmul_ratio": row["bf16_matmul_ratio"]} if "bf16_matmul_ratio" in row else {})}
            for r in rows]


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    process = configure_process(args.threads)
    args.threads = process.threads
    hw = hardware.detect()
    out: dict = {"command": ["python", "-m", "benchmarks", *(sys.argv[1:] if argv is None else argv)],
                 "hardware": hw.to_json(), "peaks": {}, "rows": [], "gpu_skipped": None,
                 "settings": {"repeats": args.repeats, "warmup": args.warmup, "quick": args.quick,
                              "peers": args.peers, "mfu_peaks": {}, "train": {}}}
    for device in args.devices if args.only != "real" else []:
        if device == "cuda" and not torch.cuda.is_available():
            out["gpu_skipped"] = "no GPU: skipped (torch.cuda.is_available() is False)"
            continue
        device_part(args, hw, device, out)
    if args.run is not None and args.only in (None, "decode", "real"):
        out["real"] = run_real(RealRun(args.run, "test", args.lines, args.warmup, args.repeats,
                                           0 if args.average else None), args.engines)
    report.show(out)
    if args.json is not None:
        report.write_json(out, args.json)


if __name__ == "__main__":
    main()
