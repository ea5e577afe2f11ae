"""Write a translator as a CTranslate2 model through its Python spec API (no converter script): every weight
where the model kind's CTranslate2 map (``WEIGHTS``, ``components/weights.py``) names it, the positions as
tables. Call ``targets.check_exportable`` first: these functions assume what it guarantees.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from tbuild.builder.resolved import ResolvedStack, resolve
from tbuild.builder.spec import Spec
from tbuild.components.positional import Learned, NoPosition, Sinusoidal, sinusoid_table
from tbuild.components.specs.special import Specials
from tbuild.components.transformer import EncoderDecoder
from tbuild.components.weights import weight_tree

from ..hf.tokenizer import row_names
from ..run.directory import Run
from .targets import CTRANSLATE2, UnsupportedExport, check_exportable

if TYPE_CHECKING:
    from ctranslate2.specs.model_spec import LayerSpec
    from ctranslate2.specs.transformer_spec import PositionEncoderSpec, TransformerSpec

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16")
SINUSOID_ROWS = 1024  # positions written for sinusoidal/none when the model has no max_positions


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def set_weights(root: LayerSpec, model: nn.Module) -> None:
    """Every weight of ``model``'s CTranslate2 map into the runtime's spec (fused on the output axis where the
    map names several); a name whose tensors the model lacks (a bias, a final norm) is left unset."""
    tensors = dict(model.named_parameters(remove_duplicate=False))
    for name, sources in weight_tree(model).export_names(CTRANSLATE2.name, model).items():
        if all(s in tensors for s in sources):
            *path, leaf = name.split("/")
            setattr(_walk(root, path), leaf, np.concatenate([_np(tensors[s]) for s in sources]))


def set_special(config: object, special: Specials, vocabulary: list[str]) -> None:
    """The runtime's special tokens from the run's record, and its adding around a source (BOS, EOS: all it knows)."""
    for role in ("unk", "bos", "eos"):
        if getattr(special, role) is not None:
            setattr(config, f"{role}_token", vocabulary[getattr(special, role)])
    config.decoder_start_token = vocabulary[special.start]
    before, after = special.around("source")
    config.add_source_bos, config.add_source_eos = before == [special.bos], after == [special.eos]
    if (before and not config.add_source_bos) or (after and not config.add_source_eos):
        raise UnsupportedExport(f"cannot export to ctranslate2: the vocabulary adds {list(special.source)} around a "
                                "source, and the runtime adds only bos before it and eos after it")


def _walk(spec: LayerSpec, path: list[str]) -> LayerSpec:
    """The spec at ``path`` (``layer_3`` is ``layer[3]`` where no attribute has that name)."""
    for part in path:
        if hasattr(spec, part):
            spec = getattr(spec, part)
        else:
            name, index = part.rsplit("_", 1)
            spec = getattr(spec, name)[int(index)]
    return spec


def set_positions(spec: PositionEncoderSpec, positional: nn.Module, d_model: int, rows: int) -> None:
    """tbuild's own table, row 0 = the first token (the runtime's sinusoid is sin|cos halves from position 1)."""
    if isinstance(positional, Learned):
        spec.encodings = _np(positional.embedding.weight)
    elif isinstance(positional, Sinusoidal):
        spec.encodings = _np(sinusoid_table(rows, d_model))
    elif isinstance(positional, NoPosition):
        spec.encodings = np.zeros((rows, d_model), dtype=np.float32)
    else:  # pragma: no cover - check_exportable refuses other kinds first
        raise AssertionError(type(positional).__name__)


def _stack_options(stack: ResolvedStack, d_model: int, pre_norm: bool) -> dict:
    from ctranslate2.specs import common_spec

    group = stack.groups[0]  # check_exportable: one FFN kind, one kv_heads per stack
    ffn = group.ffn.kind
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "gelu_tanh": common_spec.Activation.GELUTanh,
                  "silu": common_spec.Activation.SWISH, "swiglu": common_spec.Activation.SWISH}[ffn]
    kv = group.attention.kv_heads or stack.heads
    return dict(pre_norm=pre_norm, no_final_norm=stack.final_norm is None, activation=activation,
                ffn_glu=ffn == "swiglu", rms_norm=group.norm.kind == "rmsnorm",
                num_heads_kv=kv if kv != stack.heads else None,
                head_dim=stack.d_k if stack.d_k * stack.heads != d_model else None)


def build_spec(model: EncoderDecoder, spec: Spec, vocabulary: list[str]) -> TransformerSpec:
    """The runtime's TransformerSpec holding ``model``'s weights; ``vocabulary``: the pieces in id order."""
    from ctranslate2.specs import transformer_spec as ts

    check_exportable(spec, CTRANSLATE2)
    view, m = resolve(spec.model), spec.model
    pre = m.norm_placement == "pre"
    d = m.d_model
    tree = weight_tree(model)
    layers = tree.layer_counts(model)
    enc = ts.TransformerEncoderSpec(layers["encoder"], view.encoder.heads, **_stack_options(view.encoder, d, pre))
    dec = ts.TransformerDecoderSpec(layers["decoder"], view.decoder.heads, **_stack_options(view.decoder, d, pre))
    rows = m.max_positions or SINUSOID_ROWS

    out = ts.TransformerSpec(enc, dec)
    set_weights(out, model)
    for stack, side in zip(tree.stacks, (enc, dec), strict=True):
        side.scale_embeddings = m.scale_embeddings  # × √d_model (§3.4) or not
        set_positions(side.position_encodings, getattr(model, stack.embedding).positional, d, rows)
    set_special(out.config, spec.special(), vocabulary)  # tbuild's own: sources end with EOS, targets start at BOS
    # One epsilon for every norm (check_exportable refuses a mix); the runtime reads it from config.
    out.config.layer_norm_epsilon = view.encoder.groups[0].norm.eps
    out.register_source_vocabulary(row_names(vocabulary, len(enc.embeddings[0].weight)))
    out.register_target_vocabulary(row_names(vocabulary, len(dec.embeddings.weight)))
    return out


def write_ctranslate2(model: EncoderDecoder, spec: Spec, vocabulary: list[str], out: Path,
                      quantization: str | None = None) -> None:
    """Validate, optionally quantize (``QUANTIZATIONS``) and save the CTranslate2 model into ``out``."""
    ct2 = build_spec(model, spec, vocabulary)
    ct2.validate()
    ct2.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    ct2.save(str(out))


def export_run(run: Run, out: Path, *, quantization: str | None = None, checkpoint: Path | None = None,
               average: int | None = None) -> str:
    """Write ``run``'s weights as a CTranslate2 model in ``out`` with its tokenizer beside it; returns which."""
    import shutil

    from tbuild.builder import build_model

    from ..data.tokenizer import run_tokenizer
    from ..errors import TbuildError
    from ..extras import require
    from ..run.weights import load_weights

    check_exportable(run.spec, CTRANSLATE2)  # refuse before loading anything
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise TbuildError(f"--quantization {quantization!r}: choose one of {', '.join(QUANTIZATIONS)}")
    require("ctranslate2", "tbuild[export]", "--to ctranslate2")
    tok = run_tokenizer(run.tokenizer, run.spec)
    model = build_model(run.spec)
    weights = load_weights(model, run, checkpoint=checkpoint, average=average)
    write_ctranslate2(model.eval(), run.spec, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)], out,
                      quantization)
    shutil.copyfile(tok.path, out / run.dir.tokenizer_for(tok.path).name)
    return weights
