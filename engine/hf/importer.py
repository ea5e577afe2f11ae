"""``tbuild import hf``: a Hugging Face model as an ordinary tbuild run directory in the folder's own ids: a
validated spec.yaml (every field written out), best.safetensors read through the family's map (``family.py``:
the map its export writes, read backwards) and the tokenizer (``tokenizer.py``). Written into a temporary folder
renamed into place last: a refused or failed import leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder import build_model, load_spec
from tbuild.builder.spec import Spec

from ..data.tokenizers_file import NAME as TOKENIZERS
from ..errors import TbuildError
from ..run.checkpoint import model_tensors, save_weights
from ..run.directory import RunDir
from .families import FAMILIES
from .family import Family, shapes, tensors
from .folder import UnsupportedImport, load_model, locate, read_config
from .generation import decode_section
from .maps import from_hf
from .special import Note, optional_json
from .tokenizer import find_tokenizer

if TYPE_CHECKING:
    from ..data.tokenizer import Tokenizer


def _family(config: dict) -> Family:
    family = FAMILIES.get(config["model_type"])
    if family is None:
        raise UnsupportedImport(f"config.json model_type {config['model_type']!r}: tbuild imports "
                                f"{', '.join(sorted(FAMILIES))}")
    return family


def _languages(folder: Path) -> dict[str, str]:
    """data.source_lang / target_lang from tokenizer_config.json where it names them."""
    config = optional_json(folder / "tokenizer_config.json")
    return {f"{side}_lang": config[f"{side}_lang"] for side in ("source", "target")
            if isinstance(config.get(f"{side}_lang"), str)}


def imported_model(folder: Path, config: dict, name: str, scratch: Path,
                   note: Note = lambda _: None) -> tuple[Spec, nn.Module, Tokenizer]:
    """The folder's model as a validated tbuild spec, the tbuild model holding its weights, and the tokenizer
    (built into ``scratch`` where needed); ``note``: a line for each setting cleared or not applied."""
    import transformers

    family = _family(config)
    family.check(transformers.AutoConfig.for_model(**config))
    cls = family.hf_class(config)
    hf = load_model(folder, cls)
    fields, extra = family.fields(hf)
    fields = family.folder(folder, fields)
    rows = min(r for r in (fields["vocab_size"], fields.get("src_vocab_size")) if r)
    tok = find_tokenizer(folder, rows, config, scratch, note)
    special = None if tok.special.is_default else tok.special.model_dump(mode="json")  # tbuild's own: none
    data = {**_languages(folder), "tokenizer": {"vocab_size": tok.vocab_size, "special": special}}
    dataset = family.dataset(config)  # a language model's plain text, an encoder's labelled files
    if dataset is not None:
        data["dataset"] = dataset
    kind = fields["kind"]  # a model that generates decodes as the folder's generate does by default
    decode = {} if kind == "encoder_only" else decode_section(folder, config, tok.special, kind == "encoder_decoder",
                                                              note)
    spec = load_spec({"name": name, "model": fields, "data": data, "decode": decode}).spec
    model = build_model(spec).eval()
    theirs = tensors(hf)
    output = hf.get_output_embeddings()
    if "lm_head.weight" not in theirs and output is not None:  # a tied output, under its own name
        theirs["lm_head.weight"] = output.weight.detach().float()
    state = from_hf(family.names(spec, model, cls), theirs, shapes(model)) | extra
    params = dict(model.named_parameters(remove_duplicate=False))
    missing = sorted(set(params) - set(state))
    if missing:  # pragma: no cover - a transformers release that renamed a weight
        raise AssertionError(f"{cls} import left tbuild weights unset: {', '.join(missing[:3])}")
    with torch.no_grad():
        for n, tensor in state.items():
            params[n].copy_(tensor)
    return spec, model, tok


def write_run(spec: Spec, model: nn.Module, tokenizer: Path, source: str, out: Path) -> None:
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
        shutil.copyfile(tokenizer, tmp / TOKENIZERS if tokenizer.suffix == ".json" else run.tokenizer)
        tensors_out = {f"model.{k}": v for k, v in model_tensors(model).items()}
        save_weights(run.best, tensors_out, {"architecture": spec.architecture_hash(), "step": 0,
                                             "imported_from": source})
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def import_hf(source: str, out: Path, note: Note = lambda _: None) -> Spec:
    """Import the Hugging Face model ``source`` (a folder or a hub id) into the run directory ``out``; ``note``
    gets a line for each of the folder's settings that was cleared or not applied."""
    folder = locate(source)
    with tempfile.TemporaryDirectory() as scratch:
        spec, model, tok = imported_model(folder, read_config(folder), out.name, Path(scratch), note)
        write_run(spec, model, tok.path, source, out)
    return spec
