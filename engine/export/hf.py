"""Write a tbuild encoder-decoder as a Hugging Face folder: config.json and generation_config.json,
model.safetensors, and the files ``MarianTokenizer`` loads (source.spm, target.spm, vocab.json with tbuild's
ids, tokenizer_config.json). A post-norm model becomes a ``MarianMTModel`` (this module), a pre-norm one a
``PegasusForConditionalGeneration`` (``hf_pegasus.py``); ``targets.hf_seq2seq_class`` says which.

Marian is the paper's post-norm Transformer (§3.1) with scaled embeddings (§3.4) and a fixed sinusoid
(§3.5), so the weights map one to one, with one twist: Marian's table puts sin(pos/10000^(2i/D)) in
the first half of each row and cos in the second, where tbuild interleaves them (PE(pos, 2i) = sin,
PE(pos, 2i+1) = cos), and Marian does not save its table (it is rebuilt on load). The export therefore
reorders the model dimension everywhere by ``marian_order``: Marian's feature j is tbuild's feature
order[j]. Layer norm, attention and the FFN commute with such a reordering (their d_model-sized
weights are permuted alike), and the outputs (logits over the vocabulary) are unchanged.

LayerNorm eps: Marian's is nn.LayerNorm's 1e-5, with no config field. As for Pegasus (``hf_pegasus.py``),
LayerNorm_ε'(c·z) = LayerNorm_ε(z) for c = √(ε'/ε), so each stack's residual stream is scaled by c, but only
from its first LayerNorm on: the stack's input (token rows · √d_model + the sinusoid) cannot be scaled, since
Marian rebuilds its sinusoid on load and a scaled token table alone would add c·e + PE, not c·(e + PE). So:

- exact: every LayerNorm but the stack's first. Each LayerNorm's γ and β are multiplied by c (its output,
  the residual stream, is then c times tbuild's); each sub-layer reading the stream divides its input
  weights by c (q/k/v projections, the cross-attention's query, fc1; not their biases) and multiplies what
  it adds to the stream by c (out_proj, fc2: weights and biases). The stack's last LayerNorm keeps γ and β,
  so the encoder's memory (read by the cross-attention's keys and values) and the decoder's output (read by
  the output projection, tied to the token table, and the zero ``final_logits_bias``) are tbuild's own:
  the token tables are not scaled and every tying holds.
- not exact: the first LayerNorm of each stack (after layer 0's self-attention) sees tbuild's own input z
  with eps 1e-5 for ε. Its output differs by the factor √((var z + ε)/(var z + 1e-5)), a relative
  |1e-5 − ε|/(2·var z): 4.5e-6 at ε = 1e-6 for var z ≈ 1 (the sinusoid alone gives each position a variance
  of 0.25 to 0.5); below 1e-5, under 1e-5/(2·var z) whatever ε; above, it grows with ε. docs/export.md gives
  the logit differences measured, and the export's parity report measures each model.

At ε = 1e-5, c = 1 and nothing is scaled.
Call ``targets.check_exportable`` first: these functions assume what it guarantees.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec
from tbuild.builder.tokens import BOS, EOS, PAD, UNK
from tbuild.components.transformer import EncoderDecoder
from tbuild.components.weights import weight_tree

from ..run.directory import Run
from .hf_config import generation_config, seq2seq_config, silence, write_tokenizers_config
from .hf_pegasus import stream_scale
from .targets import HF, HF_LAYER_NORM_EPS, UnsupportedExport, check_exportable, hf_seq2seq_class

if TYPE_CHECKING:
    from transformers import MarianConfig, MarianMTModel, PreTrainedModel

    from ..data.tokenizer import Tokenizer

TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json")


def marian_order(d_model: int) -> torch.Tensor:
    """(D,) tbuild feature index of each Marian feature: the sin columns (even), then the cos ones (odd)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


# Marian's modules whose weight takes the model dimension on its input axis, and those whose output
# (weight rows and bias) is the model dimension; a norm's parameters are all model dimension.
INTO = frozenset({"q_proj", "k_proj", "v_proj", "fc1", "shared", "embed_tokens", "lm_head"})
OUT = frozenset({"out_proj", "fc2"})


