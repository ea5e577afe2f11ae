"""T5 (``T5ForConditionalGeneration``) both ways: tiny random models built from configs (no download), saved with a
tiny T5-numbered sentencepiece model (pad 0, eos 1, unk 2, no bos) and the tokenizer transformers makes of it
(tokenizer.json with sentinel tokens, as published folders have, or spiece.model alone). Imported, the model's
logits are HF's within 1e-4 on every row, the run encodes as the folder's tokenizer does (the same ids, ``</s>``
after the source), ``tbuild decode`` gives HF's greedy output on that encoding, import → export → import is the
identity, and a T5 trained in tbuild exports to a folder that computes its logits."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.builder.spec import DecodeSpec
from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.hf import hf_search

from .test_import_hf import _assert_round_trip, _import, _loaded

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
sentencepiece = pytest.importorskip("sentencepiece")

PAD, EOS = 0, 1
PIECES, SENTINELS, ROWS = 40, 3, 48  # T5's table is larger than its tokenizer (32128 rows, 32100 tokens)
T5 = {"vocab_size": ROWS, "d_model": 16, "d_kv": 4, "d_ff": 32, "num_layers": 2, "num_decoder_layers": 2,
      "num_heads": 4, "relative_attention_num_buckets": 8, "relative_attention_max_distance": 20,
      "feed_forward_proj": "relu", "dropout_rate": 0.0, "pad_token_id": PAD, "eos_token_id": EOS,
      "decoder_start_token_id": PAD}
VARIANTS = {
    "t5 v1.0: relu, tied, output scaled": ({}, False),
    "t5 v1.1: gated-gelu, own output table (published config)": ({"feed_forward_proj": "gated-gelu"}, True),
    "gated-silu, one decoder layer": ({"feed_forward_proj": "gated-silu", "num_decoder_layers": 1}, False),
    "heads·d_kv wider than d_model, gelu_new": ({"d_kv": 8, "feed_forward_proj": "gelu_new"}, False),
    "tied without the output factor": ({"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}, False),
}


@pytest.fixture(scope="module")
def text() -> list[str]:
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 4))) for _ in range(40)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(200)]


@pytest.fixture(scope="module")
def spiece(text: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentencepiece model numbered as T5's: pad 0, eos 1, unk 2, no bos."""
    folder = tmp_path_factory.mktemp("spiece")
    (folder / "text.txt").write_text("\n".join(text))
    sentencepiece.SentencePieceTrainer.train(input=str(folder / "text.txt"), model_prefix=str(folder / "sp"),
                                             vocab_size=PIECES, pad_id=PAD, eos_id=EOS, unk_id=2, bos_id=-1,
                                             minloglevel=2)
    return folder / "sp.model"


def t5_folder(overrides: dict, spiece: Path, folder: Path, *, untied: bool = False, fast: bool = True):  # noqa: ANN201
    """A random T5ForConditionalGeneration in ``folder`` with spiece.model and (``fast``) the tokenizer.json
    transformers converts it to, with sentinel tokens; ``untied``: an output table of its own and config.json as
    published v1.1 folders have it (``tie_word_embeddings: false``)."""
    torch.manual_seed(0)
    hf = transformers.T5ForConditionalGeneration(transformers.T5Config(**(T5 | overrides)))
    if untied:
        hf.lm_head.weight = torch.nn.Parameter(hf.lm_head.weight.detach().clone())
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # every parameter off its init (norm gains ≠ 1)
        for p in hf.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
    hf.eval().save_pretrained(folder)
    if untied:
        config = json.loads((folder / "config.json").read_text())
        config.pop("scale_decoder_outputs", None)
        (folder / "config.json").write_text(json.dumps(config | {"tie_word_embeddings": False}))
    shutil.copyfile(spiece, folder / "spiece.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "T5Tokenizer",
                                                              "extra_ids": SENTINELS}))
    if fast:
        transformers.AutoTokenizer.from_pretrained(folder).save_pretrained(folder)
    return transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()


def _batch(rows: list[list[int]]) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


