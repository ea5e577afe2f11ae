"""Data at scale on this machine: preparation speed and memory, and time to the first training step,
on synthetic corpora of Multi30k sentences recombined to 0.5M and 5M pairs (and any other sizes).

For each size N it writes N pairs (a random Multi30k source sentence joined with another, and the
matching German sentences, so lengths vary like real data), then in fresh processes:

- ``tbuild data prepare`` with a tokenizer trained once on Multi30k: wall seconds, pairs/s and the
  peak resident memory of the process tree (parent and encoding workers);
- ``tbuild train`` of the first multi30k recipe (specs/multi30k-v1.yaml, as docs/benchmarks.md's figures)
  for one step on the prepared data: seconds from the command's start to its first optimizer step (the
  "step 1" log line) and peak resident memory.

Memory that grows with N is what the data costs; the model and optimizer are the same for every N.
Not a test:

    python benchmarks/data_pipeline.py [--sizes 500000 5000000] [--processes 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TBUILD = [sys.executable, "-m", "tbuild.cli"]  # the tbuild command, also where its console script is not on PATH


def multi30k_train(folder: Path) -> Path:
    """Multi30k's English and German training files in ``folder`` (copied from $TBUILD_DATA_MIRROR,
    else downloaded; checked against their sha256); the prefix of the two files."""
    from tbuild.engine.data.multi30k import fetch_multi30k

    fetch_multi30k(folder, langs=("en", "de"), splits=("train",))
    return folder / "train"


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def write_corpus(folder: Path, n: int, multi30k: Path, seed: int = 0) -> Path:
    """N pairs: each a join of two random Multi30k training pairs (1-2 sentences per side); ``multi30k``:
    the prefix of its training files."""
    en, de = read(Path(f"{multi30k}.en.gz")), read(Path(f"{multi30k}.de.gz"))
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "train.en").open("w", encoding="utf-8") as fe, \
            (folder / "train.de").open("w", encoding="utf-8") as fd:
        for _ in range(n):
            i, j = rng.randrange(len(en)), rng.randrange(len(en))
            two = rng.random() < 0.5
            fe.write(f"{en[i]} {en[j]}\n" if two else f"{en[i]}\n")
            fd.write(f"{de[i]} {de[j]}\n" if two else f"{de[i]}\n")
    return folder / "train"


def run_measured(cmd: list[str], marker: str | None = None) -> dict:
    """Run ``cmd``; wall seconds, seconds until a stdout line containing ``marker``, and the peak
    resident memory (MiB) of the process and its children (sampled from /proc every 50 ms)."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    seen, lines = None, []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if marker and seen is None and marker in line:
            seen = time.monotonic() - started
    proc.wait()
    done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{''.join(lines[-20:])}")
    return {"seconds": time.monotonic() - started, "marker_seconds": seen, "peak_rss_mib": peak[0] / 2**20,
            "output": "".join(lines)}


DATA_PROBE = """
import os, sys
from pathlib import Path
from tbuild.engine.data.batches import BatchCursor
from tbuild.engine.data.mapped import MappedPairs

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

before = rss()
pairs = MappedPairs(Path(sys.argv[1]))
cursor = BatchCursor(pairs.src_lengths, pairs.tgt_lengths, int(sys.argv[2]), seed=1)
batch = cursor.next()
print((rss() - before) / 2**20)
"""


def data_memory(folder: Path, batch_tokens: int) -> float:
    """MiB that opening the prepared split and cutting an epoch's batches adds to a fresh process
    (what the data costs the trainer; the model and optimizer are the same for every corpus size)."""
    out = subprocess.run([sys.executable, "-c", DATA_PROBE, str(folder), str(batch_tokens)], check=True,
                         capture_output=True, text=True)
    return float(out.stdout)


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500_000, 5_000_000])
    parser.add_argument("--processes", type=int, default=None, help="encoding processes (default: the cores)")
    parser.add_argument("--keep", type=Path, default=None, help="keep corpora and runs here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tbuild-data-bench-"))
    spec = REPO / "specs" / "multi30k-v1.yaml"  # the recipe docs/benchmarks.md measured
    tok_run = root / "tokenizer"
    common = ["--set", "data.dataset=null", "--set", "data.valid=null", "--set", "data.test=null"]
    print(f"corpora and runs in {root}", flush=True)
    multi30k = multi30k_train(root / "multi30k")
    subprocess.run(TBUILD + ["data", "prepare", str(spec), "--set", f"output_dir={tok_run}",
                             "--set", f"data.train={multi30k}"] + common,
                   check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    results = []
    for n in args.sizes:
        started = time.monotonic()
        prefix = write_corpus(root / f"corpus{n}", n, multi30k)
        print(f"{n:,} pairs written in {time.monotonic() - started:.0f} s", flush=True)
        sets = common + ["--set", f"data.train={prefix}", "--set", f"data.tokenizer.model={tok_run / 'spm.model'}",
                         "--set", f"output_dir={root / f'run{n}'}"]
        workers = ["--processes", str(args.processes)] if args.processes else []
        prep = run_measured(TBUILD + ["data", "prepare", str(spec)] + sets + workers)
        train = run_measured(TBUILD + ["train", str(spec)] + sets + ["--set", "train.max_steps=1",
                             "--set", "train.max_epochs=null", "--set", "train.log_every=1"], marker="step 1 ")
        folder = root / f"run{n}" / "prepared" / "train"
        header = json.loads((folder / "header.json").read_text())
        results.append({"pairs": n, "kept": header["pairs"], "prepare_seconds": prep["seconds"],
                        "prepare_pairs_per_s": n / prep["seconds"], "prepare_peak_rss_mib": prep["peak_rss_mib"],
                        "first_step_seconds": train["marker_seconds"], "train_peak_rss_mib": train["peak_rss_mib"],
                        "train_data_mib": data_memory(folder, 4096)})
        print(json.dumps(results[-1]), flush=True)
    print(f"\n{'pairs':>10} {'prepare s':>10} {'pairs/s':>9} {'prep RSS MiB':>13} {'first step s':>13} "
          f"{'train RSS MiB':>14} {'of it data MiB':>15}")
    for r in results:
        print(f"{r['pairs']:>10,} {r['prepare_seconds']:>10.1f} {r['prepare_pairs_per_s']:>9,.0f} "
              f"{r['prepare_peak_rss_mib']:>13,.0f} {r['first_step_seconds']:>13.1f} {r['train_peak_rss_mib']:>14,.0f} "
              f"{r['train_data_mib']:>15,.1f}")
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(f"memory ratio {b['pairs']:,} / {a['pairs']:,} pairs: preparation "
              f"{b['prepare_peak_rss_mib'] / a['prepare_peak_rss_mib']:.2f}x, training "
              f"{b['train_peak_rss_mib'] / a['train_peak_rss_mib']:.2f}x")
    print(json.dumps(results))
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
