"""Memory-mapped encoded pairs: the prepared form of a training split (a ``BatchSource``).

A folder holds, per side (``src``, ``tgt``), ``{side}.tokens`` (the rows' ids, each row ending with
EOS; uint16 while the vocabulary is under 65,536, else uint32), ``{side}.offsets`` (int64, N + 1) and
``{side}.lengths`` (uint32, N), raw little-endian, and ``header.json`` (format, counts, dtype and
what the data was made from; sampled data's ``variants``: the training split encoded K times, stacked, each
variant's pair count). ``MappedWriter`` writes into a temporary folder and renames it into
place after an fsync, so a folder with a header is always complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import DataError
from ..files import process_alive

FORMAT = 1
SIDES = ("src", "tgt")
HEADER = "header.json"


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 while every id fits, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class MappedWriter:
    """Appends encoded pairs to a new prepared folder; ``commit`` puts it in place atomically."""

    def __init__(self, final: Path, dtype: np.dtype) -> None:
        self.final, self.dtype = final, dtype
        self.tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
        _remove_leftovers(final)
        self.tmp.mkdir(parents=True)
        self.files: dict[str, BinaryIO] = {}
        self.offsets = {side: 0 for side in SIDES}
        self.pairs = 0
        for side in SIDES:
            for part in ("tokens", "offsets", "lengths"):
                self.files[f"{side}.{part}"] = (self.tmp / f"{side}.{part}").open("wb")
            self.files[f"{side}.offsets"].write(np.zeros(1, dtype="<i8").tobytes())

    def append(self, side: str, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Rows of one side: their ids concatenated (EOS included) and each row's length."""
        self.files[f"{side}.tokens"].write(tokens.astype(self.dtype.newbyteorder("<"), copy=False).tobytes())
        ends = self.offsets[side] + np.cumsum(lengths, dtype=np.int64)
        self.files[f"{side}.offsets"].write(ends.astype("<i8").tobytes())
        self.files[f"{side}.lengths"].write(lengths.astype("<u4").tobytes())
        self.offsets[side] = int(ends[-1]) if len(ends) else self.offsets[side]
        if side == "tgt":
            self.pairs += len(lengths)

    def commit(self, header: dict[str, Any]) -> None:
        """Flush and fsync the arrays, write the header, rename the folder into place (replacing an
        older one)."""
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
            f.close()
        header = {**header, "format": FORMAT, "pairs": self.pairs, "dtype": self.dtype.name,
                  "tokens": dict(self.offsets)}
        with (self.tmp / HEADER).open("w", encoding="utf-8") as f:
            json.dump(header, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        old = self.final.parent / f".{self.final.name}.old-{os.getpid()}"
        if self.final.exists():
            os.replace(self.final, old)
        os.replace(self.tmp, self.final)
        shutil.rmtree(old, ignore_errors=True)
        dir_fd = os.open(self.final.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def abort(self) -> None:
        """Close and remove everything written so far."""
        for f in self.files.values():
            f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _remove_leftovers(final: Path) -> None:
    """Temporary folders of preparations that were killed (their process is gone)."""
    if not final.parent.is_dir():
        return
    for path in final.parent.glob(f".{final.name}.*-*"):
        pid = path.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def read_header(folder: Path) -> dict[str, Any] | None:
    """The header of a prepared folder, or None if there is none (missing or never completed)."""
    try:
        return json.loads((folder / HEADER).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{folder / HEADER}: not a readable prepared-data header ({e})") from None


class MappedPairs:
    """Prepared pairs read through memory maps: only the rows a batch needs are read from disk."""

    def __init__(self, folder: Path) -> None:
        header = read_header(folder)
        if header is None or header.get("format") != FORMAT:
            raise DataError(f"{folder}: no prepared data of format {FORMAT}; run `tbuild data prepare`")
        self.folder, self.header = folder, header
        n, dtype = header["pairs"], np.dtype(header["dtype"]).newbyteorder("<")
        self.tokens, self.offsets, self.lengths = {}, {}, {}
        for side in SIDES:
            self.tokens[side] = self._map(f"{side}.tokens", dtype, header["tokens"][side])
            self.offsets[side] = self._map(f"{side}.offsets", np.dtype("<i8"), n + 1)
            self.lengths[side] = self._map(f"{side}.lengths", np.dtype("<u4"), n)

    def _map(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        path = self.folder / name
        expected = count * dtype.itemsize
        if not path.is_file() or path.stat().st_size != expected:
            size = path.stat().st_size if path.is_file() else "missing"
            raise DataError(f"{path}: prepared data is damaged ({size} bytes, expected {expected}); "
                            "delete the folder and run `tbuild data prepare` again")
        if count == 0:
            return np.zeros(0, dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r", shape=(count,))

    def __len__(self) -> int:
        return int(self.header["pairs"])

    @property
    def variants(self) -> tuple[int, ...]:
        """Sampled data (``data.tokenizer.sampling``): each variant's pairs, stacked in that order; () otherwise."""
        return tuple(self.header.get("variants", ()))

    @property
    def src_lengths(self) -> np.ndarray:
        return self.lengths["src"]

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self.lengths["tgt"]

    def padded(self, indices: np.ndarray, side: str, pad: int) -> np.ndarray:
        """Gather the rows from the memory map into a right-padded (B, longest) int64 array."""
        lengths = self.lengths[side][indices].astype(np.int64)
        width = int(lengths.max(initial=0))
        columns = np.arange(width)[None, :]
        inside = columns < lengths[:, None]  # (B, W)
        positions = self.offsets[side][indices][:, None] + np.where(inside, columns, 0)
        return np.where(inside, self.tokens[side][positions].astype(np.int64), pad)  # int64 first: pad may be < 0
