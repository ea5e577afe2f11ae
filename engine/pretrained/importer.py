"""``tbuild import hf``: a Hugging Face model as an ordinary tbuild run directory. The folder holds the
architecture as a validated spec (spec.yaml, every field written out: edit one and fine-tune), the weights in
tbuild's names (best.safetensors, stamped with the architecture hash, as training writes it), and the
tokenizer: the sentencepiece model (spm.model), or the tokenizers file (tokenizer.json) where the model has
none. Everything is written into a temporary folder beside the output and renamed into place last: a refused
or failed import leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import nn

from tbuild.builder import build_model, load_spec
from tbuild.builder.spec import Spec
from tbuild.components.weights import weight_tree

from ..data.tokenizers_file import NAME as TOKENIZERS
from ..errors import TbuildError
from ..run.checkpoint import model_tensors, save_weights
from ..run.directory import RunDir
from . import hf_causal, hf_encoder, hf_seq2seq
from .hf_ids import Renumbering
from .hf_source import UnsupportedImport, load_model, locate, read_config
from .hf_tokenizer import find_tokenizer

if TYPE_CHECKING:
    from ..data.tokenizer import Tokenizer

Fields = Callable[[nn.Module, str], tuple[dict, dict[str, torch.Tensor]]]
State = Callable[[nn.Module, nn.Module, str], dict[str, torch.Tensor]]
T = TypeVar("T")


@dataclass(frozen=True)
class Family:
    """How one ``model_type`` imports: its transformers class (from config.json), its config check (before the
    weights are read), its spec fields, its weights in tbuild's names, and the data set it trains on (None: a
    translator's pairs)."""

    hf_class: Callable[[dict], str]
    check: Callable[[object], None]
    fields: Fields
    state: State
    dataset: Callable[[dict], dict | str | None]


def _one(value: T) -> Callable[[dict], T]:
    return lambda _config: value


FAMILIES = {
    **{t: Family(_one(c), hf_seq2seq.check_config, hf_seq2seq.model_fields, hf_seq2seq.tbuild_state,
              _one(None))
       for t, c in hf_seq2seq.CLASSES.items()},
    **{t: Family(_one(c), hf_causal.check_config, hf_causal.model_fields, hf_causal.tbuild_state,
              _one("text"))
       for t, c in hf_causal.CLASSES.items()},
    **{t: Family(hf_encoder.hf_class, hf_encoder.check_config, hf_encoder.model_fields, hf_encoder.tbuild_state,
              hf_encoder.dataset)
       for t in hf_encoder.PREFIXES},
}


def _family(config: dict) -> Family:
    family = FAMILIES.get(config["model_type"])
    if family is None:
        raise UnsupportedImport(f"config.json model_type {config['model_type']!r}: tbuild imports "
                                f"{', '.join(sorted(FAMILIES))}")
    return family


def _languages(folder: Path) -> dict[str, str]:
    """data.source_lang / target_lang from tokenizer_config.json where it names them."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return {f"{side}_lang": config[f"{side}_lang"] for side in ("source", "target")
            if isinstance(config, dict) and isinstance(config.get(f"{side}_lang"), str)}


def imported_model(folder: Path, config: dict, name: str, scratch: Path) -> tuple[Spec, nn.Module, Tokenizer]:
    """The folder's model as a validated tbuild spec, the tbuild model holding its weights, and the tokenizer
    (renumbered into ``scratch`` where its special ids are not tbuild's)."""
    import transformers

    family = _family(config)
    family.check(transformers.AutoConfig.for_model(**config))
    hf = load_model(folder, family.hf_class(config))
    fields, extra = family.fields(hf, config["model_type"])
    rows = min(r for r in (fields["vocab_size"], fields.get("src_vocab_size")) if r)
    tok, numbering = find_tokenizer(folder, rows, config, scratch)
    if numbering is not None:
        fields = _renumbered(fields, numbering)
    data = {**_languages(folder), "tokenizer": {"vocab_size": tok.vocab_size}}
    dataset = family.dataset(config)  # a language model's plain text, an encoder's labelled files
    if dataset is not None:
        data["dataset"] = dataset
    spec = load_spec({"name": name, "model": fields, "data": data}).spec
    model = build_model(spec).eval()
    state = family.state(model, hf, config["model_type"]) | extra
    if numbering is not None:  # the vocabulary rows in the renumbered tokenizer's order
        table_rows = _vocab_rows(spec, model)
        state = {n: numbering.rows(t) if n in table_rows else t for n, t in state.items()}
    params = dict(model.named_parameters(remove_duplicate=False))
    missing = sorted(set(params) - set(state))
    if missing:  # pragma: no cover - a transformers release that renamed a weight
        raise AssertionError(f"{type(hf).__name__} import left tbuild weights unset: {', '.join(missing[:3])}")
    with torch.no_grad():
        for n, tensor in state.items():
            params[n].copy_(tensor)
    return spec, model, tok


def _renumbered(fields: dict, numbering: Renumbering) -> dict:
    """The model fields in the renumbered tokenizer's ids: a row more per copied role (opus-mt's BOS is its PAD),
    and a decoder's silent ids (those of the source's, and the copies: its output scores the source's rows only,
    as the source's did)."""
    fields = fields | {k: fields[k] + numbering.added for k in ("vocab_size", "src_vocab_size") if fields.get(k)}
    if "decoder" in fields:
        new = numbering.new_ids()
        silent = {new[i] for i in fields.get("silent_ids", [])} | numbering.copies
        fields = fields | ({"silent_ids": sorted(silent)} if silent else {})
    return fields


def _vocab_rows(spec: Spec, model: nn.Module) -> frozenset[str]:
    """The parameters with a row per vocabulary piece: the model kind's, and a head's that scores pieces."""
    head = frozenset({"head.weight", "head.bias"}) if getattr(spec.model.head, "vocab_sized", False) else frozenset()
    return weight_tree(model).vocab_rows | head


def write_run(spec: Spec, model: nn.Module, spm_model: Path, source: str, out: Path) -> None:
    """The run directory at ``out`` (which must not exist, or be empty), written in a temporary folder and
    renamed into place."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TbuildError(f"{out}: already exists; import into a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.import."))
    try:
        run = RunDir(tmp)
        spec = spec.model_copy(update={"output_dir": str(out)})
        run.write_spec(spec)
        shutil.copyfile(spm_model, tmp / TOKENIZERS if spm_model.suffix == ".json" else run.tokenizer)
        tensors = {f"model.{k}": v for k, v in model_tensors(model).items()}
        save_weights(run.best, tensors, {"architecture": spec.architecture_hash(), "step": 0, "imported_from": source})
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def import_hf(source: str, out: Path) -> Spec:
    """Import the Hugging Face model ``source`` (a folder or a hub id) into the run directory ``out``."""
    folder = locate(source)
    with tempfile.TemporaryDirectory() as scratch:
        spec, model, tok = imported_model(folder, read_config(folder), out.name, Path(scratch))
        write_run(spec, model, tok.path, source, out)
    return spec
