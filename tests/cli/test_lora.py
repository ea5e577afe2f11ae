"""LoRA adapters in the spec (train.adapters) through the CLI: a tiny base, adapters trained on it (the
base frozen, the run folder holding the adapters only), exact resume, tbuild merge, decode and evaluate on
the adapter run and the merged one, and the one-line refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

from tbuild.builder import build_model
from tbuild.cli.app import app
from tbuild.engine.run.adapters import BASE_FILE
from tbuild.engine.run.checkpoint import read_checkpoint
from tbuild.engine.run.directory import resolve_run
from tbuild.engine.run.weights import load_weights
from tbuild.engine.start.values import Initial, Patch
from tests.conftest import tiny_train_spec

runner = CliRunner()
LORA = {"kind": "lora", "r": 4, "alpha": 8, "dropout": 0.1, "targets": ["attention", "*.ffn.sublayer.w2"]}
TEXT = "A dog runs in the park.\nTwo men play football.\n"


def _spec(tmp_path: Path, corpus: Path, base: Path, name: str = "lora", **train: object) -> Path:
    spec = tiny_train_spec(corpus, tmp_path / name, **{"max_steps": 6, "checkpoint_every": 3, "validate_every": 3,
                                                        "schedule": {"kind": "inverse_sqrt", "lr": 1e-2, "warmup": 2},
                                                        **train})
    spec["model"]["max_positions"] = 40  # the base's (tiny_run)
    spec["decode"] = {"beam": 3, "max_len_a": 1.0, "max_len_b": 5}
    spec["train"]["init"] = {"from": str(base)}
    spec["train"]["adapters"] = LORA
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def base(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tiny trained run (these tests change it)."""
    root = tmp_path_factory.mktemp("base")
    shutil.copytree(tiny_run, root / "run")
    return root / "run"