@pytest.mark.parametrize(("overrides", "untied"), VARIANTS.values(), ids=list(VARIANTS))
def test_t5_logits_match_hf_on_every_row(overrides: dict, untied: bool, spiece: Path, tmp_path: Path) -> None:
    hf = t5_folder(overrides, spiece, tmp_path / "hf", untied=untied)
    _import(tmp_path / "hf", tmp_path / "run")
    spec, model = _loaded(tmp_path / "run")
    assert spec.model.positional.kind == "bucketed" and spec.model.attention.scaled is False
    assert spec.model.tie_embeddings == ("none" if untied else "three_way")
    special = spec.special()
    assert (special.pad, special.eos, special.unk, special.bos, special.start) == (PAD, EOS, 2, None, PAD)
    g = torch.Generator().manual_seed(1)
    src = _batch([torch.randint(3, PIECES, (n,), generator=g).tolist() + [EOS] for n in (5, 11, 2)])
    tgt = _batch([[PAD] + torch.randint(3, PIECES, (n,), generator=g).tolist() for n in (7, 3, 9)])
    real = torch.tensor([[True] * n + [False] * (tgt.size(1) - n) for n in (8, 4, 10)])
    with torch.no_grad():
        ours = model(src, tgt, src.eq(PAD))  # the padding, as the rows' lengths tell it
        theirs = hf(input_ids=src, attention_mask=src.ne(PAD), decoder_input_ids=tgt).logits
    assert (ours - theirs)[real].abs().max().item() < 1e-4


@pytest.mark.parametrize("fast", [True, False], ids=["tokenizer.json with sentinels", "spiece.model alone"])
def test_decode_gives_hf_greedy_output_on_the_folder_s_own_encoding(fast: bool, spiece: Path, text: list[str],
                                                                     tmp_path: Path) -> None:
    hf = t5_folder({}, spiece, tmp_path / "hf", fast=fast)
    _import(tmp_path / "hf", tmp_path / "run")
    lines = text[:4]
    theirs_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    spec, _ = _loaded(tmp_path / "run")
    run_files = list((tmp_path / "run").iterdir())
    ours_tok = Tokenizer.load(next(p for p in run_files if p.name in ("spm.model", "tokenizer.json")), spec.special())
    encoded = [theirs_tok(line).input_ids for line in lines]
    assert [spec.special().wrap(ids) for ids in ours_tok.encode(lines)] == encoded  # the folder's ids, </s> added
    result = CliRunner().invoke(app, ["decode", str(tmp_path / "run"), "--beam", "1", "--alpha", "0",
                                      "--device", "cpu"], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    ours = [line for line in result.output.splitlines() if not line.startswith(("[", "decod", "note", "precision"))]
    request = DecodeSpec(beam=1, alpha=0.0, max_len_a=1.0, max_len_b=50)  # the imported spec's length limit
    theirs = [ours_tok.decode(h[0].tokens) for h in hf_search(hf, encoded, request, None, spec.special())]
    assert ours[-len(lines):] == theirs and any(theirs)


@pytest.mark.parametrize(("overrides", "untied"), [({}, False), ({"feed_forward_proj": "gated-gelu"}, True)],
                         ids=["v1.0", "v1.1"])
def test_import_export_import_is_the_identity(overrides: dict, untied: bool, spiece: Path, tmp_path: Path) -> None:
    t5_folder(overrides, spiece, tmp_path / "hf", untied=untied)
    _import(tmp_path / "hf", tmp_path / "run")
    _assert_round_trip(tmp_path)
    again = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "again")
    assert (again.lm_head.weight.data_ptr() == again.shared.weight.data_ptr()) is not untied


