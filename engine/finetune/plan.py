"""The load plan of a run that starts from a trained model: for each parameter of the new model, whether
it is loaded, remapped (vocabulary rows by piece string), copied from another layer, new, or excluded,
and whether it is frozen; refused in one error where shapes differ."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatch

import torch
from torch import nn

from tbuild.builder.schema import InitSpec
from tbuild.components.weights import weight_tree

from ..data.download import sha256_of
from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from .parts import frozen_names
from .source import Source

STATUSES = ("loaded", "remapped", "copied", "new", "excluded")


@dataclass(frozen=True)
class Entry:
    name: str
    numel: int
    status: str  # one of STATUSES
    source_name: str | None
    frozen: bool
    block: str  # the embeddings, a layer (decoder.layers.6), a norm: the model kind's WEIGHTS.block


@dataclass(frozen=True)
class LoadPlan:
    source: Source
    entries: list[Entry]
    skipped: list[str]  # source tensors the new model has no place for
    rows: dict[int, int]  # remap: new piece id -> the source's id for the same piece

    def block_lines(self) -> list[str]:
        """One line per block (embeddings, each layer, norms): tensors by status, parameters, frozen."""
        blocks: dict[str, list[Entry]] = {}
        for e in self.entries:
            blocks.setdefault(e.block, []).append(e)
        width = max(len(b) for b in blocks)
        lines = []
        for block, entries in blocks.items():
            counts = Counter(e.status for e in entries)
            what = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
            frozen = sum(e.numel for e in entries if e.frozen)
            params = sum(e.numel for e in entries)
            lines.append(f"  {block:<{width}}  {params:>11,} params  {what}{', frozen' if frozen else ''}")
        return lines

    def summary(self) -> str:
        trainable = sum(e.numel for e in self.entries if not e.frozen)
        total = sum(e.numel for e in self.entries)
        kept = f"; vocabulary: {len(self.rows):,} pieces kept their rows" if self.rows else ""
        skipped = f"; not used from the source: {', '.join(self.skipped[:4])}" if self.skipped else ""
        return (f"trainable {trainable:,} of {total:,} parameters ({total - trainable:,} frozen){kept}{skipped}")

    def header(self) -> str:
        s = self.source
        return f"train.init: from {s.run.dir.path} ({s.weights}, step {s.step:,})"


def make_plan(model: nn.Module, source: Source, init: InitSpec, tokenizer: Tokenizer) -> LoadPlan:
    """The plan for ``model`` (built from the new spec) and ``tokenizer`` (the new run's)."""
    tree = weight_tree(model)
    rows = _vocabulary(init, source, tokenizer)
    frozen = frozen_names(init.freeze, model)
    copies = {tree.internal(new): tree.internal(old) for new, old in init.copy_.items()}
    vocab_rows = tree.vocab_rows if rows else frozenset()  # remapped by piece (one tokenizer serves both sides)
    entries, mismatched, used = [], [], set()
    for name, param in model.named_parameters():
        status, src = _status(name, init, source, copies, vocab_rows)
        if status in ("loaded", "copied", "remapped") and src is not None:
            wanted = source.tensors[src].shape
            same_but_rows = status == "remapped" and wanted[1:] == param.shape[1:]
            if wanted != param.shape and not same_but_rows:
                mismatched.append(f"{name}: source {tuple(wanted)}, model {tuple(param.shape)}")
            used.add(src)
        entries.append(Entry(name, param.numel(), status, src, name in frozen, tree.block(name)))
    if mismatched:
        raise TbuildError(f"train.init: shapes differ from {source.run.dir.path}'s: {'; '.join(mismatched[:5])}"
                          f"{' …' if len(mismatched) > 5 else ''}; list them in train.init.exclude to start "
                          "them as the spec's init")
    buffers = {n for n, _ in model.named_buffers()}
    skipped = sorted(n for n in source.tensors if n not in used and n not in buffers)
    return LoadPlan(source, entries, skipped, rows)


@torch.no_grad()
def apply_plan(plan: LoadPlan, model: nn.Module) -> None:
    """Copy the planned tensors into ``model`` and freeze the frozen ones."""
    params = dict(model.named_parameters())
    for e in plan.entries:
        param = params[e.name]
        if e.status in ("loaded", "copied") and e.source_name is not None:
            param.copy_(plan.source.tensors[e.source_name])
        elif e.status == "remapped" and e.source_name is not None:
            new_ids = torch.tensor(list(plan.rows), dtype=torch.long)
            old_ids = torch.tensor(list(plan.rows.values()), dtype=torch.long)
            param[new_ids.to(param.device)] = plan.source.tensors[e.source_name][old_ids].to(param)
        if e.frozen:
            param.requires_grad_(False)


def _status(name: str, init: InitSpec, source: Source, copies: dict[str, str],
            vocab_rows: frozenset[str]) -> tuple[str, str | None]:
    if not any(fnmatch(name, p) for p in init.include) or any(fnmatch(name, p) for p in init.exclude):
        return "excluded", None
    for new, old in copies.items():
        if name.startswith(new + "."):
            src = old + name[len(new):]
            return ("copied", src) if src in source.tensors else ("new", None)
    if name not in source.tensors:
        return "new", None
    return ("remapped" if name in vocab_rows else "loaded"), name


def _vocabulary(init: InitSpec, source: Source, tokenizer: Tokenizer) -> dict[int, int]:
    """refuse: the same tokenizer file or an error; remap and extend: new id -> source id for every shared
    piece (extend keeps the source's ids, so that is every source piece)."""
    if init.vocab == "refuse":
        ours, theirs = sha256_of(tokenizer.path), source.tokenizer_sha256
        if ours != theirs:
            raise TbuildError(f"train.init.vocab refuse: this run's tokenizer {tokenizer.path} (sha256 {ours[:12]}) "
                              f"is not the source's {source.tokenizer} ({theirs[:12]}); use vocab: remap to copy "
                              "rows by piece, or leave data.tokenizer unset to take the source's")
        return {}
    old = Tokenizer.load(source.tokenizer)
    index = {old.sp.id_to_piece(i): i for i in range(old.vocab_size)}
    return {i: index[p] for i in range(tokenizer.vocab_size) if (p := tokenizer.sp.id_to_piece(i)) in index}

