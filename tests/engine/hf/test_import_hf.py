"""`tbuild import hf`: tiny Hugging Face models built from configs with random weights (no download), saved
with save_pretrained beside a tiny sentencepiece model, imported as run directories in the folder's own ids
(nothing renumbered). The imported model's logits are HF's within 1e-4 (float32) on every row, `tbuild decode`
on the imported run gives HF's greedy tokens, import → export → import is the identity on weights, and a
refusal (a config field tbuild does not have, a missing or corrupt file) is one line that writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.builder.spec import DecodeSpec
from tbuild.cli.app import app
from tbuild.components.specs.special import BOS, EOS, PAD, UNK
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.hf import hf_search
from tbuild.engine.decoding.search import beam_search
from tbuild.engine.run.checkpoint import read_checkpoint

from .conftest import PIECES

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")

VOCAB = PIECES  # model rows: the tokenizer's pieces

IDS = {"pad_token_id": PAD, "eos_token_id": EOS, "bos_token_id": BOS, "decoder_start_token_id": BOS,
       "forced_eos_token_id": EOS}
SEQ2SEQ = {"vocab_size": VOCAB, "d_model": 16, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "max_position_embeddings": 64,
           "activation_function": "relu", "scale_embedding": True, **IDS}
MARIAN = {
    "marian tied, relu, scaled": {},
    "marian gelu, unscaled": {"activation_function": "gelu", "scale_embedding": False},
    "marian swish (opus-mt's)": {"activation_function": "swish"},
    "marian gelu_new": {"activation_function": "gelu_new"},
    "marian decoder-tied": {"share_encoder_decoder_embeddings": False},
    "marian untied, own source vocabulary": {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False,
                                             "decoder_vocab_size": VOCAB + 8},
    "marian stacks differ": {"decoder_layers": 1, "decoder_attention_heads": 2, "decoder_ffn_dim": 24},
}
PEGASUS = {
    "pegasus tied, own position table": {},
    "pegasus gelu, unscaled, untied output": {"activation_function": "gelu", "scale_embedding": False,
                                              "tie_word_embeddings": False},
}
M2M100 = {
    "m2m100 tied, relu, scaled": {},
    "m2m100 gelu, unscaled, untied output": {"activation_function": "gelu", "scale_embedding": False,
                                             "tie_word_embeddings": False},
}
REFUSED = {
    "quick_gelu": ("marian", {"activation_function": "quick_gelu"}, "config.json activation_function 'quick_gelu'"),
    "a start that is no role": ("marian", {"decoder_start_token_id": 7},
                                "config.json decoder_start_token_id 7: none of the vocabulary's roles"),
    "ids the tokenizer does not have": ("m2m_100", {"pad_token_id": 1},
                                        "config.json pad_token_id 1: source.spm's pad id is 0"),
    "m2m100 tanh": ("m2m_100", {"activation_function": "tanh"}, "config.json activation_function 'tanh'"),
}


def test_a_decoder_that_starts_from_pad_keeps_the_folder_s_ids(spm: Tokenizer, tmp_path: Path) -> None:
    """Published Pegasus's decoder starts from PAD: the run's ids are the folder's (nothing added, nothing moved),
    its record's target starts from pad, decoding never emits it, and the logits are HF's on every row."""
    hf = seq2seq_folder("pegasus", {"decoder_start_token_id": PAD}, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    spec, model = _loaded(tmp_path / "run")
    special = spec.special()
    assert spec.model.vocab_size == VOCAB and (special.pad, special.unk, special.bos, special.eos) == (PAD, UNK, BOS,
                                                                                                       EOS)
    assert special.target == ("pad", "text", "eos") and special.start == PAD and special.never == (PAD,)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (1, 6), generator=g).tolist()[0] + [EOS]
    tgt = [PAD, *torch.randint(4, VOCAB, (5,), generator=g).tolist()]
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt])).logits
        ours = model(torch.tensor([src]), torch.tensor([tgt]))
    assert (ours - theirs).abs().max().item() < 1e-4


def _perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """Every parameter moved off its init (norm gains ≠ 1, biases ≠ 0), position tables as they are."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.3)
    return model.eval()


