"""The CTranslate2 decoding engine: same lines as the native engine, and its export cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tbuild.engine.decoding.request import DecodeRequest, Hooks
from tbuild.engine.errors import TbuildError
from tbuild.engine.export.engines import load_engine
from tbuild.engine.run.directory import resolve_run

pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")

LINES = ["A man is riding a bike.", "", "Two dogs play in the snow.", " ".join(["word"] * 200), "A cat."]


@pytest.fixture()
def run_copy(tiny_run: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny run, so that its exports do not leak into other tests."""
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def _texts(engine, lines: list[str], spec) -> tuple[list[str], list[str]]:  # noqa: ANN001
    warnings: list[str] = []
    hyps = engine.translate(lines, DecodeRequest.of(spec), Hooks(warn=warnings.append))
    return [engine.tokenizer.decode(h[0].tokens) if h else "" for h in hyps], warnings


def test_same_lines_as_native(run_copy: Path) -> None:
    run = resolve_run(run_copy, ["decode.beam=1"])
    native, ct2 = load_engine(run, "native", device="cpu"), load_engine(run, "ctranslate2", device="cpu")
    ours, our_warnings = _texts(native, LINES, run.spec.decode)
    theirs, their_warnings = _texts(ct2, LINES, run.spec.decode)
    assert theirs == ours and theirs[1] == "" and all(theirs[i] for i in (0, 2, 3, 4))
    assert their_warnings == our_warnings and len(ours) == 5
    assert [w.split(":")[0] for w in their_warnings] == ["line 4"] and "limit of 40; truncated" in their_warnings[0]
    assert ct2.name == "ctranslate2" and ct2.precision == "float32 (cpu)" and ct2.weights == native.weights


def test_nbest_ranked_by_tbuild_score(run_copy: Path) -> None:
    run = resolve_run(run_copy, ["decode.nbest=3"])  # beam 3
    hyps = load_engine(run, "ctranslate2", device="cpu").translate(LINES, DecodeRequest.of(run.spec.decode))
    assert [len(h) for h in hyps] == [3, 0, 3, 3, 3]
    for h in hyps:
        assert [x.score for x in h] == sorted((x.score for x in h), reverse=True)


