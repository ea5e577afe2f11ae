"""Process-wide settings, applied once by an entry point (the CLI) through ``configure_process``:
CPU threads, flushing denormals, and how glibc's heap keeps freed memory. Library code (trainer,
translator) changes none of them; it calls back ``ProcessSettings.after_step``/``after_batch``
only where the entry point passes them in."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

TRIM_EVERY = 25  # training steps between heap trims (see reuse_freed_memory)


@dataclass(frozen=True)
class ProcessSettings:
    """What ``configure_process`` set, and the housekeeping that goes with it."""

    threads: int
    heap_kept: bool  # glibc keeps freed memory for reuse; give it back now and then

    def after_step(self, step: int) -> None:
        """Between training steps: trim the heap every ``TRIM_EVERY`` steps."""
        if self.heap_kept and step % TRIM_EVERY == 0:
            release_free_memory()

    def after_batch(self) -> None:
        """Between decoding batches: trim the heap."""
        if self.heap_kept:
            release_free_memory()

    @contextmanager
    def using_threads(self, threads: int | None) -> Iterator[None]:
        """Within: ``threads`` CPU threads (None: as set), then this process's again (a study times its
        trials' decoding with the threads a user decodes with)."""
        torch.set_num_threads(threads or self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(self.threads)


def configure_process(threads: int | None = None, *, keep_heap: bool = True) -> ProcessSettings:
    """Set this process's CPU threads (all cores unless told), flush denormals and, with ``keep_heap``,
    make glibc reuse freed memory. Call once, from the entry point."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    n = threads or cores
    torch.set_num_threads(n)
    # Denormal floats (weights and Adam moments drifting towards 0) make CPU arithmetic several times
    # slower within a few dozen steps (docs/benchmarks.md). Flush them to zero.
    torch.set_flush_denormal(True)
    return ProcessSettings(threads=n, heap_kept=keep_heap and reuse_freed_memory())


def _glibc() -> ctypes.CDLL | None:
    """The C library if it is glibc (has ``mallopt`` and ``malloc_trim``), else None (macOS, musl)."""
    path = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(path) if path else None
        if libc is None or not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
            return None
    except OSError:
        return None
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return libc


_LIBC = _glibc()


def reuse_freed_memory() -> bool:
    """Make glibc keep freed memory for reuse instead of returning every large tensor to the OS.

    glibc serves blocks above 32 MB (logits, their gradients) with a fresh mmap each time, so every
    step pays a page fault per 4 KB touched; reusing them shortens a CPU training step (docs/benchmarks.md).
    The heap fragments as tensor sizes vary (resident memory grows step after step), so long loops trim
    it now and then (``ProcessSettings.after_step``). Returns False without glibc.
    """
    if _LIBC is None:
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # from glibc's malloc.h
    return bool(_LIBC.mallopt(m_mmap_max, 0)) and bool(_LIBC.mallopt(m_trim_threshold, 2**31 - 1))


def release_free_memory() -> None:
    """Return the heap's free pages to the OS (glibc ``malloc_trim``); with it every 25 training steps
    resident memory stayed at 1.1 GB and the step time within noise of not trimming."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
