"""One training process per run directory: the main process holds an exclusive lock on ``RUN/.lock``
while it trains, so a second `tbuild train` (or sweep) on the same directory is refused instead of
interleaving its checkpoints and metrics with the first's. The lock goes with the process (the OS drops
it when the process ends, however it ends), so ``held_by`` also says whether the process that took a
lock on this machine is still alive (a study's trial: ``tune/workers.py``)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..errors import TbuildError

LOCK = ".lock"


class RunLock:
    """The lock file ``name`` in ``run`` (default: the run's training lock)."""

    def __init__(self, run: Path, name: str = LOCK) -> None:
        self.path = run / name
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0) -> RunLock:
        """Take the lock, trying again for up to ``wait`` seconds, or a TbuildError naming the process
        that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise TbuildError(f"{self.path.parent} is being trained by process {holder}; wait for it to "
                                  "end, or stop it (Ctrl-C stops at the next step and keeps a checkpoint)") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None


def held_by(path: Path) -> str | None:
    """The process holding the lock file at ``path`` (its pid as written, or "another process"), or None
    where no process holds it (none ever took it, or the one that did has ended, however it ended).
    Looks with a shared lock dropped at once: a holder taking the lock at that instant waits for it
    (``acquire(wait=...)``)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return os.read(fd, 32).decode(errors="replace").strip() or "another process"
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
