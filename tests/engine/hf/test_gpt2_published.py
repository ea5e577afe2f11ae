"""A GPT-2 folder numbered as GPT-2 is published (no download): a byte-level BPE tokenizer.json whose one special
token, ``<|endoftext|>``, is its last id and serves as BOS, EOS and UNK, no PAD, and ``gelu_new``. The import
keeps the folder's ids (its record: bos, eos and unk that token, no pad; nothing renumbered, no row added):
logits and log-probabilities are HF's on every row, `tbuild generate` gives HF's greedy text, `tbuild evaluate`
HF's perplexity, and a label-smoothed fine-tune from it trains. The exports (CTranslate2, hf) hold the same
rows: the hf folder loads with AutoTokenizer and AutoModelForCausalLM, computes the published model's logits and
greedy text in the published ids, and imports back to the same run. So does Llama 3's layout (a begin and an end
token after the pieces, no PAD or UNK)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

from .test_import_hf import GPT2, LLAMA, _assert_round_trip, _import, _loaded, _perturbed

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

runner = CliRunner()
LINES = ["the cat sat on the mat", "a dog ran in the park", "Zwei Hunde spielen im Schnee", "über den Fluss"]
END = "<|endoftext|>"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - (root, HF model, tokenizer, END's id)
    root = tmp_path_factory.mktemp("gpt2")
    folder = root / "hf"
    folder.mkdir()
    tk = _byte_level(folder, [END])  # the last id, as GPT-2's 50256
    end = tk.token_to_id(END)
    assert end == tk.get_vocab_size() - 1
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": END, "eos_token": END, "unk_token": END}))
    config = {k: v for k, v in GPT2.items() if k != "pad_token_id"} | {
        "vocab_size": end + 1, "bos_token_id": end, "eos_token_id": end, "activation_function": "gelu_new",
        "n_positions": 64}
    torch.manual_seed(0)
    hf = _perturbed(transformers.GPT2LMHeadModel(transformers.GPT2Config(**config)))
    hf.save_pretrained(folder)
    assert "decoder_only" in _import(folder, root / "run")
    (root / "test.txt").write_text("\n".join(LINES) + "\n")
    return root, hf, tk, end


def _byte_level(folder: Path, specials: list[str]) -> tokenizers.Tokenizer:
    """A byte-level BPE trained on LINES with ``specials`` added after its pieces (GPT-2's and Llama 3's layout)."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tk = tokenizers.Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(LINES * 20, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.add_special_tokens(specials)
    tk.save(str(folder / "tokenizer.json"))
    return tk


