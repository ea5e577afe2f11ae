"""A Hugging Face family as tbuild reads and writes it: one ``Family`` per transformers architecture kind, each in
its own module (listed in ``families.py``), with its one weight map (``maps.py``) that export writes and import
reads back, the config both ways, and the tensors the map does not carry (position tables)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder.spec import Spec
from tbuild.components.positional import sinusoid_table

from .maps import Map, State

if TYPE_CHECKING:
    from transformers import PretrainedConfig

TO_HF = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}  # FFN kind -> transformers' name
FROM_HF = {**{name: kind for kind, name in TO_HF.items()},
           "gelu_pytorch_tanh": "gelu_tanh", "swish": "silu"}  # the same functions under other names (ACT2FN)
TABLE_ROWS = 1024  # a position table's rows where the model has no max_positions


@dataclass(frozen=True)
class Family:
    """How one family converts. Import: ``hf_class``, ``check``, ``fields`` (the spec's model fields and the
    tensors no map name carries), ``folder`` (fields from the folder's other files), ``dataset`` (None: a
    translator's pairs). Both ways: ``names``, the map. Export: ``exports`` (key -> class), ``config``, ``extra``
    (tensors outside the map) and ``finish`` (rescaling the written tensors)."""

    model_types: tuple[str, ...]  # config.json's model_type values it imports
    hf_class: Callable[[dict], str]
    check: Callable[[PretrainedConfig], None]
    fields: Callable[[nn.Module], tuple[dict, State]]
    names: Callable[[Spec, nn.Module, str], Map]
    dataset: Callable[[dict], dict | str | None] = lambda _config: None
    config: Callable[[nn.Module, Spec, str], PretrainedConfig] | None = None
    extra: Callable[[nn.Module, Spec, str], State] = lambda _model, _spec, _cls: {}
    finish: Callable[[State, Spec], State] = lambda state, _spec: state
    exports: dict[str, str] = field(default_factory=dict)  # export key -> transformers class
    folder: Callable[[Path, dict], dict] = lambda _folder, fields: fields


def tensors(module: nn.Module) -> State:
    """Every parameter of ``module`` under each of its names (tied ones too), float32."""
    return {n: p.detach().float() for n, p in module.named_parameters(remove_duplicate=False)}


def shapes(module: nn.Module) -> dict[str, torch.Size]:
    return {n: p.shape for n, p in module.named_parameters(remove_duplicate=False)}


def positions(table: torch.Tensor, embed: str) -> tuple[dict, State]:
    """A stored position table as the spec's positional field and tbuild's tensors: tbuild's sinusoid (§3.5, as
    the exports write it) ``sinusoidal``, zeros ``none``, anything else ``learned`` with the table as trained."""
    if torch.allclose(table, sinusoid_table(table.size(0), table.size(1)), atol=1e-6):
        return {"kind": "sinusoidal"}, {}
    if not table.any():
        return {"kind": "none"}, {}
    return {"kind": "learned"}, {f"{embed}.positional.embedding.weight": table}


def position_table(model: nn.Module, spec: Spec, embed: str) -> torch.Tensor:
    """The positions tbuild adds to the embeddings as a (rows, D) table: learned rows as trained, a sinusoid's
    (§3.5) or zeros."""
    kind, d = spec.model.positional.kind, spec.model.d_model  # type: ignore[union-attr]
    rows = spec.model.max_positions or TABLE_ROWS
    if kind == "learned":
        return getattr(model, embed).positional.embedding.weight.detach().float()
    return sinusoid_table(rows, d) if kind == "sinusoidal" else torch.zeros(rows, d)


def scaled_tokens(table: str) -> Callable[[State, Spec], State]:
    """A ``finish`` folding §3.4's √d_model into the token table named ``...table``, for a class without that
    scaling (the export refuses it with a tied output)."""
    def finish(state: State, spec: Spec) -> State:
        if not spec.model.scale_embeddings:
            return state
        scale = math.sqrt(spec.model.d_model)
        return {n: t * scale if n.endswith(table) else t for n, t in state.items()}

    return finish


def refuse_field(field_name: str, value: object, why: str) -> None:
    from .folder import UnsupportedImport

    raise UnsupportedImport(f"config.json {field_name} {value!r}: {why}")
