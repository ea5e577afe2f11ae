"""Named parts of a built model (its kind's ``WEIGHTS``: embeddings, each stack, its layers and final norm) as
parameter-name prefixes, for ``train.init.freeze``."""

from __future__ import annotations

from torch import nn

from tbuild.components.weights import weight_tree

from ..errors import TbuildError


def part_prefixes(name: str, model: nn.Module) -> tuple[str, ...]:
    """The parameter-name prefixes of part ``name``; a TbuildError naming the parts this model has."""
    tree = weight_tree(model)
    fixed = tree.fixed_parts()
    if name in fixed:
        return fixed[name]
    layers = tree.layer_range(name)
    if layers is not None:
        stack, first, last = layers
        count = len(getattr(model, stack.layers))
        if first <= last < count:
            return tuple(f"{stack.layers}.{i}." for i in range(first, last + 1))
        raise TbuildError(f"train.init.freeze: {name}: the {stack.name} has layers 0-{count - 1}")
    raise TbuildError(f"train.init.freeze: unknown part {name!r}; parts: {', '.join(tree.part_names())}")


def frozen_names(parts: list[str], model: nn.Module) -> set[str]:
    """The parameter names in ``parts``."""
    prefixes = tuple(p for part in parts for p in part_prefixes(part, model))
    return {n for n, _ in model.named_parameters() if n.startswith(prefixes)}
