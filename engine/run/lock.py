"""One training process per run directory: the main process holds an exclusive lock on ``RUN/.lock``
while it trains, so a second `tbuild train` (or sweep) on the same directory is refused instead of
interleaving its checkpoints and metrics with the first's. The lock goes with the process (the OS drops
it when the process ends, however it ends)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import TbuildError

LOCK = ".lock"


class RunLock:
    def __init__(self, run: Path) -> None:
        self.path = run / LOCK
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock, or a TbuildError naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise TbuildError(f"{self.path.parent} is being trained by process {holder}; wait for it to end, "
                              "or stop it (Ctrl-C stops at the next step and keeps a checkpoint)") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None
