"""A model kind's weight tree, declared once beside its module (as CTranslate2's layer specs and torchtune's
checkpoint converters declare theirs): its named parts (embeddings and output, stacks of layers with their
final norms), the parameters with one row per vocabulary piece, the user's name of a layer
(``encoder.layers.I``; the module's ``encoder.I``) and each parameter's name in every export format.

A model class carries its tree as ``WEIGHTS``; fine-tuning (parts, vocabulary rows, a load plan's blocks),
the export writers and ``inspect`` derive what they need from it, so a new model kind declares its tree and
gets all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from torch import nn

LAYER = "{i}"  # stands for a layer index in an export map's names
Names = dict[str, tuple[str, ...]]  # export name -> the model's parameter names written into it (fused on axis 0)


@dataclass(frozen=True)
class Stack:
    """A stack of layers: its part name, the module list that holds its layers, the embedding that feeds
    it and its final norm (module attributes; None where the kind has none)."""

    name: str
    layers: str
    embedding: str | None = None
    norm: str | None = None


@dataclass(frozen=True)
class WeightTree:
    """The named parts of one model kind and its export maps (``{i}`` names a layer of the stack whose
    module list the model-side name starts with: ``encoder.{i}.ffn.norm.weight``)."""

    stacks: tuple[Stack, ...]
    output: str | None  # the output projection's attribute
    vocab_rows: frozenset[str]  # parameters with one row per vocabulary piece
    exports: Mapping[str, Names]  # export target name -> its names

    def stack(self, name: str) -> Stack:
        return next(s for s in self.stacks if s.name == name)

    def fixed_parts(self) -> dict[str, tuple[str, ...]]:
        """Part name -> parameter-name prefixes: the embeddings (with the output where it has a row per
        vocabulary piece: not a tagger's or classifier's head), each stack (with its final norm), each final
        norm."""
        embeddings = tuple(f"{s.embedding}." for s in self.stacks if s.embedding is not None)
        vocab_output = self.output is not None and f"{self.output}.weight" in self.vocab_rows
        parts = {"embeddings": embeddings + ((f"{self.output}.",) if vocab_output else ())}
        parts |= {s.name: (f"{s.layers}.",) + ((f"{s.norm}.",) if s.norm else ()) for s in self.stacks}
        parts |= {f"{s.name}.norm": (f"{s.norm}.",) for s in self.stacks if s.norm}
        return parts

    def part_names(self) -> list[str]:
        """Every part name a user may give, layer ranges as patterns (``encoder.layers.I-J``)."""
        layers = [f"{s.name}.layers.{n}" for s in self.stacks for n in ("I", "I-J")]
        return [*self.fixed_parts(), *layers]

    def layer_range(self, name: str) -> tuple[Stack, int, int] | None:
        """``encoder.layers.3`` or ``encoder.layers.2-4`` -> (stack, first, last); None for other names."""
        stacks = "|".join(re.escape(s.name) for s in self.stacks)
        match = re.match(rf"^({stacks})\.layers\.(\d+)(?:-(\d+))?$", name)
        if match is None:
            return None
        first = int(match.group(2))
        return self.stack(match.group(1)), first, int(match.group(3) or first)

    def internal(self, prefix: str) -> str:
        """The user's part name (``decoder.layers.6``) as the model's parameter prefix (``decoder.6``)."""
        prefix = prefix.rstrip(".")
        for s in self.stacks:
            match = re.match(rf"^{re.escape(s.name)}\.layers\.(\d+)", prefix)
            if match:
                return f"{s.layers}.{match.group(1)}{prefix[match.end():]}"
        return prefix

    def block(self, param: str) -> str:
        """The block a parameter belongs to: its layer by the user's name (``decoder.layers.6``), else the
        model's top-level module (``src_embed``, ``encoder_norm``, ``output``)."""
        parts = param.split(".")
        for s in self.stacks:
            if parts[0] == s.layers and len(parts) > 1 and parts[1].isdigit():
                return f"{s.name}.layers.{parts[1]}"
        return parts[0]

    def layer_counts(self, model: nn.Module) -> dict[str, int]:
        """Stack name -> its number of layers in ``model``."""
        return {s.name: len(getattr(model, s.layers)) for s in self.stacks}

    def export_names(self, target: str, model: nn.Module) -> Names:
        """``target``'s map for ``model``, every ``{i}`` expanded to its stack's layers (declared order)."""
        if target not in self.exports:
            raise KeyError(f"{type(model).__name__} declares no {target} names")
        counts = {s.layers: len(getattr(model, s.layers)) for s in self.stacks}
        out: Names = {}
        for name, sources in self.exports[target].items():
            if LAYER not in name:
                out[name] = sources
                continue
            stack = sources[0].split(".", 1)[0]
            for i in range(counts[stack]):
                out[name.replace(LAYER, str(i))] = tuple(s.replace(LAYER, str(i)) for s in sources)
        return out


def params(export: str, *modules: str, sep: str = ".", names: tuple[str, str] = ("weight", "bias")) -> Names:
    """One export module's weight and bias (named ``names`` there) from ``modules``' weights and biases,
    fused on the output axis in the order given."""
    return {f"{export}{sep}{names[0]}": tuple(f"{m}.weight" for m in modules),
            f"{export}{sep}{names[1]}": tuple(f"{m}.bias" for m in modules)}


def weight_tree(model: nn.Module) -> WeightTree:
    """``model``'s declared tree (its class's ``WEIGHTS``); a TypeError for a model that declares none."""
    tree = getattr(type(model), "WEIGHTS", None)
    if not isinstance(tree, WeightTree):
        raise TypeError(f"{type(model).__name__} declares no WEIGHTS (a components.weights.WeightTree)")
    return tree
