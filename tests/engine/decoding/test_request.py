"""The decode request: its checks (a bad value refused in one line naming it), the one table of what
each engine honours (which the export targets read too), and the model protocol the search decodes
through (an ensemble of one model is that model, token for token and score for score)."""

from __future__ import annotations

import pytest
import torch

from tbuild.builder.spec import DecodeSpec, Spec
from tbuild.engine.decoding.ensemble import Ensemble
from tbuild.engine.decoding.model import SearchModel, Single, search_model
from tbuild.engine.decoding.native import sampler
from tbuild.engine.decoding.request import (
    LACKS,
    DecodeRequest,
    InvalidRequest,
    LineConstraints,
    check_ensemble,
    check_request,
    runtime_lacks,
)
from tbuild.engine.decoding.search import beam_search, greedy_search
from tbuild.engine.errors import TbuildError
from tbuild.engine.export.targets import describe_profiles, profile_verdicts
from tests.conftest import tiny_model
from tests.engine.decoding.test_modes import random_src

INCLUDE = (LineConstraints(include=("a dog",)),)


@pytest.mark.parametrize(("changes", "message"), [
    ({"beam": 0}, "beam must be at least 1 (got 0)"),
    ({"nbest": 0}, "nbest must be at least 1 (got 0)"),
    ({"batch_tokens": 0}, "batch_tokens must be at least 1 (got 0)"),
    ({"alpha": -0.5}, "alpha must be 0 or more (got -0.5)"),
    ({"max_len_b": -1}, "max_len_b must be 0 or more (got -1)"),
    ({"temperature": -1.0}, "temperature must be 0 or more (got -1.0)"),
    ({"topp": 0.0}, "topp must be in (0, 1] (got 0.0)"),
    ({"topp": 1.5}, "topp must be in (0, 1] (got 1.5)"),
    ({"sampling": "nucleus"}, "sampling 'nucleus': choose one of topk, topp, temperature"),
    ({"beam": 2, "nbest": 3}, "nbest (3) cannot exceed beam (2)"),
    ({"format": "xml"}, "--format 'xml': choose one of text, jsonl"),
    ({"align": True}, "--align writes alignments into --format jsonl"),
    ({"sampling": "topk", "constraints": INCLUDE},
     "phrases to include (positive constraints) need beam search, not --sampling"),
])
def test_bad_values_are_refused_in_one_line(changes: dict, message: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        DecodeRequest(**changes)
    assert str(e.value) == message and isinstance(e.value, TbuildError)
    with pytest.raises(InvalidRequest, match="^" + message.split(" ")[0]):
        DecodeRequest().but(**changes)  # a changed request is checked again


def test_built_from_the_spec_decode_section() -> None:
    spec = DecodeSpec(beam=5, alpha=1.2, nbest=2, sampling="topp", topp=0.5, seed=7, no_repeat_ngram=3,
                      batch_tokens=100, quantization="int8")
    request = DecodeRequest.of(spec, prefixes=["Ein", ""], format="jsonl")
    assert (request.beam, request.alpha, request.nbest, request.sampling, request.topp, request.seed) == (
        5, 1.2, 2, "topp", 0.5, 7)
    assert (request.no_repeat_ngram, request.batch_tokens, request.prefixes) == (3, 100, ("Ein", ""))
    assert request.width == 2 and request.token_scores and DecodeRequest().width == 4
    assert DecodeRequest.of(DecodeSpec()) == DecodeRequest()  # the same defaults as the spec's
    same = DecodeRequest.of(spec, prefixes=("Ein", ""), format="jsonl")
    assert hash(request) == hash(same) and request == same  # the batcher groups jobs by their request


def test_each_engine_says_what_it_lacks() -> None:
    assert LACKS["native"] == ()
    for request in (DecodeRequest(constraints=INCLUDE), DecodeRequest(format="jsonl", align=True),
                    DecodeRequest(step_rule=lambda rows: None), DecodeRequest(min_len=3)):
        check_request("native", request)
        with pytest.raises(TbuildError, match="^--engine ctranslate2 "):
            check_request("ctranslate2", request)
    with pytest.raises(TbuildError, match="cannot force phrases into outputs"):
        check_request("ctranslate2", DecodeRequest(constraints=INCLUDE))
    check_request("ctranslate2", DecodeRequest(constraints=(LineConstraints(exclude=("a",)),), sampling="topk",
                                               nbest=3, no_repeat_ngram=2, prefixes=("Ein",)))
    check_ensemble("native")
    for engine in ("ctranslate2", "onnx"):
        with pytest.raises(TbuildError, match=f"--engine {engine}: ensembles decode with the native engine only"):
            check_ensemble(engine)
    assert runtime_lacks("ctranslate2") == ["ensembles", "alignments (--align)",
                                            "phrases to include (positive constraints)"]


def test_export_targets_read_the_same_table() -> None:
    spec = Spec.model_validate({"decode": {"profiles": {"cold": {"sampling": "topk", "temperature": 0},
                                                        "fast": {"quantization": "int8"}}}})
    verdicts = profile_verdicts(spec)
    assert verdicts["ctranslate2"] == {"decode": None, "cold": None, "fast": None}
    assert verdicts["hf"]["cold"] == ("hf cannot honour decode profile 'cold': sampling at temperature 0 "
                                      "(transformers needs a positive temperature)")
    assert verdicts["hf"]["fast"] == ("hf cannot honour decode profile 'fast': quantization int8 "
                                      "(the hf export is float32)")
    assert f"ctranslate2 runtime lacks: {', '.join(runtime_lacks('ctranslate2'))}" in describe_profiles(spec)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return tiny_model()


def test_a_single_model_and_an_ensemble_are_search_models(model: torch.nn.Module) -> None:
    one, both = search_model(model), Ensemble([model, model], [1.0, 1.0], "prob")
    assert isinstance(one, Single) and isinstance(one, SearchModel) and one.members == (model,)
    assert search_model(both) is both and isinstance(both, SearchModel) and both.members == (model, model)


@pytest.mark.parametrize("combine", ["logprob", "prob"])
def test_an_ensemble_of_one_model_is_that_model_exactly(model: torch.nn.Module, combine: str) -> None:
    src = random_src([5, 7, 3, 9])
    limits = {"alpha": 0.6, "max_len_a": 1.0, "max_len_b": 4}
    one = Ensemble([model], [1.0], combine)
    for beam in (1, 3):
        alone = beam_search(model, src, beam=beam, nbest=beam, token_scores=True, **limits)
        together = beam_search(one, src, beam=beam, nbest=beam, token_scores=True, **limits)
        assert together == alone  # tokens, scores, log-probs and per-token log-probs, bit for bit
    draw = sampler(DecodeRequest(sampling="topk", topk=5, nbest=3, seed=4), torch.device("cpu"))
    again = sampler(DecodeRequest(sampling="topk", topk=5, nbest=3, seed=4), torch.device("cpu"))
    assert beam_search(one, src, beam=3, nbest=3, sampling=draw, **limits) == beam_search(
        model, src, beam=3, nbest=3, sampling=again, **limits)
    assert greedy_search(one, src, **limits) == greedy_search(model, src, **limits)
