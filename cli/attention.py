"""`tbuild attention`: PNG heatmaps of a translation's attention weights."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, guarded, notify
from .options import AVERAGE, CHECKPOINT, DEVICE, OUTPUT, SET_OPTION, TARGET


def _indices(text: str | None) -> list[int] | None:
    if text is None or text == "all":
        return None
    from tbuild.engine.errors import TbuildError

    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise TbuildError(f"expected comma-separated integers or 'all', got {text!r}") from None


@guarded
def attention(
    target: Path = TARGET,
    text: str = typer.Option(..., "--text", "-t", help="The source sentence to translate and show."),
    layers: str | None = typer.Option(None, "--layers", help="Comma-separated layer indices (default: all)."),
    heads: str | None = typer.Option(None, "--heads", help="Comma-separated head indices (default: all)."),
    output: Path | None = OUTPUT("the folder RUN/attention"),
    checkpoint: Path | None = CHECKPOINT,
    average: int | None = AVERAGE,
    device: str = DEVICE,
    set_: list[str] = SET_OPTION,
) -> None:
    """Write encoder self-, decoder self- and cross-attention heatmaps (one grid per kind)."""
    from tbuild.engine.decoding.attention_maps import attention_weights, plot_attention
    from tbuild.engine.decoding.native import load_native_engine
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.tasks.registry import task_of

    run = resolve_run(target, set_)
    task_of(run.spec).check("attention", run.spec)
    configure_process()
    translator = load_native_engine(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
    d = run.spec.decode
    src_pieces, tgt_pieces, weights = attention_weights(translator, text, d.beam, d.alpha, d.max_len_b)
    console.print(f"translation: {translator.tokenizer.sp.decode_pieces(tgt_pieces[1:])}", highlight=False)
    for path in plot_attention(src_pieces, tgt_pieces, weights, output or run.dir.path / "attention",
                               _indices(layers), _indices(heads)):
        console.print(f"wrote {path}")
