"""What a Hugging Face encoder-decoder export (MarianMTModel: ``hf.py``; Pegasus: ``hf_pegasus.py``) says
the same way whatever its class: the config fields Marian and Pegasus share, and ``generate``'s defaults; and
the tokenizer_config.json beside an imported tokenizers file (every hf export's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec
from tbuild.builder.tokens import BOS, EOS, PAD
from tbuild.components.transformer import EncoderDecoder
from tbuild.components.weights import weight_tree

from .hf_activations import TO_HF

if TYPE_CHECKING:
    from torch import nn
    from transformers import GenerationConfig

SINUSOID_ROWS = 1024  # max_position_embeddings when the model has no max_positions


def seq2seq_config(model: EncoderDecoder, spec: Spec) -> dict[str, object]:
    """The config fields MarianConfig and PegasusConfig share: sizes, activation, positions, dropout, and
    tbuild's special ids (decoding starts from BOS, not PAD as in most Marian and Pegasus models)."""
    m, view = spec.model, resolve(spec.model)
    layers = weight_tree(model).layer_counts(model)
    return dict(
        d_model=m.d_model, encoder_layers=layers["encoder"], decoder_layers=layers["decoder"],
        encoder_attention_heads=view.encoder.heads, decoder_attention_heads=view.decoder.heads,
        encoder_ffn_dim=view.encoder.d_ff, decoder_ffn_dim=view.decoder.d_ff,
        activation_function=TO_HF[view.encoder.groups[0].ffn.kind],  # type: ignore[attr-defined]
        max_position_embeddings=m.max_positions or SINUSOID_ROWS, scale_embedding=m.scale_embeddings,
        dropout=m.dropout.residual, attention_dropout=m.dropout.attention, activation_dropout=m.dropout.activation,
        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS, decoder_start_token_id=BOS, forced_eos_token_id=EOS,
    )


def silence(hf: nn.Module, spec: Spec) -> None:
    """``final_logits_bias`` (the one bias Marian's and Pegasus's output has): 0, and -inf at the ids the run
    never scores (``model.silent_ids``), so the class computes the run's softmax."""
    hf.final_logits_bias.zero_()  # type: ignore[operator]
    hf.final_logits_bias[..., spec.model.silent_ids] = float("-inf")  # type: ignore[index]


def generation_config(spec: Spec, max_length: int) -> GenerationConfig:
    """``generate`` defaults that decode as tbuild: start from BOS, never emit PAD or BOS, force EOS at the
    length limit, the run's beam. (HF's length penalty is |Y|^α, not tbuild's ((5+|Y|)/6)^α, and its
    limit is one max_length, not a·|X|+b: see export/parity.py.)"""
    from transformers import GenerationConfig

    return GenerationConfig(
        decoder_start_token_id=BOS, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, forced_eos_token_id=EOS,
        suppress_tokens=[PAD, BOS], num_beams=spec.decode.beam, length_penalty=spec.decode.alpha,
        max_length=max_length, do_sample=False,
    )


def write_tokenizers_config(out: Path, tokens: dict[str, str | None], max_length: int) -> None:
    """tokenizer_config.json beside a tokenizers file (``PreTrainedTokenizerFast`` loads the two): each role's
    token (``tokens``: unk, eos, pad, bos; one with none left out)."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
              **{f"{role}_token": token for role, token in tokens.items() if token is not None}}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
