"""Options that several commands share, declared once."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

import typer

if TYPE_CHECKING:
    from tbuild.engine.decoding.engines import Engine
    from tbuild.engine.run.directory import Run
    from tbuild.engine.tasks.base import Loading as EngineLoading


def _key_values(values: list[str] | None) -> list[str] | None:
    """--set takes KEY=VALUE; a forgotten '=' (``--set model.d_model 512``) gets a usage error with the fix."""
    for value in values or []:
        if "=" not in value:
            raise typer.BadParameter(f"expected KEY=VALUE, got {value!r}: did you forget the '='? "
                                     f"(--set {value}=VALUE)")
    return values


SET_OPTION = typer.Option(
    None, "--set", "-s", callback=_key_values,
    help="Override a spec value: dotted.key=VALUE (VALUE read as YAML). Repeatable.",
)
TARGET = typer.Argument(..., help="A spec (standing for its run directory), a run directory or a checkpoint file.")
SPEC_TARGET = typer.Argument(..., help="A spec file, or a run directory or checkpoint (the spec it was trained with).")


def OUTPUT(default: str) -> typer.models.OptionInfo:  # noqa: N802 - reads like the other option constants
    """-o/--output, every command's output; ``default`` says where it goes without one."""
    return typer.Option(None, "--output", "-o", help=f"Where to write (default: {default}).")


CHECKPOINT = typer.Option(None, "--checkpoint", help="Weights to use (default: best.safetensors, else newest).")
AVERAGE = typer.Option(
    None, "--average", metavar="[K]",  # alone it reads 0 (common.Command): engine/run/weights.py's train.averaged
    help="Use the average of the newest K checkpoints (§6.1); --average alone: the spec's train.average_last, "
         "at most its keep_last.",
)
DEVICE = typer.Option("auto", "--device", help="auto (CUDA when present, else CPU), cpu or cuda.")
COMPILE = typer.Option(False, "--compile", help="Native engine: compile the decoder step with torch.compile (faster "
                       "decoding after a one-off compilation of about a minute, and again for new batch shapes: "
                       "for long inputs; docs/decoding.md).")
BEAM = typer.Option(None, "--beam", "-k", help="Beam size (default: the spec's decode.beam).")
ALPHA = typer.Option(None, "--alpha", help="Length penalty α (default: decode.alpha).")
STOPPING = typer.Option(None, "--stopping", help="When a sentence's beam search stops: exact, beam (once beam "
                        "hypotheses have finished, as fairseq and CTranslate2: faster) or patience (once --patience "
                        "× beam have; default: decode.stopping).")
PATIENCE = typer.Option(None, "--patience", help="--stopping patience: finished hypotheses that stop a sentence, "
                        "as a multiple of the beam (default: decode.patience, 2).")
ENGINE = typer.Option(
    "native", "--engine", help="native (tbuild's beam search) or ctranslate2 (the run exported once into "
    "RUN/ctranslate2-QUANTIZATION/, re-exported when the weights change; same beam, α and lengths).",
)
QUANTIZATION = typer.Option(
    None, "--quantization", help="Weights type of the linear layers (default: the spec's decode.quantization, "
    "float32): float32 or int8 (CPU only) for both engines; ctranslate2 also int8_float32 or int16.")
PRECISION = typer.Option(
    None, "--precision", help="Native engine: auto (bf16 on a CPU where the run's check measured it faster at the "
    "same BLEU, docs/decoding.md), fp32 or bf16 (default: the spec's decode.precision).")
EXPORT_QUANTIZATION = typer.Option(
    None, "--quantization", help="CTranslate2 weights type: float32 (default), int8, int8_float32 or int16.")
MIRROR = typer.Option(
    None, "--mirror", help="A local folder with the data set's files (upstream names), or with one subfolder per "
    "data set (DIR/multi30k/, DIR/wmt14/), copied and checked instead of downloading (default: $TBUILD_DATA_MIRROR).",
)


SAMPLING = typer.Option(None, "--sampling", help="Sample instead of beam search: topk, topp or temperature "
                        "(default: decode.sampling); --nbest N gives N samples.")
TOPK = typer.Option(None, "--topk", help="Sampling topk: draw from the K most probable tokens (default: decode.topk).")
TOPP = typer.Option(None, "--topp", help="Sampling topp: draw from the smallest set of most probable tokens "
                    "holding this mass (default: decode.topp).")
TEMPERATURE = typer.Option(None, "--temperature", help="Sampling temperature (default: decode.temperature).")
SEED = typer.Option(None, "--seed", help="Sampling seed: the same seed gives the same outputs (default: decode.seed).")
NBEST = typer.Option(None, "--nbest", help="Print the N best as `i ||| text ||| score` (with --sampling: N samples).")
NO_REPEAT_NGRAM = typer.Option(None, "--no-repeat-ngram", help="No n-gram of this size twice in an output.")
PROFILE = typer.Option(None, "--profile", help="Decode with the spec's decode.profiles.NAME settings (options given "
                       "here still override them).")