def test_the_import_keeps_the_folder_s_ids_and_scores_as_hf(published) -> None:  # noqa: ANN001
    root, hf, tk, end = published
    spec, model = _loaded(root / "run")
    special = spec.special()
    assert spec.model.vocab_size == end + 1 and spec.model.ffn.kind == "gelu_tanh"  # no row added
    assert (special.pad, special.unk, special.bos, special.eos) == (None, end, end, end)
    assert special.source == ("text",) and special.start == end and special.never == ()  # GPT-2 adds nothing
    text = tk.encode(LINES[2], add_special_tokens=False).ids
    with torch.no_grad():
        ours = model.decode(torch.tensor([[end, *text]]))  # the folder's ids, as they are
        theirs = hf(input_ids=torch.tensor([[end, *text]])).logits
    assert (ours - theirs).abs().max().item() < 1e-4
    assert (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item() < 1e-4


def test_generate_and_evaluate_give_hf_text_and_perplexity(published) -> None:  # noqa: ANN001
    root, hf, tk, end = published
    prompts = ["the cat", "Zwei"]
    result = runner.invoke(app, ["generate", str(root / "run"), "--beam", "1", "--max-new-tokens", "6",
                                 "--device", "cpu"], input="\n".join(prompts) + "\n")
    assert result.exit_code == 0, result.output
    for prompt, line in zip(prompts, result.output.rstrip("\n").split("\n")[-2:], strict=True):
        ids = tk.encode(prompt).ids  # the tokenizer's own encoding: no BOS in front (GPT-2 adds none)
        assert end not in ids
        out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=6,
                          eos_token_id=end, pad_token_id=end)[0].tolist()
        assert len(out) > len(ids) and line == tk.decode([i for i in out if i != end])  # the prompt and more
    result = runner.invoke(app, ["evaluate", str(root / "run"), "--split", "test", "--set",
                                 f"data.test={root / 'test.txt'}", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    nll = n = 0.0
    for line in LINES:  # HF's perplexity of each line and its end, from END
        ids = [end, *tk.encode(line, add_special_tokens=False).ids, end]
        with torch.no_grad():
            lp = hf(input_ids=torch.tensor([ids[:-1]])).logits.log_softmax(-1)[0]
        nll -= lp.gather(-1, torch.tensor(ids[1:])[:, None]).sum().item()
        n += len(ids) - 1
    scored = json.loads((root / "run" / "eval_test.json").read_text())
    assert scored["tokens"] == n and scored["perplexity"] == pytest.approx(math.exp(nll / n), rel=1e-4)


def test_a_label_smoothed_fine_tune_from_it_trains(published, tmp_path: Path) -> None:  # noqa: ANN001
    root, _, _, _ = published
    spec = yaml.safe_load((root / "run" / "spec.yaml").read_text())
    spec |= {"name": "tuned", "output_dir": str(tmp_path / "tuned")}
    spec["data"] |= {"train": str(root / "test.txt"), "valid": str(root / "test.txt")}
    spec["train"] = {"max_steps": 3, "validate_every": 3, "log_every": 1, "threads": 1, "precision": "fp32",
                     "batch_tokens": 64, "label_smoothing": 0.1, "init": {"from": str(root / "run")}}
    (tmp_path / "tuned.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "tuned.yaml")])
    assert result.exit_code == 0, result.output
    logged = [json.loads(line) for line in (tmp_path / "tuned" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in logged if "loss" in r]
    assert len(losses) >= 3 and all(math.isfinite(x) for x in losses)


def test_export_to_ctranslate2_holds_the_run_s_rows(published, tmp_path: Path) -> None:  # noqa: ANN001
    """The parity check finds the run's logits and greedy text in CTranslate2's Generator."""
    root, _, _, _ = published
    pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")
    result = runner.invoke(app, ["export", str(root / "run"), "--to", "ctranslate2", "-o", str(tmp_path / "ct2"),
                                 "--set", f"data.valid={root / 'test.txt'}"])
    assert result.exit_code == 0, result.output
    report = json.loads(next((tmp_path / "ct2").glob("*parity*.json")).read_text())
    assert report["max_logit_diff"] < 1e-4 and report["identical"] == 1.0 and report["outputs"] == len(LINES)


def _exported(run: Path, out: Path, valid: Path) -> dict:
    """`tbuild export RUN --to hf` with its parity check on ``valid``: the report."""
    result = runner.invoke(app, ["export", str(run), "--to", "hf", "-o", str(out), "--set", f"data.valid={valid}"])
    assert result.exit_code == 0, result.output
    return json.loads((out / "graph-parity.json").read_text())


def test_export_to_hf_is_the_published_model(published, tmp_path: Path) -> None:  # noqa: ANN001
    """The folder has the published ids (bos and eos <|endoftext|>, no pad): AutoTokenizer encodes as the published
    tokenizer, and AutoModelForCausalLM gives the published model's logits and greedy tokens."""
    root, hf, tk, end = published
    report = _exported(root / "run", tmp_path / "hf", root / "test.txt")
    assert report["max_logit_diff"] < 1e-4 and report["identical"] == 1.0 and report["outputs"] == len(LINES)
    assert report["encoded_differently"] == 0  # the prompts through the folder's own AutoTokenizer
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["vocab_size"] == end + 1 and config["bos_token_id"] == config["eos_token_id"] == end
    assert config.get("pad_token_id") is None
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ours = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf")).eval()
    for line in LINES:
        ids = tok(line)["input_ids"]
        assert ids == tk.encode(line, add_special_tokens=False).ids
        with torch.no_grad():
            theirs = hf(input_ids=torch.tensor([[end, *ids]])).logits
            assert (ours(input_ids=torch.tensor([[end, *ids]])).logits - theirs).abs().max() < 1e-4
        prompt = torch.tensor([[end, *ids[:3]]])
        out = ours.generate(prompt, max_new_tokens=8, do_sample=False)[0]
        assert out.tolist() == hf.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=end)[0].tolist()


def test_export_to_hf_imports_back_to_the_same_run(published, tmp_path: Path) -> None:  # noqa: ANN001
    root, _, _, _ = published
    (tmp_path / "run").symlink_to(root / "run")
    _assert_round_trip(tmp_path)
    first, again = (yaml.safe_load((tmp_path / r / "spec.yaml").read_text())["model"] for r in ("run", "run2"))
    assert first == again and (tmp_path / "run2" / "tokenizer.json").read_bytes() == (
        root / "run" / "tokenizer.json").read_bytes()


@pytest.fixture(scope="module")
def llama3(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - (root, HF model, tokenizer, begin, end)
    """Llama 3's numbering: a byte-level BPE with <|begin_of_text|> and <|end_of_text|> after its pieces, no PAD
    or UNK, its RoPE scaling, an untied output; imported into root/run."""
    root = tmp_path_factory.mktemp("llama3")
    folder = root / "hf"
    folder.mkdir()
    tk = _byte_level(folder, ["<|begin_of_text|>", "<|end_of_text|>"])
    begin, end = tk.token_to_id("<|begin_of_text|>"), tk.token_to_id("<|end_of_text|>")
    tk.post_processor = tokenizers.processors.TemplateProcessing(  # as published: BOS before every sequence
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", begin)])
    tk.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|begin_of_text|>",
                                                              "eos_token": "<|end_of_text|>"}))
    config = {k: v for k, v in LLAMA.items() if k != "pad_token_id"} | {
        "vocab_size": end + 1, "bos_token_id": begin, "eos_token_id": end, "max_position_embeddings": 64,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}
    torch.manual_seed(0)
    hf = _perturbed(transformers.LlamaForCausalLM(transformers.LlamaConfig(**config)))
    hf.save_pretrained(folder)
    _import(folder, root / "run")
    (root / "test.txt").write_text("\n".join(LINES) + "\n")
    return root, hf, tk, begin, end


def test_a_llama_3_layout_imports_in_its_own_ids(llama3) -> None:  # noqa: ANN001
    """BOS and EOS are the folder's tokens, PAD and UNK none; logits and log-probabilities are HF's on every row,
    and `tbuild generate` gives HF's greedy text."""
    root, hf, tk, begin, end = llama3
    spec, model = _loaded(root / "run")
    special = spec.special()
    assert (special.pad, special.unk, special.bos, special.eos) == (None, None, begin, end)
    assert spec.model.vocab_size == end + 1 and spec.model.positional.scaling.kind == "llama3"
    text = tk.encode(LINES[0], add_special_tokens=False).ids
    with torch.no_grad():
        ours = model.decode(torch.tensor([[begin, *text]]))
        theirs = hf(input_ids=torch.tensor([[begin, *text]])).logits
    assert (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item() < 1e-4
    result = runner.invoke(app, ["generate", str(root / "run"), "--beam", "1", "--max-new-tokens", "6",
                                 "--device", "cpu"], input="the cat\n")
    assert result.exit_code == 0, result.output
    ids = tk.encode("the cat").ids  # the tokenizer's own encoding: its post-processor puts BOS first
    assert ids[0] == begin and special.source == ("bos", "text")
    out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=6,
                      eos_token_id=end, pad_token_id=end)[0].tolist()
    ours = result.output.rstrip("\n").split("\n")[-1]  # not splitlines: random bytes may hold \x1d
    assert ours == tk.decode([i for i in out if i not in (begin, end)])


def test_a_llama_3_layout_exports_to_hf_in_its_own_ids(llama3, tmp_path: Path) -> None:  # noqa: ANN001
    """The folder's ids are the published ones: its logits are the published model's on every row, its greedy
    tokens too, and it imports back to the same run."""
    root, hf, tk, begin, end = llama3
    report = _exported(root / "run", tmp_path / "hf", root / "test.txt")
    assert report["max_logit_diff"] < 1e-4 and report["identical"] == 1.0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"], config.get("pad_token_id")) == (begin, end, None)
    ours = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf")).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ids = tok(LINES[0])["input_ids"]
    assert ids == tk.encode(LINES[0]).ids and ids[0] == begin  # the published tokenizer's encoding, BOS first
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor([ids])).logits
        assert (ours(input_ids=torch.tensor([ids])).logits - theirs).abs().max() < 1e-4
    prompt = torch.tensor([ids[:4]])
    out = ours.generate(prompt, max_new_tokens=8, do_sample=False)[0]
    expected = hf.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=end)[0]
    assert out.tolist() == expected.tolist()
    (tmp_path / "run").symlink_to(root / "run")
    _assert_round_trip(tmp_path)


def test_an_hf_export_whose_tokenizer_encodes_otherwise_fails_its_parity(published, tmp_path: Path,  # noqa: ANN001
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The parity check encodes the prompts with the folder's own tokenizer: one that puts <|endoftext|> first,
    which the run does not, fails it in one line (the folder kept to inspect)."""
    import tbuild.engine.hf.tokenizer as written

    root, _, _, end = published

    def bos_first(tok, out: Path) -> None:  # noqa: ANN001
        tk = tokenizers.Tokenizer.from_file(str(tok.path))
        tk.post_processor = tokenizers.processors.TemplateProcessing(single=f"{END} $A", special_tokens=[(END, end)])
        tk.save(str(out))

    monkeypatch.setattr(written, "_with_source_template", bos_first)
    result = runner.invoke(app, ["export", str(root / "run"), "--to", "hf", "-o", str(tmp_path / "hf"), "--set",
                                 f"data.valid={root / 'test.txt'}"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(
        f"error: parity failed: the export's own tokenizer encodes {len(LINES)} of {len(LINES)} prompts otherwise")
