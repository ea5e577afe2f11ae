"""Cross-request dynamic batching: the sentences of concurrent requests are gathered, up to a token
budget or a maximum wait after the first one, decoded together in one call of the engine (which
sorts them by length) and split back to their requests. One worker thread (a ``Worker``, the one that loaded
the model) decodes; requests wait on futures, so a request that gives up (a timeout) only drops its own job."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

from ..decoding.request import DecodeRequest

Decode = Callable[[list[str], DecodeRequest], list[Any]]  # a result per line: its n-best list, or its labels


@dataclass
class Job:
    """One request's lines, their source lengths in tokens and decoding request (settings only: no
    per-line inputs, so that jobs with equal requests decode as one, unless ``alone``: a sampled job, whose
    seed must give what it gives on its own); ``future`` gets the results in the lines' order."""

    lines: list[str]
    lengths: list[int]
    request: DecodeRequest
    alone: bool = False
    future: Future = field(default_factory=Future)


@dataclass
class BatchStats:
    batches: int = 0  # engine calls
    requests: int = 0
    sentences: int = 0
    largest: int = 0  # most sentences in one batch

    def to_json(self) -> dict:
        return {"batches": self.batches, "requests": self.requests, "sentences": self.sentences,
                "largest_batch": self.largest}


_STOP = object()


class Worker:
    """A daemon thread that runs calls one after another, each answered on a future. A server loads its model
    and decodes on one such thread: torch's CPU threads (libgomp) keep a team per calling thread, and once the
    process's teams outnumber the cores every team waits by sleeping, so a model loaded (its team started) on
    the main thread decodes about 2× slower on another (docs/benchmarks.md, "The server's thread"). A daemon,
    not a ``ThreadPoolExecutor``, whose threads are joined at exit: a decode loop left open would hang it."""

    def __init__(self, name: str = "tbuild-engine") -> None:
        self._calls: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], Any]) -> Future:
        """Run ``fn`` on the thread after the calls before it; its result (or exception) on the future."""
        future: Future = Future()
        self._calls.put((fn, future))
        return future

    def close(self) -> None:
        """End the thread once the calls before this one are done."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as e:  # the caller gets it
                    future.set_exception(e)


class Batcher:
    """Gathers jobs into batches of at most ``budget`` source tokens, counted as the engine counts its
    batches (longest source · sentences, padding included: a gathered batch is one engine batch),
    waiting at most ``max_wait`` seconds after a batch's first job for others (``enabled=False``: one
    job per batch, no wait). A batch after one that decoded a job alone does not wait: requests arriving one
    at a time (one client) are not held for company that has not come, and once two jobs meet in a batch the
    next waits again. It decodes on ``worker`` (the thread that loaded the model; default: its own)."""

    def __init__(self, decode: Decode, *, budget: int, max_wait: float, enabled: bool = True,
                 after_batch: Callable[[], None] = lambda: None, worker: Worker | None = None) -> None:
        self.decode, self.budget, self.max_wait, self.enabled = decode, budget, max_wait, enabled
        self.after_batch = after_batch
        self.stats = BatchStats()
        self._queue: queue.Queue = queue.Queue()
        self._held: Job | None = None  # a job that did not fit the last batch: it opens the next
        self._company = True  # the last batch gathered several jobs (or none yet): the next one waits for others
        self._worker = worker or Worker("tbuild-batcher")
        self._closed = False
        self._running = self._worker.call(self._run)

    def submit(self, job: Job) -> Future:
        if self._closed:
            raise RuntimeError("the batcher is closed")
        self._queue.put(job)
        return job.future

    def pending(self) -> int:
        return self._queue.qsize() + (self._held is not None)

    def close(self, timeout: float | None = None) -> None:
        """Decode every job already submitted, then stop the worker (SIGTERM's drain)."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._worker.close()
        wait([self._running], timeout)

    def _run(self) -> None:
        while True:
            jobs, stop = self._gather()
            if jobs:
                self._decode(jobs)
            if stop:
                return

    def _next(self, timeout: float | None) -> object:
        if self._held is not None:
            job, self._held = self._held, None
            return job
        return self._queue.get(timeout=timeout)

    def _gather(self) -> tuple[list[Job], bool]:
        """The next batch's jobs, and whether the stop sign came after them."""
        first = self._next(None)
        if first is _STOP:
            return [], True
        jobs, longest, count = [first], max(first.lengths, default=0), len(first.lines)
        deadline = time.monotonic() + (self.max_wait if self._company else 0.0)
        while self.enabled and longest * count < self.budget:
            left = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            wider = max([longest, *job.lengths])
            if wider * (count + len(job.lines)) > self.budget:
                self._held = job
                break
            jobs.append(job)
            longest, count = wider, count + len(job.lines)
        self._company = len(jobs) > 1 or self._held is not None
        return jobs, False

    def _decode(self, jobs: list[Job]) -> None:
        """Decode the jobs still wanted, grouped by their decoding requests, and answer each."""
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        groups: dict[tuple[DecodeRequest, int], list[Job]] = {}
        for job in jobs:
            groups.setdefault((job.request, id(job) if job.alone else 0), []).append(job)
        for group in groups.values():
            lines = [line for job in group for line in job.lines]
            try:
                results = self.decode(lines, group[0].request)
            except Exception as e:  # the requests get a 500; the server keeps serving
                for job in group:
                    job.future.set_exception(e)
                continue
            finally:
                self.after_batch()
            self.stats.batches += 1
            self.stats.requests += len(group)
            self.stats.sentences += len(lines)
            self.stats.largest = max(self.stats.largest, len(lines))
            start = 0
            for job in group:
                job.future.set_result(results[start: start + len(job.lines)])
                start += len(job.lines)