def test_a_t5_trained_in_tbuild_exports_with_its_logits(tmp_path: Path) -> None:
    """A spec with the bucketed bias and scaled attention (the paper's): the export folds 1/√d_k into W^Q and
    d_model^-0.5 of the tied output into the decoder's last norm; the folder computes tbuild's logits."""
    from tbuild.builder import build_model, load_spec
    from tbuild.engine.hf.writer import to_hf
    from tests.conftest import TINY

    spec = load_spec(TINY, ["model.positional={kind: bucketed, buckets: 8, max_distance: 12}",
                            "model.norm={kind: rmsnorm, eps: 1.0e-6}", "model.norm_placement=pre",
                            "model.scale_embeddings=false", "model.attention={kind: multihead, bias: false}",
                            "model.cross_attention={kind: multihead, bias: false}",
                            "model.ffn={kind: relu, bias: false}", f"model.vocab_size={ROWS}"]).spec
    model = build_model(spec).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(torch.rand(p.shape))
    hf = to_hf(model, spec, "t5")
    src, tgt = torch.tensor([[5, 9, 12, 7, 30, 3]]), torch.tensor([[2, 8, 6, 11, 9, 9, 9]])
    with torch.no_grad():
        assert (model(src, tgt) - hf(input_ids=src, decoder_input_ids=tgt).logits).abs().max().item() < 1e-4


def test_an_untied_run_whose_two_tables_differ_is_refused_at_export() -> None:
    """T5 reads one ``shared`` table in both stacks: an imported v1.1 (tie_embeddings none) exports while its
    source and target tables are one, and is refused in one line once they differ."""
    from tbuild.builder import build_model, load_spec
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.hf.writer import to_hf
    from tests.conftest import TINY

    spec = load_spec(TINY, ["model.positional={kind: bucketed, buckets: 8, max_distance: 12}",
                            "model.norm={kind: rmsnorm}", "model.norm_placement=pre", "model.scale_embeddings=false",
                            "model.attention={kind: multihead, bias: false}", "model.tie_embeddings=none",
                            "model.cross_attention={kind: multihead, bias: false}",
                            "model.ffn={kind: geglu}"]).spec
    model = build_model(spec).eval()
    with torch.no_grad():
        model.tgt_embed.tokens.weight.copy_(model.src_embed.tokens.weight)
    hf = to_hf(model, spec, "t5")
    assert hf.lm_head.weight.data_ptr() != hf.shared.weight.data_ptr()  # its own output table
    assert torch.equal(hf.lm_head.weight, model.output.weight)
    with torch.no_grad():
        model.tgt_embed.tokens.weight.add_(1.0)
    with pytest.raises(TbuildError, match="src_embed and tgt_embed differ"):
        to_hf(model, spec, "t5")


@pytest.mark.parametrize(("sets", "expected"), [
    (["model.ffn.bias=true"], "encoder ffn relu with biases"),
    (["model.tie_embeddings=decoder"], "tie_embeddings decoder"),
    (["model.norm={kind: layernorm}"], "norms layernorm"),
], ids=["ffn biases", "decoder tying", "layernorm"])
def test_what_t5_cannot_hold_is_refused_in_one_line(sets: list[str], expected: str) -> None:
    from tbuild.builder import load_spec
    from tbuild.engine.export.targets import HF, UnsupportedExport, check_exportable
    from tests.conftest import TINY

    base = ["model.positional={kind: bucketed}", "model.norm={kind: rmsnorm}", "model.norm_placement=pre",
            "model.scale_embeddings=false", "model.attention={kind: multihead, bias: false}",
            "model.cross_attention={kind: multihead, bias: false}", "model.ffn={kind: relu, bias: false}"]
    check_exportable(load_spec(TINY, base).spec, HF)  # the base exports
    with pytest.raises(UnsupportedExport, match=expected):
        check_exportable(load_spec(TINY, base + sets).spec, HF)


def test_ctranslate2_and_unscaled_elsewhere_are_refused_in_one_line(spiece: Path, tmp_path: Path) -> None:
    t5_folder({}, spiece, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "ct2")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "scaled false" in result.output and not (tmp_path / "ct2").exists()


def test_an_activation_tbuild_has_no_kind_for_is_one_line(spiece: Path, tmp_path: Path) -> None:
    t5_folder({"feed_forward_proj": "gated-relu"}, spiece, tmp_path / "hf")
    result = CliRunner().invoke(app, ["import", "hf", str(tmp_path / "hf"), "-o", str(tmp_path / "run")])
    assert result.exit_code == 2 and "config.json feed_forward_proj 'gated-relu'" in result.output
    assert not (tmp_path / "run").exists()
