"""`tbuild import`: bring a pretrained model in as an ordinary run directory."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import Command, Group, console, guarded

import_app = typer.Typer(cls=Group, help="Import a pretrained model as a tbuild run directory.", no_args_is_help=True)


@import_app.callback()
def _group() -> None:
    """Import a pretrained model as a tbuild run directory."""  # keeps commands subcommands


@import_app.command(cls=Command)
@guarded
def hf(
    source: str = typer.Argument(..., help="A Hugging Face model folder, or a hub id (downloaded when online)."),
    output: Path = typer.Option(..., "--output", "-o", help="The run directory to write (new, or empty)."),
) -> None:
    """A Hugging Face model (MarianMTModel, PegasusForConditionalGeneration, M2M100ForConditionalGeneration,
    GPT2LMHeadModel, LlamaForCausalLM, BERT, RoBERTa or XLM-RoBERTa with a token- or sequence-classification or
    masked-LM head) as a run directory: its spec (spec.yaml), its weights in tbuild's names (best.safetensors) and
    its tokenizer. Anything tbuild cannot compute is refused, naming the config field; nothing is written then."""
    from tbuild.engine.hf.importer import import_hf

    spec = import_hf(source, output, lambda line: console.print(f"note: {line}", highlight=False, soft_wrap=True))
    m = spec.model
    stacks = ", ".join(f"{name} {s.layers}×{s.heads} heads" for name, s in m.stacks().items())
    console.print(f"imported {source} into {output}: {m.kind}, d_model {m.d_model}, {stacks}, "
                  f"vocabulary {m.vocab_size}", highlight=False)