WEIGHTS = typer.Option(None, "--weights", help="Ensembles: one weight per model, comma-separated (default: equal).")
COMBINE = typer.Option("logprob", "--combine", help="Ensembles: average log-probabilities (logprob) or "
                       "probabilities (prob) of the models' next tokens.")


@dataclass(frozen=True)
class Search:
    """The search options of decode, evaluate and serve."""

    beam: int | None = BEAM
    alpha: float | None = ALPHA
    stopping: str | None = STOPPING
    patience: float | None = PATIENCE


@dataclass(frozen=True)
class Ensembling:
    """decode and evaluate: a decode profile, and how several runs' models are combined."""

    profile: str | None = PROFILE
    weights: str | None = WEIGHTS
    combine: str = COMBINE


@dataclass(frozen=True)
class Loading:
    """decode, evaluate and serve: which weights, on which device, through which engine."""

    checkpoint: Path | None = CHECKPOINT
    average: int | None = AVERAGE
    device: str = DEVICE
    compile_: bool = COMPILE
    engine: str = ENGINE
    quantization: str | None = QUANTIZATION
    precision: str | None = PRECISION


def engine_loading(loading: Loading, ensembling: Ensembling | None = None) -> EngineLoading:
    """``loading`` (and ``ensembling``'s weights and rule) as the engine's tasks take it."""
    from tbuild.engine.tasks.base import Loading as EngineLoading

    weights, combine = (None, "logprob") if ensembling is None else (parse_weights(ensembling.weights),
                                                                     ensembling.combine)
    return EngineLoading(loading.checkpoint, loading.average, loading.device, loading.compile_, loading.engine,
                         loading.quantization, weights, combine)


F = TypeVar("F", bound=Callable[..., Any])


def grouped(fn: F) -> F:
    """Let a command take option groups (``Search``, ``Ensembling``, ``Loading``: dataclasses whose
    defaults are typer options): each group parameter is replaced, in place, by the group's options,
    and the command receives one value of the group."""
    hints = get_type_hints(fn)
    groups = {name: kind for name, kind in hints.items() if is_dataclass(kind)}
    params: list[inspect.Parameter] = []
    for p in inspect.signature(fn).parameters.values():
        if p.name not in groups:
            params.append(p.replace(annotation=hints[p.name], kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        kind_hints = get_type_hints(groups[p.name])
        params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                     annotation=kind_hints[f.name]) for f in fields(groups[p.name])]

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        for name, kind in groups.items():
            kwargs[name] = kind(**{f.name: kwargs.pop(f.name) for f in fields(kind)})
        return fn(**kwargs)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": hints.get("return")}
    return command  # type: ignore[return-value]


def decode_runs(targets: list[Path], sets: list[str] | None, profile: str | None = None,
                **flags: object) -> list[Run]:
    """The runs ``targets`` name, their decode section as the command line asks: decode profile
    ``profile`` (read from the first run's spec), then ``--set``, then the decoding options given
    (``flags``: decode fields by name, None when not given; a bad one is refused as ``--set
    decode.KEY=VALUE`` would be, as they are documented to mean)."""
    from tbuild.engine.decoding.settings import profile_overrides
    from tbuild.engine.run.directory import resolve_run

    given = [f"decode.{key}={value}" for key, value in flags.items() if value is not None]
    if profile is None:
        return [resolve_run(t, [*(sets or []), *given]) for t in targets]
    first = resolve_run(targets[0], sets)
    overrides = profile_overrides(first.spec.decode, profile) + [*(sets or []), *given]
    return [resolve_run(t, overrides) for t in targets]


def load_decoder(runs: list[Run], loading: EngineLoading, notify: Callable[[str], None] = lambda _: None) -> Engine:
    """The engine ``loading`` names for ``runs`` (several: their ensemble, combined as ``loading`` says)."""
    from tbuild.engine.export.engines import load_engines

    return load_engines(runs, loading.engine, quantization=loading.quantization, checkpoint=loading.checkpoint,
                        average=loading.average, device=loading.device, notify=notify,
                        weights=loading.member_weights, combine=loading.combine, compiled=loading.compiled)


def parse_weights(text: str | None) -> list[float] | None:
    """--weights 0.6,0.4 -> [0.6, 0.4]."""
    from tbuild.engine.errors import TbuildError

    if text is None:
        return None
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        raise TbuildError(f"--weights {text!r}: expected comma-separated numbers such as 0.6,0.4") from None
