"""Options that several commands share, declared once."""

from __future__ import annotations

import typer

SET_OPTION = typer.Option(
    None, "--set", "-s", help="Override a spec value: dotted.key=VALUE (VALUE read as YAML). Repeatable."
)
TARGET = typer.Argument(..., help="A spec (its run directory), a run directory or a checkpoint file.")
CHECKPOINT = typer.Option(None, "--checkpoint", help="Weights to use (default: best.safetensors, else newest).")
AVERAGE = typer.Option(None, "--average", help="Average the newest K checkpoints (§6.1) and use that.")
DEVICE = typer.Option("auto", "--device", help="auto (CUDA when present, else CPU), cpu or cuda.")
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


def decode_overrides(beam: int | None, alpha: float | None, nbest: int | None, sets: list[str] | None) -> list[str]:
    """--set overrides for the decoding options given on the command line."""
    overrides = list(sets or [])
    for key, value in (("beam", beam), ("alpha", alpha), ("nbest", nbest)):
        if value is not None:
            overrides.append(f"decode.{key}={value}")
    return overrides
