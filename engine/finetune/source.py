"""The trained model a run starts from: its weights (best, newest, a named checkpoint or an average),
step, tokenizer and run directory; its model kind, weight tree and tied names (read from its spec)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from tbuild.builder import build_model
from tbuild.builder.spec import InitSpec, ModelSpec
from tbuild.components.weights import WeightTree, weight_tree

from ..data.download import sha256_of
from ..run.checkpoint import average_checkpoints, read_checkpoint
from ..run.directory import Run, resolve_run
from ..run.weights import weights_files


@dataclass(frozen=True)
class Source:
    run: Run
    weights: str  # which weights, in words (a file name, or the average of several)
    step: int
    tensors: dict[str, torch.Tensor]  # parameter name -> tensor (optimizer slots under "optim.")
    optimizer_state: dict[str, dict[str, torch.Tensor]]  # parameter name -> Adam's slots, where saved
    tree: WeightTree | None = None  # the source model kind's parts (None: not known)
    aliases: dict[str, str] = field(default_factory=dict)  # a tied parameter's other names -> its saved name
    output_class: str | None = None  # the class of its output module (a head's: MaskedLM, TokenClassification)

    @property
    def model(self) -> ModelSpec:
        """The source's model section."""
        return self.run.spec.model

    @property
    def tokenizer(self) -> Path:
        return self.run.tokenizer

    @property
    def tokenizer_sha256(self) -> str:
        return sha256_of(self.tokenizer)

    def lineage(self) -> dict[str, object]:
        """What the new run records of where it came from."""
        return {"from": str(self.run.dir.path.resolve()), "weights": self.weights, "step": self.step,
                "tokenizer_sha256": self.tokenizer_sha256, "name": self.run.spec.name}


def load_source(init: InitSpec) -> Source:
    run = resolve_run(Path(init.source))
    paths = weights_files(run, checkpoint=run.checkpoint, average=init.average)
    if init.average is not None:
        tensors, meta = average_checkpoints(paths)
        weights = f"average of {', '.join(p.name for p in paths)}"
    else:
        tensors, meta = read_checkpoint(paths[0])
        weights = paths[0].name
    model = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    with torch.device("meta"):  # names only: nothing allocated
        built = build_model(run.spec)
    tree = weight_tree(built)
    output = type(getattr(built, tree.output)).__name__ if tree.output is not None else None
    return Source(run, weights, int(meta.get("step", 0)), model, _optimizer_slots(tensors, meta),
                  tree, {n: saved for saved, names in tied_names(built).items() for n in names[1:]}, output)


def tied_names(model: torch.nn.Module) -> dict[str, tuple[str, ...]]:
    """A tied parameter's name as ``named_parameters`` gives it (the one a checkpoint saves) -> all of its
    names, that one first: an encoder-decoder with three-way tying (§3.4) saves ``src_embed.tokens.weight``
    alone, which a decoder-only model names ``tgt_embed.tokens.weight``."""
    by_id: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(param), []).append(name)
    return {names[0]: tuple(names) for names in by_id.values() if len(names) > 1}


def _optimizer_slots(tensors: dict[str, torch.Tensor], meta: dict) -> dict[str, dict[str, torch.Tensor]]:
    """Adam's slots per parameter name, from a training checkpoint that saved them (its one param group
    lists the parameters in the order of ``named_parameters``, which meta records)."""
    names = meta.get("param_names")
    if not names:
        return {}
    slots: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, slot = key.split(".", 2)
            if int(index) < len(names):
                slots.setdefault(names[int(index)], {})[slot] = value
    return slots
