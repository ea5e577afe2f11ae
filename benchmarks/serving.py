"""python -m benchmarks.serving RUN: `tbuild serve`'s throughput and latency under load, with
cross-request batching on and off. For each mode a server is started on a free port of 127.0.0.1;
for each level, N clients (default 1, 4, 16, 64) each send single sentences, one request at a time,
until the level's requests are sent or its time is up (both bounded); every answer is checked
against the translator's own output for that line (nothing lost, nothing mixed up). Prints a
Markdown table (and ``--json PATH``); stops the server with SIGTERM at the end."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

HOST = "127.0.0.1"  # never another interface


@dataclass
class Level:
    batching: str
    clients: int
    requests: int
    seconds: float
    sentences_per_s: float
    p50_ms: float
    p99_ms: float
    wrong: int  # answers whose text or score differ from the translator's output for that line
    failed: int  # requests without a 200
    batches: int  # engine calls the server made for this level
    errors: list[str]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a trained run directory (or its spec)")
    parser.add_argument("--clients", default="1,4,16,64", help="concurrent clients per level (comma-separated)")
    parser.add_argument("--requests", type=int, default=128, help="most requests per level")
    parser.add_argument("--seconds", type=float, default=60.0, help="most seconds per level (no new request after)")
    parser.add_argument("--lines", type=int, default=256, help="sentences of the run's test split to send")
    parser.add_argument("--max-wait-ms", type=float, default=10.0, help="the server's --max-wait-ms")
    parser.add_argument("--modes", default="on,off", help="batching modes to measure: on, off or both")
    parser.add_argument("--compile", action="store_true", help="the server's --compile (it compiles before it "
                        "listens)")
    parser.add_argument("--engine", default="native", help="the server's --engine: native or ctranslate2")
    parser.add_argument("--quantization", help="the server's --quantization (int8...); default: the run's")
    parser.add_argument("--stopping", help="the server's --stopping (exact or beam); default: the run's")
    parser.add_argument("--average", action="store_true", help="the server's --average (the run's last checkpoints)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    return parser.parse_args(argv)


def serve_options(args: argparse.Namespace) -> list[str]:
    """The engine options the server is started with, and the reference decoded with."""
    return ["--engine", args.engine, *(["--quantization", args.quantization] if args.quantization else []),
            *(["--stopping", args.stopping] if args.stopping else []), *(["--average"] if args.average else [])]


def reference(run: Path, n: int, args: argparse.Namespace) -> tuple[list[str], list[tuple[str, float]]]:
    """The first ``n`` non-empty test sentences within the model's source limit (the server refuses
    longer ones) and the outputs and scores of the server's engine for them (one call, as `tbuild decode` on a
    file). The score tells apart sentences whose outputs read the same (an under-trained model's)."""
    from tbuild.engine.data.datasets import read_split
    from tbuild.engine.decoding.native import DEFAULT_MAX_SOURCE
    from tbuild.engine.decoding.request import DecodeRequest
    from tbuild.engine.export.engines import load_engine
    from tbuild.engine.run.directory import resolve_run

    loaded = resolve_run(run)
    engine = load_engine(loaded, args.engine, quantization=args.quantization, average=0 if args.average else None)
    limit = loaded.spec.model.max_positions or DEFAULT_MAX_SOURCE
    split = [line.strip() for line in read_split(loaded.spec.data, "test", lambda _: None)[0]]
    lines = [line for line, ids in zip(split, engine.tokenizer.encode(split), strict=True)
             if line and len(ids) < limit][:n]
    outputs = [(engine.tokenizer.decode(h[0].tokens), h[0].score) if h else ("", 0.0)
               for h in engine.translate(lines, DecodeRequest.of(loaded.spec.decode,
                                                                 **({"stopping": args.stopping} if args.stopping
                                                                    else {})))]
    return lines, outputs


def same(body: dict, want: tuple[str, float]) -> bool:
    """The answer is the reference's text, with its score up to float noise (other batch neighbours pad
    differently)."""
    text, score = want
    return body["translations"] == [text] and abs(body["scores"][0] - score) <= 1e-3 * max(1.0, abs(score))


def call(url: str, body: dict | None = None, timeout: float = 300) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def start_server(run: Path, batching: bool, max_wait_ms: float, compiled: bool = False, options: list[str] = ()
                 ) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "tbuild.cli", "serve", str(run), "--host", HOST, "--port", str(port),
            "--max-wait-ms", str(max_wait_ms), "--timeout", "600", "--batching" if batching else "--no-batching",
            *(["--compile"] if compiled else []), *options]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://{HOST}:{port}"
    for _ in range(3000):  # at most 600 s to load (and compile)
        if process.poll() is not None:
            raise SystemExit(f"tbuild serve exited with {process.returncode}: {' '.join(args)}")
        try:
            call(f"{url}/health", timeout=1)
            return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("tbuild serve did not answer within 600 s")


def load(url: str, clients: int, lines: list[str], want: list[tuple[str, float]], requests: int, seconds: float,
         mode: str) -> Level:
    """``clients`` threads sending one sentence per request until ``requests`` are sent or ``seconds`` pass."""
    lock, latencies, errors = threading.Lock(), [], []
    counter, wrong, failed = [0], [0], [0]
    deadline = time.monotonic() + seconds
    before = call(f"{url}/health")[1]["batches"]

    def client() -> None:
        while time.monotonic() < deadline:
            with lock:
                if counter[0] >= requests:
                    return
                i = counter[0] % len(lines)
                counter[0] += 1
            started = time.perf_counter()
            try:
                status, body = call(f"{url}/translate", {"src": [lines[i]], "scores": True})
            except OSError as e:
                status, body = 0, {"error": str(e)}
            took = time.perf_counter() - started
            with lock:
                if status != 200:
                    failed[0] += 1
                    errors.append(f"{status}: {body.get('error')}")
                    continue
                latencies.append(took)
                wrong[0] += not same(body, want[i])

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    batches = call(f"{url}/health")[1]["batches"] - before
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    return Level(mode, clients, len(latencies) + failed[0], round(wall, 2), round(len(latencies) / wall, 2),
                 round(quantiles[49] * 1000), round(quantiles[98] * 1000), wrong[0], failed[0], batches, errors[:5])


def table(rows: list[Level]) -> str:
    head = ("| clients | batching | requests | sentences/s | p50 ms | p99 ms | batches | wrong | failed |\n"
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    return head + "".join(f"| {r.clients} | {r.batching} | {r.requests} | {r.sentences_per_s:.2f} | {r.p50_ms} | "
                          f"{r.p99_ms} | {r.batches} | {r.wrong} | {r.failed} |\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    lines, want = reference(args.run, args.lines, args)
    rows: list[Level] = []
    for mode in args.modes.split(","):
        process, url = start_server(args.run, mode == "on", args.max_wait_ms, args.compile, serve_options(args))
        try:
            for clients in (int(c) for c in args.clients.split(",")):
                rows.append(load(url, clients, lines, want, args.requests, args.seconds, mode))
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
    print(table(rows), end="")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 1 if any(r.wrong or r.failed for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
