"""Options that several commands share, declared once."""

from __future__ import annotations

import typer


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
    None, "--average", metavar="[K]",  # alone it reads 0 (common.Command): engine/weights.py's average_last
    help="Use the average of the newest K checkpoints (§6.1); --average alone: the spec's train.average_last.",
)
DEVICE = typer.Option("auto", "--device", help="auto (CUDA when present, else CPU), cpu or cuda.")
COMPILE = typer.Option(False, "--compile", help="Native engine: compile the decoder step with torch.compile (faster "
                       "decoding after a one-off compilation of about a minute, and again for new batch shapes: "
                       "for long inputs; docs/decoding.md).")
BEAM = typer.Option(None, "--beam", "-k", help="Beam size (default: the spec's decode.beam).")
ALPHA = typer.Option(None, "--alpha", help="Length penalty α (default: decode.alpha).")
ENGINE = typer.Option(
    "native", "--engine", help="native (tbuild's beam search) or ctranslate2 (the run exported once into "
    "RUN/ctranslate2-QUANTIZATION/, re-exported when the weights change; same beam, α and lengths).",
)
QUANTIZATION = typer.Option(
    None, "--quantization", help="Weights type of the linear layers (default: the spec's decode.quantization, "
    "float32): float32 or int8 (CPU only) for both engines; ctranslate2 also int8_float32 or int16.")
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
NO_REPEAT_NGRAM = typer.Option(None, "--no-repeat-ngram", help="No n-gram of this size twice in an output.")
PROFILE = typer.Option(None, "--profile", help="Decode with the spec's decode.profiles.NAME settings (options given "
                       "here still override them).")
WEIGHTS = typer.Option(None, "--weights", help="Ensembles: one weight per model, comma-separated (default: equal).")
COMBINE = typer.Option("logprob", "--combine", help="Ensembles: average log-probabilities (logprob) or "
                       "probabilities (prob) of the models' next tokens.")


def decode_overrides(beam: int | None, alpha: float | None, nbest: int | None, sets: list[str] | None,
                     **more: object) -> list[str]:
    """--set overrides for the decoding options given on the command line (``more``: other decode
    fields by name, None when not given)."""
    overrides = list(sets or [])
    for key, value in (("beam", beam), ("alpha", alpha), ("nbest", nbest), *more.items()):
        if value is not None:
            overrides.append(f"decode.{key}={value}")
    return overrides


def parse_weights(text: str | None) -> list[float] | None:
    """--weights 0.6,0.4 -> [0.6, 0.4]."""
    from tbuild.engine.errors import TbuildError

    if text is None:
        return None
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        raise TbuildError(f"--weights {text!r}: expected comma-separated numbers such as 0.6,0.4") from None
