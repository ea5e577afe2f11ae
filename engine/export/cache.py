"""CTranslate2 exports cached in the run directory: ``RUN/ctranslate2-<quantization>/``, exported once
and again only when what it was exported from changes (the stamp beside it holds that key)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import TbuildError
from ..files import atomic_write
from ..run.directory import Run
from ..run.weights import file_stamp, weights_files

STAMP = "tbuild-export.json"  # the cache key beside the exported model, written last


def cache_key(run: Run, files: list[Path], quantization: str) -> dict:
    """What an export depends on: weights, tokenizer, quantization, architecture, CTranslate2's version."""
    import ctranslate2

    return {"weights": [file_stamp(p) for p in files], "tokenizer": file_stamp(run.tokenizer),
            "quantization": quantization, "architecture": run.spec.architecture_hash(),
            "ctranslate2": ctranslate2.__version__}


def cached_export(run: Run, *, quantization: str = "float32", checkpoint: Path | None = None,
                  average: int | None = None, notify: Callable[[str], None] = lambda _: None) -> tuple[Path, str]:
    """``RUN/ctranslate2-<quantization>/``, exported again unless its stamp holds the key of the weights these
    options select; returns the folder and which weights it holds."""
    from .ctranslate2 import QUANTIZATIONS, export_run

    if quantization not in QUANTIZATIONS:
        raise TbuildError(f"--quantization {quantization!r}: choose one of {', '.join(QUANTIZATIONS)}")
    folder = run.dir.path / f"ctranslate2-{quantization}"
    key = cache_key(run, weights_files(run, checkpoint=checkpoint, average=average), quantization)
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        stamp = None
    if stamp is not None and stamp.get("key") == key:
        return folder, stamp["weights"]
    notify(f"{folder}: exported from other weights; exporting again" if folder.exists()
           else f"exporting to {folder} (first use; cached for later runs)")
    tmp = Path(tempfile.mkdtemp(dir=run.dir.path, prefix=f".{folder.name}."))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it 0700; results are meant to be shared
        weights = export_run(run, tmp, quantization=quantization, checkpoint=checkpoint, average=average)
        atomic_write(tmp / STAMP, (json.dumps({"key": key, "weights": weights}, indent=2) + "\n").encode())
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder, weights