@pytest.fixture(scope="module")
def adapted(base: Path, tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lora")
    result = runner.invoke(app, ["train", str(_spec(root, tiny_corpus, base))])
    assert result.exit_code == 0, result.output
    assert "train.adapters: lora r=4 alpha=8 on 14 modules (28 tensors" in result.output
    return root / "lora"


def test_the_run_holds_the_adapters_only_and_the_base_is_untouched(adapted: Path, base: Path) -> None:
    tensors, meta = read_checkpoint(adapted / "checkpoints" / "step_00000006.safetensors")
    model = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    assert len(model) == 28 and all(".lora_A." in k or ".lora_B." in k for k in model)
    assert sorted(meta["param_names"]) == sorted(model)  # what the optimizer trains: the adapters alone
    assert any(k.startswith("optim.") for k in tensors)
    assert set(load_file(adapted / "best.safetensors")) <= {f"model.{k}" for k in model}
    assert all(v.abs().sum() > 0 for k, v in model.items() if "lora_B" in k)  # trained away from zero
    record = json.loads((adapted / BASE_FILE).read_text())
    assert record["base"]["run"] == str(base.resolve()) and len(record["base"]["sha256"]) == 64
    assert record["base"]["weights"] == [str((base / "best.safetensors").resolve())]

    # The model the run stands for: the base's tensors bit for bit, except the adapted weights.
    run = resolve_run(adapted)
    merged = build_model(run.spec)
    load_weights(merged, run)
    base_weights = {k[len("model."):]: v for k, v in load_file(base / "best.safetensors").items()}
    adapted_weights = {f"{m}.weight" for m in record["lora"]["modules"]}
    for name, value in merged.state_dict().items():
        if name in base_weights:
            same = torch.equal(value, base_weights[name])
            assert same != (name in adapted_weights), name


def test_merged_equals_the_adapted_model(adapted: Path) -> None:
    """The LoRA model (base + A, B; unmerged) and the plain one with W + (α/r)·B A agree within 1e-5."""
    run = resolve_run(adapted)
    record = json.loads((adapted / BASE_FILE).read_text())
    from tbuild.engine.run.adapters import adapters_of, base_tensors

    tensors = base_tensors(record)
    lora = build_model(run.spec)
    Initial({n: Patch(tensors[n]) for n, _ in lora.named_parameters()}, adapters=adapters_of(record)).apply(lora)
    step_6 = read_checkpoint(adapted / "checkpoints" / "step_00000006.safetensors")[0]
    saved = {k[len("model."):]: v for k, v in step_6.items() if k.startswith("model.")}
    lora.load_state_dict(saved, strict=False)
    merged = build_model(run.spec)
    load_weights(merged, run, checkpoint=adapted / "checkpoints" / "step_00000006.safetensors")
    src, tgt = torch.randint(4, 200, (3, 9)), torch.randint(4, 200, (3, 7))
    with torch.no_grad():
        lora.eval(), merged.eval()
        assert torch.allclose(lora(src, tgt), merged(src, tgt), atol=1e-5)


def test_resume_is_exact(base: Path, adapted: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path, tiny_corpus, base, "split")
    first = runner.invoke(app, ["train", str(spec), "--set", "train.max_steps=3"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["train", str(spec)])
    assert second.exit_code == 0, second.output
    assert "resumed from step_00000003" in second.output
    whole = load_file(adapted / "checkpoints" / "step_00000006.safetensors")
    split = load_file(tmp_path / "split" / "checkpoints" / "step_00000006.safetensors")
    assert whole.keys() == split.keys()
    assert all(torch.equal(whole[k], split[k]) for k in whole if k.startswith(("model.", "optim.")))


def test_merge_then_decode_and_evaluate_both(adapted: Path, tmp_path: Path) -> None:
    out = tmp_path / "merged"
    merged = runner.invoke(app, ["merge", str(adapted), "-o", str(out)])
    assert merged.exit_code == 0, merged.output
    weights = load_file(out / "best.safetensors")
    assert not any("lora_" in k for k in weights) and "model.encoder.0.self_attn.sublayer.w_q.weight" in weights
    spec = yaml.safe_load((out / "spec.yaml").read_text())
    assert spec["train"]["adapters"] is None and spec["train"]["init"] is None
    by_adapters = runner.invoke(app, ["decode", str(adapted)], input=TEXT)
    by_merged = runner.invoke(app, ["decode", str(out)], input=TEXT)
    assert by_adapters.exit_code == 0 and by_merged.exit_code == 0, by_adapters.output + by_merged.output
    assert by_adapters.stdout == by_merged.stdout and len(by_merged.stdout.splitlines()) == 2
    for run in (adapted, out):
        scored = runner.invoke(app, ["evaluate", str(run), "--split", "test"])
        assert scored.exit_code == 0, scored.output
    again = runner.invoke(app, ["merge", str(adapted), "-o", str(out)])
    assert again.exit_code == 2 and "not an empty folder" in again.output
    plain = runner.invoke(app, ["merge", str(out), "-o", str(tmp_path / "again")])
    assert plain.exit_code == 2 and "not an adapter run" in plain.output


@pytest.mark.parametrize(("adapters", "expected"), [
    ({"targets": ["attention", "*.w_nope"]}, "train.adapters.targets: '*.w_nope' matches no linear module"),
    ({"targets": ["nosuch"]}, "train.adapters.targets: 'nosuch' matches no linear module"),
    ({"r": 33}, "train.adapters.r 33: above the width of encoder.0.self_attn.sublayer.w_q (32 -> 32), which "
                "bounds the rank of its update B A; set r <= 32"),
])
def test_adapters_that_fit_no_module_are_one_line_before_anything_is_written(
        base: Path, tiny_corpus: Path, tmp_path: Path, adapters: dict, expected: str) -> None:
    """A target matching nothing, or a rank above an adapted layer's width (d_model 32 here): one line, and no
    run folder (no tokenizer, lock or prepared data) made."""
    spec = _spec(tmp_path, tiny_corpus, base)
    data = yaml.safe_load(spec.read_text())
    data["train"]["adapters"] |= adapters
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["train", str(spec)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"error: {expected}")
    assert not (tmp_path / "lora").exists()
    if "r" in adapters:  # the widest rank the layers allow trains
        assert runner.invoke(app, ["train", str(spec), "--set", "train.adapters.r=32", "--set",
                                   "train.adapters.targets=[attention]", "--set", "train.max_steps=1"]).exit_code == 0


def test_a_model_other_than_the_bases_leaves_no_run_folder(base: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    """Refused once the base's tokenizer and the data are in (the fitted model is compared): the new run's folder
    goes with the refusal, so the spec put right trains (its stale spec.yaml would refuse it as a change)."""
    spec = _spec(tmp_path, tiny_corpus, base, max_steps=1)
    result = runner.invoke(app, ["train", str(spec), "--set", "model.encoder.d_ff=48"])
    assert result.exit_code == 2 and "train.adapters: the model section must be its base's" in result.output
    assert not (tmp_path / "lora").exists()
    assert runner.invoke(app, ["train", str(spec)]).exit_code == 0


@pytest.mark.parametrize(("init", "expected"), [
    (None, "set train.init.from"),
    ({"vocab": "remap"}, "train.init.vocab remap"),
])
def test_spec_refusals(base: Path, tiny_corpus: Path, tmp_path: Path, init: dict | None, expected: str) -> None:
    spec = _spec(tmp_path, tiny_corpus, base)
    data = yaml.safe_load(spec.read_text())
    data["train"]["init"] = None if init is None else {"from": str(base), **init}
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code != 0 and expected in result.output and "adapters" in result.output, result.output


def test_a_changed_base_is_refused(base: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    own = tmp_path / "base"
    shutil.copytree(base, own)
    spec = _spec(tmp_path, tiny_corpus, own, "short", max_steps=2, checkpoint_every=None, validate_every=100)
    assert runner.invoke(app, ["train", str(spec)]).exit_code == 0
    shutil.copyfile(own / "checkpoints" / "step_00000010.safetensors", own / "best.safetensors")  # the base moved on
    result = runner.invoke(app, ["decode", str(tmp_path / "short")], input=TEXT)
    assert result.exit_code == 2 and "changed since they were trained on it" in result.output, result.output
    resumed = runner.invoke(app, ["train", str(spec), "--set", "train.max_steps=3"])
    assert resumed.exit_code == 2 and "changed since they were trained on it" in resumed.output


def test_peft_loads_the_adapters(adapted: Path, tmp_path: Path) -> None:
    """tbuild merge --peft: adapter_config.json and adapter_model.safetensors that peft loads onto the HF
    model of the base's shape (Marian), each tensor where tbuild's names map it."""
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    result = runner.invoke(app, ["merge", str(adapted), "-o", str(tmp_path / "merged"), "--peft", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert "peft: 14 adapted modules" in result.output
    config = transformers.MarianConfig(vocab_size=200, d_model=32, encoder_layers=1, decoder_layers=1,
                                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                       decoder_ffn_dim=64, pad_token_id=0, decoder_start_token_id=0)
    loaded = peft.PeftModel.from_pretrained(transformers.MarianMTModel(config), str(tmp_path / "p"))
    ours = load_file(adapted / "best.safetensors")
    state = loaded.state_dict()
    pairs = {"model.encoder.layers.0.self_attn.q_proj": "encoder.0.self_attn.sublayer.w_q",
             "model.decoder.layers.0.encoder_attn.v_proj": "decoder.0.cross_attn.sublayer.w_v",
             "model.decoder.layers.0.fc2": "decoder.0.ffn.sublayer.w2"}
    for hf, mine in pairs.items():
        for part in ("lora_A", "lora_B"):
            theirs = state[f"base_model.model.{hf}.{part}.default.weight"]
            assert torch.equal(theirs, ours[f"model.{mine}.{part}.weight"])
    assert loaded.peft_config["default"].r == 4 and loaded.peft_config["default"].lora_alpha == 8
    assert loaded.peft_config["default"].task_type == "SEQ_2_SEQ_LM"  # the translation task's (Task.peft_type)