def test_export_is_cached_and_refreshed(run_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.engine.export import ctranslate2 as exporter

    calls, messages = [], []
    real = exporter.export_run

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(kwargs.get("checkpoint"))
        return real(*args, **kwargs)

    monkeypatch.setattr(exporter, "export_run", counting)
    run = resolve_run(run_copy)
    first = load_engine(run, "ctranslate2", device="cpu", notify=messages.append)
    load_engine(run, "ctranslate2", device="cpu", notify=messages.append)
    assert len(calls) == 1 and (run_copy / "ctranslate2-float32" / "tbuild-export.json").exists()
    assert messages == [f"exporting to {run_copy / 'ctranslate2-float32'} (first use; cached for later runs)"]
    step10 = run_copy / "checkpoints" / "step_00000010.safetensors"
    other = load_engine(run, "ctranslate2", checkpoint=step10, device="cpu", notify=messages.append)
    assert len(calls) == 2 and other.weights == step10.name != first.weights
    assert messages[-1] == f"{run_copy / 'ctranslate2-float32'}: exported from other weights; exporting again"
    (run_copy / "best.safetensors").touch()  # the same path, new weights: the default is re-exported
    load_engine(run, "ctranslate2", device="cpu")
    load_engine(run, "ctranslate2", quantization="int8", device="cpu")  # a folder of its own
    assert len(calls) == 4 and (run_copy / "ctranslate2-int8" / "model.bin").exists()
    assert not list(run_copy.glob(".ctranslate2-*"))  # no temporary folders left


def test_bad_options(run_copy: Path) -> None:
    run = resolve_run(run_copy)
    with pytest.raises(TbuildError, match="native engine supports float32 or int8"):
        load_engine(run, "native", quantization="int16")
    with pytest.raises(TbuildError, match="--engine 'onnx'"):
        load_engine(run, "onnx")
    with pytest.raises(TbuildError, match="--quantization 'int4'"):
        load_engine(run, "ctranslate2", quantization="int4", device="cpu")



def _ids(lines: list[str], tokenizer) -> list[list[int]]:  # noqa: ANN001
    return [ids + [3] for ids in tokenizer.encode(lines)]  # ids ending with EOS, as the engine's sources


def test_batched_rows_keep_their_own_length_limits(run_copy: Path) -> None:
    """Each row of a batch gets exactly what it gets decoded alone at its own limit (the tiny model
    never says EOS, so every row reaches its limit and runs again at it)."""
    from tbuild.engine.decoding.ct2 import ct2_search

    run = resolve_run(run_copy, ["decode.nbest=3", "decode.max_len_b=3"])  # beam 3, limits |X| + 3
    engine = load_engine(run, "ctranslate2", device="cpu")
    sources = _ids(["A man.", "A man is riding a bike down the street.", "Two dogs play.", "Hi"], engine.tokenizer)
    together = ct2_search(engine.ct2, engine.tokenizer, sources, DecodeRequest.of(run.spec.decode), None)
    alone = [ct2_search(engine.ct2, engine.tokenizer, [s], DecodeRequest.of(run.spec.decode), None)[0] for s in sources]
    assert [[h.tokens for h in hyps] for hyps in together] == [[h.tokens for h in hyps] for hyps in alone]
    assert [h.score for hyps in together for h in hyps] == \
        pytest.approx([h.score for hyps in alone for h in hyps], abs=1e-4)  # a padded batch vs one sentence
    assert len({len(hyps[0].tokens) for hyps in together}) == 4  # four different limits


def test_one_runtime_call_per_batch_unless_a_row_reaches_its_limit(run_copy: Path) -> None:
    """With a stand-in runtime whose search ends after a set number of tokens (or at its limit): rows
    that end below their own limit take the batch call's result; only the others (not the one whose
    limit the batch ran at) run again, one call per limit."""
    from types import SimpleNamespace

    from tbuild.engine.decoding.ct2 import ct2_search

    run = resolve_run(run_copy, ["decode.nbest=3", "decode.max_len_a=1", "decode.max_len_b=2"])  # |Y| <= |X| + 2
    engine = load_engine(run, "ctranslate2", device="cpu")
    calls: list[int] = []

    def runtime(natural):  # noqa: ANN001, ANN202
        def translate_batch(pieces, *, max_decoding_length, **_):  # noqa: ANN001, ANN003, ANN202
            calls.append(max_decoding_length)
            out = []
            for p in pieces:
                ends = [min(natural(len(p)) + k, max_decoding_length) for k in range(3)]
                out.append(SimpleNamespace(hypotheses=[p[:1] * n for n in ends], scores=[-0.5 * n for n in ends]))
            return out
        return SimpleNamespace(translate_batch=translate_batch)

    lines = ["A cat.", "Two dogs play in the snow.", "A man is riding a bike down the long and winding street."]
    sources = _ids(lines, engine.tokenizer)
    limits = [len(s) + 2 for s in sources]
    assert len(set(limits)) == 3
    ct2_search(runtime(lambda n: n // 2), engine.tokenizer, sources, DecodeRequest.of(run.spec.decode), None)
    assert calls == [max(limits) - 1]  # every row ended below its limit: one call
    calls.clear()
    ct2_search(runtime(lambda n: n + 1), engine.tokenizer, sources, DecodeRequest.of(run.spec.decode), None)
    assert sorted(calls) == sorted(limit - 1 for limit in limits)  # the batch at the top limit, then the two others


def test_greedy_token_log_probs_equal_native(run_copy: Path) -> None:
    """Greedy: CTranslate2's per-step logits give each token's log-probability (EOS last), as the native
    search's; its beam search returns no logits, so none there."""
    run = resolve_run(run_copy, ["decode.beam=1"])
    lines = ["A man is riding a bike.", "Two dogs play in the snow."]
    jsonl = DecodeRequest.of(run.spec.decode, format="jsonl")  # with each token's log-probability
    native = load_engine(run, "native", device="cpu").translate(lines, jsonl)
    theirs = load_engine(run, "ctranslate2", device="cpu").translate(lines, jsonl)
    for ours, ct2 in zip(native, theirs, strict=True):
        # no EOS step where the runtime stopped at the length limit (this barely trained model always does)
        got = ct2[0].token_log_probs
        assert ct2[0].tokens == ours[0].tokens and len(got) in (len(ours[0].tokens), len(ours[0].tokens) + 1)
        # the runtime renormalises after suppressing PAD and BOS (tbuild keeps the model's own log-probs):
        # higher by log(1 / (1 - P(PAD) - P(BOS))), about 0.01 for this model
        assert got == pytest.approx(ours[0].token_log_probs[: len(got)], abs=0.05)
        assert all(g >= o - 1e-4 for g, o in zip(got, ours[0].token_log_probs, strict=False))
        assert sum(ct2[0].token_log_probs) == pytest.approx(ct2[0].log_prob, abs=1e-3)
    beam = resolve_run(run_copy, ["decode.beam=3"])
    hyps = load_engine(beam, "ctranslate2", device="cpu").translate(lines, DecodeRequest.of(beam.spec.decode,
                                                                                             format="jsonl"))
    assert all(h[0].token_log_probs == [] for h in hyps)
