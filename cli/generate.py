"""`tbuild generate`: continue prompts with a trained language model (model.kind decoder_only)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .common import err_console, guarded, notify
from .options import (
    AVERAGE,
    BEAM,
    CHECKPOINT,
    DEVICE,
    NBEST,
    NO_REPEAT_NGRAM,
    PROFILE,
    SAMPLING,
    SEED,
    SET_OPTION,
    TARGET,
    TEMPERATURE,
    TOPK,
    TOPP,
    decode_runs,
)


@guarded
def generate(
    target: Path = TARGET,
    input_: Path | None = typer.Option(None, "--input", "-i", help="Read the prompts from this file instead of "
                                       "stdin, one a line (an empty line: generate from nothing)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write here instead of stdout."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", min=1, help="Most tokens generated after "
                                              "each prompt (default: decode.max_len_b)."),
    beam: int | None = BEAM,
    alpha: float | None = typer.Option(None, "--alpha", help="Length penalty α of beam search (default: "
                                       "decode.alpha)."),
    nbest: int | None = NBEST,
    sampling: str | None = SAMPLING,
    topk: int | None = TOPK,
    topp: float | None = TOPP,
    temperature: float | None = TEMPERATURE,
    seed: int | None = SEED,
    no_repeat_ngram: int | None = NO_REPEAT_NGRAM,
    format_: str = typer.Option("text", "--format", help="text (each prompt and its continuation) or jsonl "
                                "(one object per line: prompt, output, scores, token log-probabilities, n-best)."),
    profile: str | None = PROFILE,
    checkpoint: Path | None = CHECKPOINT,
    average: int | None = AVERAGE,
    device: str = DEVICE,
    quantization: str | None = typer.Option(None, "--quantization", help="Weights of the linear layers: "
                                            "float32 or int8 (CPU only) (default: decode.quantization)."),
    set_: list[str] = SET_OPTION,
) -> None:
    """Continue each prompt (one a line) with a language model: beam search (--beam 1: greedy) or
    sampling (--sampling topk/topp/temperature, --seed: the same seed gives the same text). Each output
    line is the prompt followed by its continuation."""
    from tbuild.engine.decoding.lm import generate as run_generation
    from tbuild.engine.decoding.lm import load_language_model
    from tbuild.engine.decoding.native import decode_lines
    from tbuild.engine.decoding.records import jsonl_line, text_lines
    from tbuild.engine.decoding.request import DecodeRequest, Hooks
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.files import atomic_write
    from tbuild.engine.tasks.registry import task_of

    DecodeRequest(format=format_)  # a bad --format is refused before the run is read
    [run] = decode_runs([target], set_, profile, beam=beam, alpha=alpha, nbest=nbest, sampling=sampling, topk=topk,
                        topp=topp, temperature=temperature, seed=seed, no_repeat_ngram=no_repeat_ngram)
    task_of(run.spec).check("generate", run.spec)
    name = str(input_) if input_ else "stdin"
    if input_ is not None and not input_.is_file():
        raise TbuildError(f"{input_}: input file not found")
    prompts = decode_lines(input_.read_bytes() if input_ else sys.stdin.buffer.read(), name)
    request = DecodeRequest.of(run.spec.decode, format=format_)
    process = configure_process()

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {name}: {message}", highlight=False, soft_wrap=True)

    lm = load_language_model(run, checkpoint=checkpoint, average=average, device=device,
                             quantization=quantization or run.spec.decode.quantization, notify=notify)
    results = run_generation(lm, prompts, request, max_new_tokens or run.spec.decode.max_len_b,
                             Hooks(warn=warn, after_batch=process.after_batch))
    tok = lm.translator.tokenizer
    lines = ([jsonl_line(tok, p, hyps) for p, hyps in zip(prompts, results, strict=True)]
             if request.format == "jsonl" else text_lines(tok, results, request.nbest))
    text = "".join(line + "\n" for line in lines)
    if output is not None:
        atomic_write(output, text.encode())
    else:
        sys.stdout.write(text)
