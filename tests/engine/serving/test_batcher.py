"""The batcher gathers concurrent jobs into one engine call up to its budget and its wait, splits the
results back in order, answers a failed batch with its error and drains its queue when closed."""

from __future__ import annotations

import threading
import time

import pytest

from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.decoding.search import Hypothesis
from tbuild.engine.serving.batcher import Batcher, Job, Worker

SPEC = DecodeRequest()


class Recorder:
    """A fake engine: each line's output is its own text's length; records the batches it is given."""

    def __init__(self, delay: float = 0.0) -> None:
        self.batches: list[list[str]] = []
        self.delay = delay

    def __call__(self, lines: list[str], spec: DecodeRequest) -> list[list[Hypothesis]]:
        self.batches.append(lines)
        time.sleep(self.delay)
        return [[Hypothesis(tokens=[len(line)], score=-1.0, log_prob=-1.0)] for line in lines]


def job(*lines: str, spec: DecodeRequest = SPEC) -> Job:
    return Job(list(lines), [len(line) for line in lines], spec)


def test_concurrent_jobs_are_decoded_together_and_split_back() -> None:
    engine = Recorder()
    batcher = Batcher(engine, budget=1000, max_wait=0.3)
    jobs = [job("a" * n, "b" * (n + 10)) for n in range(1, 7)]
    futures = [batcher.submit(j) for j in jobs]
    results = [f.result(timeout=5) for f in futures]
    batcher.close()
    assert len(engine.batches) == 1 and len(engine.batches[0]) == 12
    for n, result in enumerate(results, 1):
        assert [h[0].tokens for h in result] == [[n], [n + 10]]
    assert batcher.stats.to_json() == {"batches": 1, "requests": 6, "sentences": 12, "largest_batch": 12}


def test_the_budget_cuts_batches_and_off_means_one_job_each() -> None:
    engine = Recorder()
    batcher = Batcher(engine, budget=30, max_wait=0.3)  # 10 tokens each: 3 jobs fit (10 · 3 ≤ 30)
    for f in [batcher.submit(job("x" * 10)) for _ in range(7)]:
        f.result(timeout=5)
    batcher.close()
    assert [len(b) for b in engine.batches] == [3, 3, 1]
    alone = Recorder()
    off = Batcher(alone, budget=1000, max_wait=0.3, enabled=False)
    for f in [off.submit(job("x")) for _ in range(4)]:
        f.result(timeout=5)
    off.close()
    assert [len(b) for b in alone.batches] == [1, 1, 1, 1]


def test_different_options_are_decoded_apart() -> None:
    engine = Recorder()
    batcher = Batcher(engine, budget=1000, max_wait=0.2)
    futures = [batcher.submit(job("a")), batcher.submit(job("b", spec=DecodeRequest(beam=1))), batcher.submit(job("c"))]
    [f.result(timeout=5) for f in futures]
    batcher.close()
    assert sorted(engine.batches) == [["a", "c"], ["b"]]


def test_a_failing_batch_answers_its_requests_with_the_error_and_the_next_works() -> None:
    calls = []

    def flaky(lines: list[str], spec: DecodeRequest) -> list[list[Hypothesis]]:
        calls.append(lines)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return [[] for _ in lines]

    batcher = Batcher(flaky, budget=1000, max_wait=0.0)
    with pytest.raises(RuntimeError, match="boom"):
        batcher.submit(job("a")).result(timeout=5)
    assert batcher.submit(job("b")).result(timeout=5) == [[]]
    batcher.close()


def test_close_decodes_every_queued_job_then_stops() -> None:
    engine = Recorder(delay=0.05)
    batcher = Batcher(engine, budget=10, max_wait=0.01)  # one 10-token job per batch: a queue builds up
    futures = [batcher.submit(job("y" * 10)) for _ in range(5)]
    closer = threading.Thread(target=batcher.close)
    closer.start()
    closer.join(timeout=5)
    assert not closer.is_alive()
    assert all(f.done() and f.result() == [[Hypothesis(tokens=[10], score=-1.0, log_prob=-1.0)]] for f in futures)
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(job("z"))


def test_a_job_decoded_alone_is_never_merged() -> None:
    """A sampled request's job (``alone``) gets its own engine call, so its seed gives what it gives alone."""
    engine = Recorder()
    batcher = Batcher(engine, budget=1000, max_wait=0.3)
    futures = [batcher.submit(job("a")), batcher.submit(Job(["b"], [1], SPEC, alone=True)),
               batcher.submit(Job(["c"], [1], SPEC, alone=True)), batcher.submit(job("d"))]
    for f in futures:
        f.result(timeout=5)
    batcher.close()
    assert sorted(engine.batches) == [["a", "d"], ["b"], ["c"]]


def test_a_worker_runs_calls_in_order_on_one_thread_and_passes_errors_on() -> None:
    worker = Worker()
    seen: list[tuple[int, int]] = []
    futures = [worker.call(lambda n=n: seen.append((n, threading.get_ident())) or n) for n in range(5)]
    assert [f.result(timeout=5) for f in futures] == list(range(5))
    assert [n for n, _ in seen] == list(range(5)) and len({ident for _, ident in seen}) == 1
    assert seen[0][1] != threading.get_ident()
    with pytest.raises(ZeroDivisionError):
        worker.call(lambda: 1 / 0).result(timeout=5)
    worker.close()


def test_the_batcher_decodes_on_the_worker_it_is_given() -> None:
    """The server's engine decodes on the thread that loaded it (libgomp throttles a second thread's team)."""
    worker = Worker()
    loader = worker.call(threading.get_ident).result(timeout=5)
    decoders: list[int] = []

    def decode(lines: list[str], spec: DecodeRequest) -> list[list[Hypothesis]]:
        decoders.append(threading.get_ident())
        return Recorder()(lines, spec)

    batcher = Batcher(decode, budget=1000, max_wait=0.0, worker=worker)
    batcher.submit(job("a", "bb")).result(timeout=5)
    batcher.close(timeout=5)
    assert decoders == [loader]


def test_requests_one_at_a_time_are_not_held_after_the_first() -> None:
    """One client: the first batch waits for company (none comes), the following lone requests do not wait;
    once requests have met in a batch, the next batch waits for others again."""
    engine, started, release = Recorder(), threading.Event(), threading.Event()

    def decode(lines: list[str], spec: DecodeRequest) -> list[list[Hypothesis]]:
        if lines == ["x"]:
            started.set()
            release.wait(5)  # "y" and "z" queue up meanwhile
        return engine(lines, spec)

    batcher = Batcher(decode, budget=1000, max_wait=0.3)

    def timed(line: str) -> float:
        start = time.monotonic()
        batcher.submit(job(line)).result(timeout=5)
        return time.monotonic() - start

    took = [timed(line) for line in ("a", "b", "c")]
    assert took[0] >= 0.3 and max(took[1:]) < 0.2, took
    busy = batcher.submit(job("x"))  # alone, decoded at once (after lone batches)
    assert started.wait(5)
    queued = [batcher.submit(job("y")), batcher.submit(job("z"))]
    release.set()
    [f.result(timeout=5) for f in [busy, *queued]]
    assert timed("h") >= 0.3  # after a batch of two, a batch waits again
    batcher.close()
    assert engine.batches == [["a"], ["b"], ["c"], ["x"], ["y", "z"], ["h"]]