def _marian_tokenizer(tok: Tokenizer, folder: Path) -> None:
    """MarianTokenizer's files: one model as source.spm and target.spm, vocab.json with its ids."""
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(tok.path.read_bytes())
    pieces = {tok.sp.id_to_piece(i): i for i in range(tok.vocab_size)}
    (folder / "vocab.json").write_text(json.dumps(pieces))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "MarianTokenizer",
                                                              "source_lang": "en", "target_lang": "de"}))


def seq2seq_folder(family: str, overrides: dict, tok: Tokenizer, folder: Path):  # noqa: ANN201
    """A random MarianMTModel or PegasusForConditionalGeneration saved into ``folder`` with its tokenizer."""
    config_class, model_class = {"marian": ("MarianConfig", "MarianMTModel"),
                                 "pegasus": ("PegasusConfig", "PegasusForConditionalGeneration"),
                                 "m2m_100": ("M2M100Config", "M2M100ForConditionalGeneration")}[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**(SEQ2SEQ | overrides))
    hf = _perturbed(getattr(transformers, model_class)(config))
    hf.save_pretrained(folder)
    _marian_tokenizer(tok, folder)
    return hf


def _import(source: Path, out: Path) -> str:
    result = CliRunner().invoke(app, ["import", "hf", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return result.output


def _assert_round_trip(tmp_path: Path, *, architecture: bool = True) -> None:
    """tmp_path/run exported to HF and imported again is the same run: every tensor, and (``architecture``)
    the architecture hash."""
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "again"), "--to", "hf",
                                      "--check", "none"])
    assert result.exit_code == 0, result.output
    _import(tmp_path / "again", tmp_path / "run2")
    first, meta = read_checkpoint(tmp_path / "run" / "best.safetensors")
    second, meta2 = read_checkpoint(tmp_path / "run2" / "best.safetensors")
    assert not architecture or meta["architecture"] == meta2["architecture"]
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def _loaded(run: Path):  # noqa: ANN202
    from tbuild.builder import build_model
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.run.weights import load_weights

    r = resolve_run(run)
    model = build_model(r.spec)
    load_weights(model, r)
    return r.spec, model.eval()


def _padded(rows: list[list[int]]) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


@pytest.mark.parametrize(("family", "overrides"), [*(("marian", o) for o in MARIAN.values()),
                                                   *(("pegasus", o) for o in PEGASUS.values()),
                                                   *(("m2m_100", o) for o in M2M100.values())],
                         ids=[*MARIAN, *PEGASUS, *M2M100])
def test_seq2seq_logits_and_greedy_match_hf(family: str, overrides: dict, spm: Tokenizer, tmp_path: Path) -> None:
    hf = seq2seq_folder(family, overrides, spm, tmp_path / "hf")
    output = _import(tmp_path / "hf", tmp_path / "run")
    assert "imported" in output and "encoder_decoder" in output
    spec, model = _loaded(tmp_path / "run")
    assert spec.model.norm_placement == ("post" if family == "marian" else "pre")
    assert spec.model.norm.eps == 1e-5 and spec.data.source_lang == "en"
    g = torch.Generator().manual_seed(1)
    srcs = [torch.randint(4, VOCAB, (n,), generator=g).tolist() + [EOS] for n in (5, 9, 3)]
    tgts = [[BOS] + torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in (6, 4, 7)]
    src, tgt = _padded(srcs), _padded(tgts)
    assert spec.data.tokenizer.special is None  # the folder's ids are tbuild's own: the default record
    with torch.no_grad():
        ours = model(src, tgt, src.eq(PAD))  # the padding, as the rows' lengths tell it
        theirs = hf(input_ids=src, attention_mask=src.ne(PAD), decoder_input_ids=tgt).logits
    assert (ours - theirs)[tgt.ne(PAD)].abs().max().item() < 1e-4


