"""Fetching one pinned file: streamed through ``NAME.part`` beside its final path (a broken download
is resumed with an HTTP Range request from the part's size), checked against its pinned size and
digests, fsynced, then renamed into place. A mirror folder holding the same file names replaces the
network (offline). A file that fails its checks is refused and nothing of it is left behind."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import DataError

MIRROR_ENV = "TBUILD_DATA_MIRROR"
CHUNK = 1 << 20
ATTEMPTS = 3  # connections per download: the first, then resumed ones after a dropped connection

Advance = Callable[[int], None]


@dataclass(frozen=True)
class Pinned:
    """A file to fetch: where it is and what it must be (size in bytes, sha256 and/or md5)."""

    url: str
    sha256: str | None = None
    size: int | None = None
    md5: str | None = None

    @property
    def name(self) -> str:
        """The file's upstream name (the last part of its URL): its name in a mirror folder."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]


def sha256_of(path: Path) -> str:
    return _digest(path, "sha256")


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_mirror(mirror: Path | None, dataset: str) -> Path | None:
    """The folder to copy ``dataset``'s files from instead of downloading them: ``mirror`` if given,
    else ``$TBUILD_DATA_MIRROR`` if set, else None (download). The folder holds the files itself or
    one subfolder per data set (``DIR/multi30k/``, ``DIR/wmt14/``), which is then the one used."""
    origin = ""
    if mirror is None and os.environ.get(MIRROR_ENV):
        mirror, origin = Path(os.environ[MIRROR_ENV]), f" (from ${MIRROR_ENV})"
    if mirror is None:
        return None
    if not mirror.is_dir():
        raise DataError(f"{dataset} mirror is not a folder: {mirror}{origin}")
    return mirror / dataset if (mirror / dataset).is_dir() else mirror


def offline_hint(what: str = "the files") -> str:
    return f"offline? set {MIRROR_ENV} to a folder with {what} (tbuild data fetch also takes --mirror DIR)"


@contextlib.contextmanager
def new_folder(folder: Path) -> Iterator[Path]:
    """Create ``folder`` (and its missing parents) for what the block writes; if the block fails, the
    folders it created are removed again where they are left empty, so that a failed fetch leaves no
    empty folder behind for the next call to take as filled."""
    created = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create {folder}: {e.strerror or e}") from None
    try:
        yield folder
    except BaseException:
        for path in created:  # deepest first
            with contextlib.suppress(OSError):
                path.rmdir()  # only if empty: a resumable .part file keeps its folder
        raise


def fetch(pinned: Pinned, final: Path, *, mirror: Path | None = None, progress: bool | None = None,
          hint: str | None = None, timeout: float = 60.0) -> None:
    """Put ``pinned`` at ``final``: copied from ``mirror`` (where it has ``final.name`` or the
    upstream name) if given, else downloaded. ``progress``: show a rich progress bar on stderr
    (None: when stderr is a terminal)."""
    with new_folder(final.parent):
        _fetch(pinned, final, mirror, progress, hint, timeout)


def _fetch(pinned: Pinned, final: Path, mirror: Path | None, progress: bool | None, hint: str | None,
           timeout: float) -> None:
    if mirror is None:
        download(pinned, final, progress=progress, hint=hint, timeout=timeout)
        return
    for name in dict.fromkeys((final.name, pinned.name)):
        if (mirror / name).is_file():
            copy_checked(mirror / name, final, pinned, progress=progress)
            return
    nor = f" (nor {pinned.name})" if pinned.name != final.name else ""
    raise DataError(f"mirror {mirror} has no {final.name}{nor}")


def copy_checked(source: Path, final: Path, pinned: Pinned, *, progress: bool | None = None) -> None:
    """Copy a local file (a mirror's) to ``final`` through its ``.part`` file, with the same checks
    as a download."""
    part = _part(final)
    try:
        with source.open("rb") as f, part.open("wb") as out, _bar(final.name, source.stat().st_size,
                                                                   progress) as advance:
            _stream(f, out, advance, None)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise DataError(f"{final.name}: cannot copy from mirror {source}: {e.strerror or e}") from None
    _install(part, final, pinned, str(source))


def download(pinned: Pinned, final: Path, *, progress: bool | None = None, hint: str | None = None,
             timeout: float = 60.0, attempts: int = ATTEMPTS) -> None:
    """Download ``pinned.url`` to ``final``, resuming a ``.part`` file left by an earlier try (or by
    a connection dropped during this one, up to ``attempts`` connections)."""
    with new_folder(final.parent):
        _download(pinned, final, progress, hint or offline_hint(what=pinned.name), timeout, attempts)