def _reordered(name: str, tensor: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``tensor`` with the model dimension reordered where Marian's parameter ``name`` has it."""
    module, param = name.split(".")[-2:]
    if module in OUT or module.endswith("layer_norm"):
        return tensor[order]
    return tensor[:, order] if module in INTO and param == "weight" else tensor


_LAYER = re.compile(r"model\.(encoder|decoder)\.layers\.(\d+)\.([\w.]+)\.(weight|bias)$")
READS = frozenset({"q_proj", "k_proj", "v_proj", "fc1"})  # a sub-layer's input projections


def stream_factor(name: str, scales: dict[str, float], layers: dict[str, int]) -> float:
    """What MarianMTModel's parameter ``name`` is multiplied by so that each stack's residual stream is, from its
    first LayerNorm on, ``scales[stack]`` (c) times tbuild's (module docstring); ``layers``: each stack's depth."""
    match = _LAYER.match(name)
    if match is None:  # token tables, output projection: the stacks' input and output keep tbuild's scale
        return 1.0
    stack, layer, path, param = match[1], int(match[2]), match[3], match[4]
    c, module = scales[stack], path.split(".")[-1]
    if path.startswith("self_attn.") and layer == 0:
        return 1.0  # reads and adds to the stack's input, which is not scaled
    if path.startswith("encoder_attn.") and module in ("k_proj", "v_proj"):
        return 1.0  # reads the encoder's memory, tbuild's own
    if module in READS:
        return 1 / c if param == "weight" else 1.0
    if module in OUT:
        return c
    last = path == "final_layer_norm" and layer == layers[stack] - 1
    return 1.0 if last else c  # a LayerNorm's γ and β: its output is the stream, but for the stack's output


def marian_state(model: EncoderDecoder, shared: bool,
                 scales: dict[str, float] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """(MarianMTModel parameter name, tensor) for every weight of ``model`` (its kind's Marian map,
    ``WEIGHTS``), model dimension reordered, each stack's stream scaled by ``scales`` (c per stack, none: 1);
    a projection without bias gets zeros (Marian's always have one)."""
    names = weight_tree(model).export_names(HF.name, model)
    tensors = {n: p.detach() for n, p in model.named_parameters(remove_duplicate=False)}
    order = marian_order(tensors[names["lm_head.weight"][0]].size(1))
    scales = scales or {"encoder": 1.0, "decoder": 1.0}
    layers = {stack: 1 + max(int(m[2]) for n in names if (m := _LAYER.match(n)) and m[1] == stack)
              for stack in ("encoder", "decoder")}
    for name, (source,) in names.items():
        if name == "model.shared.weight" and not shared:
            continue
        if source in tensors:
            tensor = _reordered(name, tensors[source], order)
        elif name.endswith(".bias"):
            tensor = torch.zeros(tensors[source.removesuffix(".bias") + ".weight"].size(0))
        else:
            continue
        factor = stream_factor(name, scales, layers)
        yield name, tensor if factor == 1.0 else tensor * factor


def marian_scales(spec: Spec) -> dict[str, float]:
    """c = √(1e-5/ε) for each stack's LayerNorm eps ε (one per stack: targets.py)."""
    view = resolve(spec.model)
    return {stack.name: stream_scale(HF_LAYER_NORM_EPS, stack.groups[0].norm.eps)  # type: ignore[attr-defined]
            for stack in view.stacks}


def _embedding_rows(model: EncoderDecoder) -> tuple[int, int]:
    """Rows of the tables that become Marian's encoder and decoder ``embed_tokens``."""
    names = weight_tree(model).export_names(HF.name, model)
    tensors = dict(model.named_parameters(remove_duplicate=False))
    src, tgt = (tensors[names[f"model.{side}.embed_tokens.weight"][0]].size(0) for side in ("encoder", "decoder"))
    return src, tgt


def marian_config(model: EncoderDecoder, spec: Spec) -> MarianConfig:
    """The MarianConfig of ``model``: ``seq2seq_config`` with each side's vocabulary and the tying."""
    from transformers import MarianConfig

    m, (src_rows, tgt_rows) = spec.model, _embedding_rows(model)
    return MarianConfig(
        vocab_size=src_rows, decoder_vocab_size=tgt_rows, **seq2seq_config(model, spec),
        share_encoder_decoder_embeddings=m.tie_embeddings == "three_way",
        tie_word_embeddings=m.tie_embeddings != "none",
    )


def to_marian(model: EncoderDecoder, spec: Spec) -> MarianMTModel:
    """An in-memory MarianMTModel holding ``model``'s post-norm weights (float32, eval mode)."""
    from transformers import MarianMTModel

    check_exportable(spec, HF)
    if hf_seq2seq_class(spec) != "marian":
        raise UnsupportedExport("MarianMTModel's layers are post-norm: to_hf writes a pre-norm model as "
                                "PegasusForConditionalGeneration")
    config = marian_config(model, spec)
    hf = MarianMTModel(config).eval()
    params = dict(hf.named_parameters(remove_duplicate=False))
    written = set()
    with torch.no_grad():
        for name, tensor in marian_state(model, config.share_encoder_decoder_embeddings, marian_scales(spec)):
            params[name].copy_(tensor.float())
            written.add(name)
        silence(hf, spec)
    missing = {n for n in params if n not in written and ".embed_positions." not in n}
    if missing:  # pragma: no cover - a transformers release that renamed a weight
        raise AssertionError(f"MarianMTModel weights not written: {', '.join(sorted(missing))}")
    hf.generation_config = generation_config(spec, config.max_position_embeddings)
    return hf


def to_hf(model: EncoderDecoder, spec: Spec) -> PreTrainedModel:
    """An in-memory MarianMTModel (post-norm) or PegasusForConditionalGeneration (pre-norm) holding ``model``'s
    weights (float32, eval mode)."""
    if hf_seq2seq_class(spec) == "marian":
        return to_marian(model, spec)
    from .hf_pegasus import to_pegasus

    return to_pegasus(model, spec)


def write_tokenizer(spm_model: Path, vocabulary: list[str], spec: Spec, out: Path, max_length: int) -> None:
    """MarianTokenizer's files for tbuild's one shared sentencepiece model: the same model as source.spm and
    target.spm, and vocab.json naming every id as tbuild does (0 pad, 1 unk, 2 bos, 3 eos), so that
    ``MarianTokenizer`` encodes to tbuild's ids and appends EOS, as tbuild's sources end. An imported
    tokenizers file is written as tokenizer.json (``PreTrainedTokenizerFast``'s) instead."""
    if spm_model.suffix == ".json":
        shutil.copyfile(spm_model, out / "tokenizer.json")
        roles = (("unk", UNK), ("eos", EOS), ("pad", PAD), ("bos", BOS))
        write_tokenizers_config(out, {name: vocabulary[i] for name, i in roles}, max_length)
        return
    for name in ("source.spm", "target.spm"):
        shutil.copyfile(spm_model, out / name)
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocabulary)}, ensure_ascii=False))
    config = {"tokenizer_class": "MarianTokenizer", "source_lang": spec.data.source_lang,
              "target_lang": spec.data.target_lang, "unk_token": vocabulary[UNK], "eos_token": vocabulary[EOS],
              "pad_token": vocabulary[PAD], "bos_token": vocabulary[BOS], "model_max_length": max_length,
              "separate_vocabs": False}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def write_hf(model: EncoderDecoder, spec: Spec, spm_model: Path, vocabulary: list[str], out: Path) -> None:
    """Save the ``to_hf`` folder (safetensors weights) with its MarianTokenizer files into ``out``."""
    from transformers.utils import logging

    hf = to_hf(model, spec)
    out.mkdir(parents=True, exist_ok=True)
    logging.disable_progress_bar()  # no "Writing model shards" bar in the command's output
    hf.save_pretrained(str(out))
    rows = max(_embedding_rows(model))
    names = vocabulary + [f"<tbuild_unused_{i}>" for i in range(len(vocabulary), rows)]  # rows past the tokenizer
    write_tokenizer(spm_model, names, spec, out, hf.config.max_position_embeddings)


