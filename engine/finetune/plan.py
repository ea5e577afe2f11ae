"""The load plan of a run that starts from a trained model: for each parameter of the new model, whether
it is loaded, remapped (vocabulary rows by piece string), copied from another layer, new, or excluded,
and whether it is frozen; the source's tensors it has no place for, by block; refused in one error where
shapes differ or nothing loads. A source of another model kind loads by name where the two kinds share a
stack (an encoder-decoder's encoder into an encoder-only model, its decoder's self-attention and
feed-forward blocks into a decoder-only one); kinds that share none are refused before anything is read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatch

import torch
from torch import nn

from tbuild.builder.spec import InitSpec, ModelSpec
from tbuild.components.specs.graph import GRAPHS
from tbuild.components.weights import weight_tree

from ..data.download import sha256_of
from ..data.tokenizer import Tokenizer, run_tokenizer
from ..errors import TbuildError
from .parts import frozen_names
from .source import Source, tied_names

STATUSES = ("loaded", "remapped", "copied", "new", "excluded")
LOADS = frozenset({"loaded", "remapped", "copied"})  # the statuses that take a tensor from the source


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
    stacks: tuple[str, ...] = ()  # the new model's stacks (its kind's WEIGHTS)
    new_output: str | None = None  # why the output starts new: the source's is of another kind (a line)

    def block_lines(self) -> list[str]:
        """One line per block (embeddings, each layer, norms): tensors by status, parameters, frozen."""
        blocks: dict[str, list[Entry]] = {}
        for e in self.entries:
            blocks.setdefault(e.block, []).append(e)
        width = self._width()
        lines = []
        for block, entries in blocks.items():
            counts = Counter(e.status for e in entries)
            what = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
            frozen = sum(e.numel for e in entries if e.frozen)
            params = sum(e.numel for e in entries)
            lines.append(f"  {block:<{width}}  {params:>11,} params  {what}{', frozen' if frozen else ''}")
        return lines

    def skipped_lines(self) -> list[str]:
        """The source's tensors that load nowhere, one line per block of the source (its kind's blocks):
        all of the block's, or which of its parts (a decoder layer's ``cross_attn``)."""
        if not self.skipped:
            return []
        tree, tensors = self.source.tree, self.source.tensors
        sizes = Counter(self._source_block(n) for n in tensors)
        groups: dict[str, list[str]] = {}
        for name in self.skipped:
            groups.setdefault(self._source_block(name), []).append(name)
        width = self._width() - 2
        lines = [f"  not loaded from the source ({self.source.model.called}):"]
        for b in sorted(groups, key=_block_order):
            names = groups[b]
            params = sum(tensors[n].numel() for n in names)
            prefix = tree.internal(b) if tree is not None else b
            parts = sorted({n[len(prefix) + 1:].split(".")[0] for n in names})
            what = f"all {len(names)} skipped" if len(names) == sizes[b] else \
                f"{len(names)} of {sizes[b]} skipped: {', '.join(parts)}"
            lines.append(f"    {b:<{width}}  {params:>11,} params  {what}")
        return lines

    def _source_block(self, name: str) -> str:
        """The block of the source's tensor ``name``, by its own kind's weight tree."""
        tree = self.source.tree
        return tree.block(name) if tree is not None else name.split(".")[0]

    def _width(self) -> int:
        """The block column's width, the source's skipped blocks (indented by 2) included."""
        return max([len(e.block) for e in self.entries] + [len(self._source_block(n)) + 2 for n in self.skipped])

    def summary(self) -> str:
        trainable = sum(e.numel for e in self.entries if not e.frozen)
        total = sum(e.numel for e in self.entries)
        kept = f"; vocabulary: {len(self.rows):,} pieces kept their rows" if self.rows else ""
        skipped = f"; {len(self.skipped)} source tensors not loaded (above)" if self.skipped else ""
        return (f"trainable {trainable:,} of {total:,} parameters ({total - trainable:,} frozen){kept}{skipped}")

    def header(self) -> str:
        s = self.source
        return f"train.init: from {s.run.dir.path} ({s.weights}, step {s.step:,}{self._kinds()})"

    def lines(self) -> list[str]:
        """The whole printout: header, the new model's blocks, the source's skipped ones, the summary."""
        return [self.header(), *self.block_lines(), *([self.new_output] if self.new_output else []),
                *self.skipped_lines(), self.summary()]

    def _kinds(self) -> str:
        """Where the source is of another model kind: which of its stacks load (those the two share)."""
        tree = self.source.tree
        if tree is None or [s.name for s in tree.stacks] == list(self.stacks):
            return ""
        shared = [s.name for s in tree.stacks if s.name in self.stacks]
        return f"; the {' and '.join(shared)} of {self.source.model.called}"


def check_kinds(model: ModelSpec, source: Source) -> None:
    """Refuse a source whose model kind shares no stack with ``model``'s (an encoder-only model from a
    decoder-only one): none of its tensors would have a place in the new model."""
    ours, theirs = model.graph.stacks, source.model.graph.stacks
    if set(ours) & set(theirs):
        return
    fits = [k for k, g in GRAPHS.items() if set(g.stacks) & set(ours)]
    raise TbuildError(f"train.init: {source.run.dir.path} is {source.model.called} "
                      f"({' and '.join(theirs)}) and this spec's is {model.called} ({' and '.join(ours)}): "
                      "they share no stack, so none of "
                      f"its tensors has a place here; start from a run of model kind {' or '.join(fits)}")


def make_plan(model: nn.Module, source: Source, init: InitSpec, tokenizer: Tokenizer) -> LoadPlan:
    """The plan for ``model`` (built from the new spec) and ``tokenizer`` (the new run's)."""
    tree = weight_tree(model)
    rows = _vocabulary(init, source, tokenizer)
    frozen = frozen_names(init.freeze, model)
    copies = {tree.internal(new): tree.internal(old) for new, old in init.copy_.items()}
    vocab_rows = tree.vocab_rows if rows else frozenset()  # remapped by piece (one tokenizer serves both sides)
    names = tied_names(model)
    other = _other_output(model, tree.output, source)
    entries, mismatched, used = [], [], set()
    for name, param in model.named_parameters():
        status, src = _status(name, names.get(name, (name,)), init, source, copies, vocab_rows)
        if other is not None and name.startswith(f"{tree.output}.") and status in LOADS:
            status, src = "new", None  # another kind of head: its tensors mean something else
        if status in LOADS and src is not None:
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
    if not used:
        raise TbuildError(f"train.init: nothing of {source.run.dir.path} loads into this model: none of its "
                          f"{len(source.tensors)} tensors has a name here that train.init.include and "
                          "train.init.exclude let through, so the run would start from scratch")
    buffers = {n for n, _ in model.named_buffers()}
    skipped = sorted(n for n in source.tensors if n not in used and n not in buffers)
    return LoadPlan(source, entries, skipped, rows, tuple(s.name for s in tree.stacks), other)


def _other_output(model: nn.Module, output: str | None, source: Source) -> str | None:
    """Where the source's output module is of another class than this model's (a masked LM's head, a score
    per piece, under a tagger's, a score per tag): the line saying that this model's starts new; else None."""
    if output is None or source.output_class is None or source.tree is None or source.tree.output != output:
        return None  # no output, or the source's has another name (nothing of it would load here anyway)
    ours = type(getattr(model, output)).__name__
    if ours == source.output_class:
        return None
    return (f"  {output}: the source's is a {source.output_class}, this model's a {ours}: it starts new (its "
            "tensors are not loaded)")


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


def _status(name: str, names: tuple[str, ...], init: InitSpec, source: Source, copies: dict[str, str],
            vocab_rows: frozenset[str]) -> tuple[str, str | None]:
    """``name``'s status and the source tensor it takes; ``names`` are all of its names (a tied table's),
    each looked up in the source directly or under the name the source's own tying saved it as."""
    if not any(fnmatch(name, p) for p in init.include) or any(fnmatch(name, p) for p in init.exclude):
        return "excluded", None
    for new, old in copies.items():
        if name.startswith(new + "."):
            src = old + name[len(new):]
            return ("copied", src) if src in source.tensors else ("new", None)
    found = (n if n in source.tensors else source.aliases.get(n) for n in names)
    src = next((n for n in found if n in source.tensors), None)
    if src is None:
        return "new", None
    return ("remapped" if name in vocab_rows else "loaded"), src


def _block_order(block: str) -> tuple[str, int]:
    """``decoder.layers.10`` after ``decoder.layers.9``."""
    head, _, last = block.rpartition(".")
    return (head, int(last)) if last.isdigit() else (block, -1)


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
    old = run_tokenizer(source.tokenizer, source.run.spec)
    index = {old.sp.id_to_piece(i): i for i in range(old.vocab_size)}
    return {i: index[p] for i in range(tokenizer.vocab_size) if (p := tokenizer.sp.id_to_piece(i)) in index}