def _download(pinned: Pinned, final: Path, progress: bool | None, hint: str, timeout: float, attempts: int) -> None:
    part = _part(final)
    if pinned.size is not None and part.is_file() and part.stat().st_size > pinned.size:
        part.unlink()
    for _ in range(attempts):
        have = part.stat().st_size if part.is_file() else 0
        if have and have == pinned.size:
            break
        if not _connect(pinned, part, have, progress, hint, timeout):
            break
    else:
        raise DataError(f"cannot download {pinned.url}: the connection dropped {attempts} times "
                        f"({part.stat().st_size} bytes kept in {part}); run again to resume, or {hint}")
    _install(part, final, pinned, pinned.url)


def _connect(pinned: Pinned, part: Path, have: int, progress: bool | None, hint: str, timeout: float) -> bool:
    """One connection: append to ``part`` from byte ``have`` (a 200 answer to a Range request
    restarts it). True if it dropped half-way (some bytes came, fewer than announced)."""
    request = urllib.request.Request(pinned.url, headers={"Range": f"bytes={have}-"} if have else {})
    got, length = 0, None
    try:
        resolve(pinned.url, timeout)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            start = _range_start(response.headers.get("Content-Range")) if response.status == 206 else 0
            if start not in (0, have):
                raise DataError(f"cannot download {pinned.url}: asked for bytes from {have}, got from {start}")
            header = response.headers.get("Content-Length")
            length = int(header) if header and header.isdigit() else None
            total = pinned.size or (start + length if length is not None else None)
            with part.open("ab" if start else "wb") as out, _bar(part.name[:-5], total, progress) as advance:
                advance(start)

                def counted(n: int) -> None:
                    nonlocal got
                    got += n
                    advance(n)

                # never more than the pinned size: a longer answer is refused by the checks
                _stream(response, out, counted, None if pinned.size is None else max(pinned.size - start, 0))
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing left past the part's end: the checks decide
            return False
        raise DataError(f"cannot download {pinned.url}: HTTP {e.code} {e.reason}; {hint}") from None
    except (OSError, http.client.HTTPException) as e:
        if not got:  # refused, unreachable, or dropped before any byte: resuming would not help
            if not have:
                part.unlink(missing_ok=True)
            reason = getattr(e, "reason", None) or e
            raise DataError(f"cannot download {pinned.url}: {reason}; {hint}") from None
        return True
    short = length is not None and got < length and (pinned.size is None or start + got < pinned.size)
    if short and not got:
        raise DataError(f"cannot download {pinned.url}: the connection closed before any byte; {hint}")
    return short


def resolve(url: str, timeout: float) -> None:
    """Look up ``url``'s host within ``timeout`` seconds (an OSError otherwise). urlopen's timeout does
    not bound the name lookup, which an offline machine can keep waiting on; the lookup runs in a
    daemon thread so that a hung one is left behind, not waited for."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    failure: list[OSError] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        except OSError as e:
            failure.append(e)

    thread = threading.Thread(target=lookup, name=f"resolve {parts.hostname}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise OSError(f"no answer looking up {parts.hostname} within {timeout:g} s")
    if failure:
        raise failure[0]


def _range_start(content_range: str | None) -> int:
    match = re.match(r"bytes (\d+)-", content_range or "")
    return int(match.group(1)) if match else -1


def _stream(source: BinaryIO, out: BinaryIO, advance: Advance, limit: int | None) -> int:
    """Copy ``source`` into ``out`` (at most ``limit`` bytes), flushed and fsynced; bytes copied."""
    copied = 0
    try:
        while limit is None or copied < limit:
            chunk = source.read(CHUNK if limit is None else min(CHUNK, limit - copied))
            if not chunk:
                break
            out.write(chunk)
            copied += len(chunk)
            advance(len(chunk))
    finally:
        out.flush()
        os.fsync(out.fileno())
    return copied


def _install(part: Path, final: Path, pinned: Pinned, origin: str) -> None:
    """Check ``part`` against the pins, then rename it to ``final``; removed if it fails."""
    size = part.stat().st_size
    problems = []
    for algorithm in ("sha256", "md5"):
        expected = getattr(pinned, algorithm)
        if expected is not None and (actual := _digest(part, algorithm)) != expected:
            problems.append(f"{algorithm} mismatch (from {origin}): expected {expected}, got {actual}")
    if pinned.size is not None and size != pinned.size:
        what = "size: " if problems else f"size mismatch (from {origin}): "
        problems.append(f"{what}expected {pinned.size} bytes, got {size}")
    if problems:
        part.unlink(missing_ok=True)
        raise DataError(f"{final.name}: {'; '.join(problems)}")
    os.replace(part, final)


def _part(final: Path) -> Path:
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create {final.parent}: {e.strerror or e}") from None
    return final.with_name(final.name + ".part")


@contextlib.contextmanager
def _bar(name: str, total: int | None, progress: bool | None) -> Iterator[Advance]:
    """A rich progress bar on stderr (bytes, speed, ETA) when ``progress`` (None: stderr is a
    terminal); otherwise nothing is shown."""
    if not (sys.stderr.isatty() if progress is None else progress):
        yield lambda _: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(name, total=total)
        yield lambda n: bar.advance(task, n)