def load_for_hf(run: Run, refuse: Callable[[], object], checkpoint: Path | None,
                average: int | None) -> tuple[torch.nn.Module, Tokenizer, str]:
    """``run``'s model in eval mode with its weights (``load_weights``: a checkpoint, an average or the
    default), its tokenizer and which weights, for a Hugging Face writer: ``refuse`` raises before
    anything is loaded, and so does a missing transformers package."""
    from tbuild.builder import build_model

    from ..data.tokenizer import Tokenizer
    from ..extras import require
    from ..run.weights import load_weights

    refuse()
    require("transformers", "tbuild[export]", "--to hf")
    tok = Tokenizer.load(run.tokenizer)
    model = build_model(run.spec)
    weights = load_weights(model, run, checkpoint=checkpoint, average=average)
    return model.eval(), tok, weights


def export_run(run: Run, out: Path, *, checkpoint: Path | None = None, average: int | None = None) -> str:
    """Write ``run``'s weights (``load_weights``: a checkpoint, an average or the default) as a
    MarianMTModel or PegasusForConditionalGeneration folder in ``out``; returns which weights."""
    model, tok, weights = load_for_hf(run, lambda: check_exportable(run.spec, HF), checkpoint, average)
    write_hf(model, run.spec, tok.path, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)], out)
    return weights
