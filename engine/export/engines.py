"""A run's decoding engine, by name: the native translator (``decoding/engines.py``) or the run's
CTranslate2 export (cached, ``cache.py``) behind ``decoding/ct2.py``. Here, above both, because the
second needs an export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..decoding.ct2 import ct2_device, open_ct2_translator
from ..decoding.engines import ENGINES, Engine
from ..decoding.native import load_native
from ..decoding.request import check_ensemble
from ..errors import TbuildError
from ..run.directory import Run
from .cache import cached_export


def load_engine(run: Run, engine: str = "native", *, quantization: str | None = None,
                checkpoint: Path | None = None, average: int | None = None, device: str = "auto",
                notify: Callable[[str], None] = lambda _: None, compiled: bool = False) -> Engine:
    """The run's weights (``load_weights``'s choice) behind ``engine``; ``quantization`` (default: the spec's
    ``decode.quantization``): the linear layers' weights type in both; ``compiled``: native's torch.compile step."""
    if engine not in ENGINES:
        raise TbuildError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if engine == "native":
        return load_native([run], quantization=quantization, checkpoint=checkpoint, average=average,
                           device=device, notify=notify, compiled=compiled)
    quantization = quantization or run.spec.decode.quantization
    device = ct2_device(device)
    folder, weights = cached_export(run, quantization=quantization, checkpoint=checkpoint, average=average,
                                    notify=notify)
    return open_ct2_translator(run, folder, weights, quantization=quantization, device=device)


def load_engines(runs: list[Run], engine: str = "native", *, quantization: str | None = None,
                 checkpoint: Path | None = None, average: int | None = None, device: str = "auto",
                 notify: Callable[[str], None] = lambda _: None, weights: list[float] | None = None,
                 combine: str = "logprob", compiled: bool = False) -> Engine:
    """``load_engine`` of one run; several runs: their ensemble (``load_native``), for an engine that
    decodes ensembles (``decoding/request.py``'s table)."""
    if len(runs) == 1:
        if weights is not None:
            raise TbuildError("--weights needs several runs (an ensemble)")
        return load_engine(runs[0], engine, quantization=quantization, checkpoint=checkpoint, average=average,
                           device=device, notify=notify, compiled=compiled)
    if engine in ENGINES:
        check_ensemble(engine)
    return load_native(runs, quantization=quantization, checkpoint=checkpoint, average=average, device=device,
                       notify=notify, weights=weights, combine=combine, compiled=compiled)
