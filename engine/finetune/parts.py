"""Named parts of a built model (embeddings, encoder, decoder, their layers and norms) as parameter-name
prefixes, for ``train.init.freeze``."""

from __future__ import annotations

import re

from torch import nn

from ..errors import TbuildError

LAYERS = re.compile(r"^(encoder|decoder)\.layers\.(\d+)(?:-(\d+))?$")
FIXED = {"embeddings": ("src_embed.", "tgt_embed.", "output."), "encoder": ("encoder.", "encoder_norm."),
         "decoder": ("decoder.", "decoder_norm."), "encoder.norm": ("encoder_norm.",),
         "decoder.norm": ("decoder_norm.",)}


def part_prefixes(name: str, model: nn.Module) -> tuple[str, ...]:
    """The parameter-name prefixes of part ``name``; a TbuildError naming the parts this model has."""
    if name in FIXED:
        return FIXED[name]
    match = LAYERS.match(name)
    if match:
        stack, first, last = match.group(1), int(match.group(2)), int(match.group(3) or match.group(2))
        count = len(getattr(model, stack))
        if first <= last < count:
            return tuple(f"{stack}.{i}." for i in range(first, last + 1))
        raise TbuildError(f"train.init.freeze: {name}: the {stack} has layers 0-{count - 1}")
    raise TbuildError(f"train.init.freeze: unknown part {name!r}; parts: {', '.join(FIXED)}, encoder.layers.I, "
                      "encoder.layers.I-J, decoder.layers.I, decoder.layers.I-J")


def frozen_names(parts: list[str], model: nn.Module) -> set[str]:
    """The parameter names in ``parts``."""
    prefixes = tuple(p for part in parts for p in part_prefixes(part, model))
    return {n for n, _ in model.named_parameters() if n.startswith(prefixes)}