@pytest.mark.parametrize("family", ["marian", "pegasus", "m2m_100"])
def test_decode_on_the_imported_run_gives_hf_greedy_tokens(family: str, spm: Tokenizer, tmp_path: Path) -> None:
    hf = seq2seq_folder(family, {}, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    lines = ["ab ba cab", "cc aab bbc a", "b"]
    result = CliRunner().invoke(app, ["decode", str(tmp_path / "run"), "--beam", "1", "--alpha", "0",
                                      "--device", "cpu"], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    ours = [line for line in result.output.splitlines() if not line.startswith(("[", "decod", "note"))][-3:]
    for line, decoded in zip(lines, ours, strict=True):
        ids = spm.encode([line])[0] + [EOS]
        # HF generate with tbuild's length limit (the default decode.max_len_a 1, max_len_b 50 of an imported
        # spec): a random model may repeat a piece up to it, where generate's own max_length counts differently
        out = hf_search(hf, [ids], DecodeSpec(beam=1, alpha=0.0, max_len_a=1.0, max_len_b=50), None,
                        spm.special)[0][0].tokens
        assert spm.decode(out) == decoded
    assert any(ours), "every output empty: the comparison would prove little"


@pytest.mark.parametrize("family", ["marian", "m2m_100"])
def test_beam_search_on_the_imported_run_gives_hf_beams(family: str, spm: Tokenizer, tmp_path: Path) -> None:
    """At α = 0 both searches rank by log P alone (HF's rule with ``early_stopping="never"``, as the export's
    parity check runs it): the same best hypothesis, the same score."""
    hf = seq2seq_folder(family, {}, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    _, model = _loaded(tmp_path / "run")
    g = torch.Generator().manual_seed(3)
    srcs = [torch.randint(4, VOCAB, (n,), generator=g).tolist() + [EOS] for n in (4, 8, 2, 6)]
    decode = DecodeSpec(beam=3, alpha=0.0, max_len_a=0.5, max_len_b=6)
    lengths = []
    for s, h in zip(srcs, hf_search(hf, srcs, decode, None, spm.special), strict=True):
        ours = beam_search(model, torch.tensor([s]), beam=3, alpha=0.0, max_len_a=0.5, max_len_b=6)[0][0]
        assert h[0].tokens == ours.tokens and h[0].score == pytest.approx(ours.score, abs=1e-4)
        lengths.append(len(ours.tokens))
    assert max(lengths) > 1, "every hypothesis empty: the comparison would prove little"


@pytest.mark.parametrize(("family", "overrides"), [("marian", {}), ("pegasus", {}), ("m2m_100", {}),
                                                   ("marian", {"activation_function": "swish"})],
                         ids=["marian", "pegasus", "m2m_100 (exports as Pegasus)", "marian swish (exports as silu)"])
def test_import_export_import_is_the_identity_on_weights(family: str, overrides: dict, spm: Tokenizer,
                                                         tmp_path: Path) -> None:
    seq2seq_folder(family, overrides, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    _assert_round_trip(tmp_path)


def test_a_marian_export_at_another_eps_imports_as_the_folder_computes(spm: Tokenizer, tmp_path: Path) -> None:
    """A post-norm run at eps 1e-6 exports with a rescaled stream (export/hf.py) and no trace of its eps: the
    import is the folder's model (eps 1e-5, its weights, its logits), and import → export → import the identity."""
    from tbuild.builder import build_model, load_spec
    from tbuild.engine.hf.writer import to_hf
    from tests.conftest import TINY

    spec = load_spec(TINY, [f"model.vocab_size={VOCAB}", "model.norm={kind: layernorm, eps: 1.0e-6}"]).spec
    hf = to_hf(build_model(spec).eval(), spec, "marian")
    hf.save_pretrained(tmp_path / "hf")
    _marian_tokenizer(spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    imported_spec, model = _loaded(tmp_path / "run")
    assert imported_spec.model.norm.eps == 1e-5
    src, tgt = torch.tensor([[5, 9, 12, 7, EOS]]), torch.tensor([[BOS, 8, 6, 11]])
    with torch.no_grad():
        theirs = hf(input_ids=src, decoder_input_ids=tgt).logits
        assert (model(src, tgt) - theirs).abs().max().item() < 1e-5
    _assert_round_trip(tmp_path)


def _refused(args: list[str], out: Path, expected: str) -> None:
    result = CliRunner().invoke(app, ["import", "hf", *args, "-o", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], result.output
    assert not out.exists() and not any(p.name.startswith(f".{out.name}") for p in out.parent.iterdir())


@pytest.mark.parametrize(("family", "overrides", "expected"), REFUSED.values(), ids=REFUSED)
def test_an_unsupported_config_field_is_one_line_and_writes_nothing(family: str, overrides: dict, expected: str,
                                                                    spm: Tokenizer, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    seq2seq_folder(family, {k: v for k, v in overrides.items() if k != "activation_function"}, spm, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | overrides))
    _refused([str(folder)], tmp_path / "run", expected)


def test_a_missing_or_corrupt_file_is_one_line_naming_it(spm: Tokenizer, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    seq2seq_folder("marian", {}, spm, folder)
    weights = folder / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) // 2])
    _refused([str(folder)], tmp_path / "run", "model.safetensors: not readable")
    weights.write_bytes(whole)
    (folder / "target.spm").unlink()
    _refused([str(folder)], tmp_path / "run", "target.spm: missing")
    (folder / "config.json").write_text("{not json")
    _refused([str(folder)], tmp_path / "run", "config.json: not readable JSON")
    (folder / "config.json").unlink()
    _refused([str(folder)], tmp_path / "run", "config.json: missing")


def test_a_hub_id_offline_names_the_local_folder_to_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _refused(["nobody/no-such-model"], tmp_path / "run", "offline, pass the model's local folder instead")


GPT2 = {"vocab_size": VOCAB, "n_embd": 16, "n_layer": 2, "n_head": 4, "n_inner": 32, "n_positions": 24,
        "activation_function": "gelu", "pad_token_id": PAD, "bos_token_id": BOS, "eos_token_id": EOS}
LLAMA = {"vocab_size": VOCAB, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 32, "max_position_embeddings": 24, "pad_token_id": PAD, "bos_token_id": BOS,
         "eos_token_id": EOS}
CAUSAL = {
    "gpt2 gelu tied": ("gpt2", {}),
    "gpt2 gelu_new (published GPT-2's)": ("gpt2", {"activation_function": "gelu_new"}),
    "gpt2 relu untied, eps 1e-6": ("gpt2", {"activation_function": "relu", "tie_word_embeddings": False,
                                            "layer_norm_epsilon": 1e-6}),
    "llama tied": ("llama", {"tie_word_embeddings": True}),
    "llama untied, kv_heads 2, biases, theta 500": ("llama", {
        "tie_word_embeddings": False, "num_key_value_heads": 2, "attention_bias": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}),
    "llama head_dim 8 (heads · d_k ≠ d_model)": ("llama", {"head_dim": 8}),
    "qwen2 (Q, K, V biases; O none)": ("qwen2", {"tie_word_embeddings": True, "num_key_value_heads": 2}),
    "llama 3 rope scaling": ("llama", {"head_dim": 8, "rope_parameters": {
        "rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16}}),
}


def causal_folder(family: str, overrides: dict, tok: Tokenizer, folder: Path):  # noqa: ANN201
    """A random GPT2LMHeadModel or LlamaForCausalLM saved into ``folder`` with tokenizer.model."""
    config_class, model_class, base = {"gpt2": ("GPT2Config", "GPT2LMHeadModel", GPT2),
                                       "llama": ("LlamaConfig", "LlamaForCausalLM", LLAMA),
                                       "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", LLAMA)}[family]
    torch.manual_seed(0)
    hf = _perturbed(getattr(transformers, model_class)(getattr(transformers, config_class)(**(base | overrides))))
    hf.save_pretrained(folder)
    (folder / "tokenizer.model").write_bytes(tok.path.read_bytes())
    return hf


@pytest.mark.parametrize(("family", "overrides"), CAUSAL.values(), ids=CAUSAL)
def test_decoder_only_logits_match_hf_and_reimport_is_the_identity(family: str, overrides: dict, spm: Tokenizer,
                                                                   tmp_path: Path) -> None:
    hf = causal_folder(family, overrides, spm, tmp_path / "hf")
    assert "decoder_only" in _import(tmp_path / "hf", tmp_path / "run")
    spec, model = _loaded(tmp_path / "run")
    g = torch.Generator().manual_seed(1)
    ids = torch.tensor([[BOS] + torch.randint(4, VOCAB, (12,), generator=g).tolist()])
    with torch.no_grad():
        assert (model.decode(ids) - hf(input_ids=ids).logits).abs().max().item() < 1e-4
    _assert_round_trip(tmp_path)


CAUSAL_REFUSED = {
    "quick_gelu": ("gpt2", {"activation_function": "quick_gelu"}, "config.json activation_function 'quick_gelu'"),
    "linear rope": ("llama", {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
                    "config.json rope_parameters.rope_type 'linear'"),
    "mlp bias": ("llama", {"mlp_bias": True}, "config.json mlp_bias True"),
    "sliding window": ("qwen2", {"use_sliding_window": True, "num_key_value_heads": 4},
                       "config.json use_sliding_window True"),
}


@pytest.mark.parametrize(("family", "overrides", "expected"), CAUSAL_REFUSED.values(), ids=CAUSAL_REFUSED)
def test_decoder_only_refusals_are_one_line(family: str, overrides: dict, expected: str, spm: Tokenizer,
                                            tmp_path: Path) -> None:
    causal_folder(family, overrides, spm, tmp_path / "hf")
    _refused([str(tmp_path / "hf")], tmp_path / "run", expected)


def test_a_folder_without_a_tokenizer_tbuild_reads_is_refused(spm: Tokenizer, tmp_path: Path) -> None:
    causal_folder("gpt2", {}, spm, tmp_path / "hf")
    (tmp_path / "hf" / "tokenizer.model").unlink()
    (tmp_path / "hf" / "merges.txt").write_text("#version: 0.2\n")
    _refused([str(tmp_path / "hf")], tmp_path / "run", "no tokenizer (source.spm/target.spm, tokenizer.model or "
             "tokenizer.json) (it has merges.txt, which tbuild does not run)")


@pytest.mark.parametrize(("family", "overrides"), [("gpt2", {}), ("llama", {}), CAUSAL[
    "qwen2 (Q, K, V biases; O none)"]], ids=["gpt2", "llama", "qwen2"])
def test_generate_on_the_imported_run_gives_hf_greedy_tokens(family: str, overrides: dict, spm: Tokenizer,
                                                             tmp_path: Path) -> None:
    hf = causal_folder(family, overrides, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    prompts = ["ab ba", "cc aab bbc"]
    result = CliRunner().invoke(app, ["generate", str(tmp_path / "run"), "--beam", "1", "--max-new-tokens", "8",
                                      "--device", "cpu"], input="\n".join(prompts) + "\n")
    assert result.exit_code == 0, result.output
    ours = result.output.splitlines()[-2:]
    for prompt, line in zip(prompts, ours, strict=True):
        ids = spm.encode([prompt])[0]  # the folder's tokenizer.model adds nothing (no tokenizer_config.json)
        out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=8,
                          eos_token_id=EOS, pad_token_id=PAD)[0].tolist()
        assert len(out) > len(ids) and spm.decode(out) == line


def test_pytorch_model_bin_imports_and_a_corrupt_one_is_named(spm: Tokenizer, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    hf = seq2seq_folder("marian", {}, spm, folder)
    (folder / "model.safetensors").unlink()
    torch.save(hf.state_dict(), folder / "pytorch_model.bin")
    _import(folder, tmp_path / "run")
    _, model = _loaded(tmp_path / "run")
    src, tgt = torch.tensor([[5, 6, 7, EOS]]), torch.tensor([[BOS, 8, 9]])
    with torch.no_grad():
        assert (model(src, tgt) - hf(input_ids=src, decoder_input_ids=tgt).logits).abs().max().item() < 1e-4
    (folder / "pytorch_model.bin").write_bytes(b"not a pickle")
    _refused([str(folder)], tmp_path / "run2", "pytorch_model.bin: not readable")


@pytest.mark.parametrize(("variant", "expected"), [
    ("llama head_dim 8 (heads · d_k ≠ d_model)", "model.decoder d_k 8 · heads 4 ≠ d_model 16"),
    ("llama 3 rope scaling", "model.positional.scaling llama3"),
])
def test_what_ctranslate2_s_llama_converter_would_compute_otherwise_is_refused(variant: str, expected: str,
                                                                               spm: Tokenizer, tmp_path: Path) -> None:
    """CTranslate2's converter takes d_model/heads for d_k and reads RoPE scaling from a config field transformers 5
    no longer writes: the export is refused in one line, nothing written (its parity check found 0.24 and 0.58 of
    logit difference)."""
    family, overrides = CAUSAL[variant]
    causal_folder(family, overrides, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "--to", "ctranslate2", "-o",
                                      str(tmp_path / "ct2")])
    assert result.exit_code == 2 and expected in result.output and not (tmp_path / "ct2").exists()
