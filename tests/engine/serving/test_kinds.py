"""One endpoint per model kind, through FastAPI's test client on tiny runs trained through the CLI: a
language model at /generate (its answers equal `tbuild generate`'s: greedy, sampled with a seed, n-best),
a tagger and a sequence classifier at /classify (equal to `tbuild decode`'s labels), a decoder-only translator
(model.prefix_lm) at /translate (equal to `tbuild decode`'s texts and n-best scores; another engine and
--compile refused in one line); each with its 4xx
(the shared limits, the kind's own checks), another kind's endpoint a 404 naming the one served, and
/health and /info saying the kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")
from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tbuild.cli.app import app as cli  # noqa: E402
from tbuild.engine.run.directory import resolve_run  # noqa: E402
from tbuild.engine.serving.app import create_app  # noqa: E402
from tbuild.engine.tasks.service import open_service  # noqa: E402
from tests.cli import test_classifier, toy_tagger  # noqa: E402  (their toy files)
from tests.cli.test_lm import lm_spec  # noqa: E402

runner = CliRunner()
PROMPTS = ["Ein Mann", "", "Zwei Hunde spielen im"]


def trained(root: Path, spec: dict) -> Path:
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(cli, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return Path(spec["output_dir"])


def client_of(run: Path) -> Iterator[TestClient]:
    service = open_service(resolve_run(run), max_wait_ms=5, max_lines=8, max_chars=200)
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        yield client
    service.close()


def cli_lines(args: list[str], lines: list[str]) -> list[str]:
    result = runner.invoke(cli, args, input="".join(f"{line}\n" for line in lines))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def lm_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-lm")
    return trained(root, lm_spec(tiny_corpus, root / "run") | {"output_dir": str(root / "run")})


@pytest.fixture(scope="module")
def lm(lm_run: Path) -> Iterator[TestClient]:
    yield from client_of(lm_run)


def toy(root: Path, kind: str, data: dict, files: dict[str, str], positions: int) -> dict:
    for name, text in files.items():
        (root / name).write_text(text)
    return {"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "head": {"kind": kind}, "max_positions": positions},
            "data": data | {"tokenizer": {"vocab_size": 40}},
            "train": {"max_steps": 2, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32"},
            "output_dir": str(root / "run")}


@pytest.fixture(scope="module")
def tagger_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-tagger")
    words, tags = toy_tagger.TRAIN
    files = {f"{split}.{ext}": text for split in ("train", "valid", "test") for ext, text in (("words", words),
                                                                                               ("tags", tags))}
    data = {"dataset": {"kind": "tagging", "source": "files"}, "train": str(root / "train"),
            "valid": str(root / "valid"), "test": str(root / "test")}
    return trained(root, toy(root, "token_classification", data, files, 24))


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-classifier")
    files = {f"{split}.tsv": test_classifier.TRAIN for split in ("train", "valid", "test")}
    data = {"dataset": {"kind": "classification", "source": "files"}, "train": str(root / "train.tsv"),
            "valid": str(root / "valid.tsv"), "test": str(root / "test.tsv")}
    return trained(root, toy(root, "sequence_classification", data, files, 12))


def test_generate_equals_tbuild_generate(lm: TestClient, lm_run: Path) -> None:
    response = lm.post("/generate", json={"prompts": PROMPTS, "max_new_tokens": 4})
    assert response.status_code == 200, response.text
    assert response.json() == {"outputs": cli_lines(["generate", str(lm_run), "--max-new-tokens", "4"], PROMPTS)}
    assert all(out.startswith(p) for out, p in zip(response.json()["outputs"], PROMPTS, strict=True))


def test_sampling_with_a_seed_and_nbest_equal_tbuild_generate(lm: TestClient, lm_run: Path) -> None:
    options = {"sampling": "topk", "topk": 5, "seed": 7, "nbest": 2, "max_new_tokens": 5}
    first = lm.post("/generate", json={"prompts": PROMPTS[:2], **options, "scores": True}).json()
    again = lm.post("/generate", json={"prompts": PROMPTS[:2], **options}).json()
    want = cli_lines(["generate", str(lm_run), "--sampling", "topk", "--topk", "5", "--seed", "7", "--nbest", "2",
                      "--max-new-tokens", "5"], PROMPTS[:2])  # `i ||| text ||| score`
    got = [f"{i} ||| {h['text']} ||| {h['score']:.4f}" for i, n in enumerate(first["nbest"]) for h in n]
    assert got == want and again["nbest"] == first["nbest"]
    assert first["outputs"] == [n[0]["text"] for n in first["nbest"]] and len(first["scores"]) == 2


BAD_GENERATE = [
    ({"prompts": []}, 422, "prompts: the list of prompts is empty"),
    ({"src": ["Ein Mann"]}, 422, "prompts"),
    ({"prompts": ["a"] * 9}, 422, "prompts: 9 prompts, more than the limit of 8 per request"),
    ({"prompts": ["x" * 201]}, 422, "prompts[0]: 201 characters, more than the limit of 200"),
    ({"prompts": ["ok", "x y z " * 33]}, 413, "prompts[1]: "),  # under 200 characters, over 64 positions
    ({"prompts": ["a"], "max_new_tokens": 64}, 422, "max_new_tokens: 64 does not fit the model's 64 positions"),
    ({"prompts": ["a"], "sampling": "nucleus"}, 422, "sampling"),
    ({"prompts": ["a"], "topp": 0}, 422, "topp"),
]


@pytest.mark.parametrize(("body", "status", "says"), BAD_GENERATE, ids=[str(i) for i in range(len(BAD_GENERATE))])
def test_bad_generate_requests_are_a_json_4xx(lm: TestClient, body: dict, status: int, says: str) -> None:
    response = lm.post("/generate", json=body)
    assert response.status_code == status and says in response.json()["error"], response.text
    assert lm.post("/generate", content=b'{"prompts": ["\xff"]}',
                   headers={"content-type": "application/json"}).status_code == 400


def test_a_language_model_has_one_endpoint_and_says_its_kind(lm: TestClient) -> None:
    for path in ("/translate", "/classify"):
        response = lm.post(path, json={"src": ["a"]})
        assert response.status_code == 404
        assert response.json()["error"].startswith(f"{path} is not served here: this server serves a language "
                                                   "model at POST /generate")
    assert lm.get("/nope").json() == {"error": "Not Found"}
    assert set(lm.get("/openapi.json").json()["paths"]) == {"/generate", "/health", "/info"}
    health, info = lm.get("/health").json(), lm.get("/info").json()
    assert (health["kind"], health["endpoint"], info["kind"], info["endpoint"]) == (
        "decoder_only", "/generate", "decoder_only", "/generate")
    assert "source_lang" not in info and "bleu" not in info and info["limits"]["max_tokens"] == 64


def test_a_tagger_classifies_as_tbuild_decode(tagger_run: Path) -> None:
    texts = ["the can rusts", "", "you can swim fast"]
    for client in client_of(tagger_run):
        response = client.post("/classify", json={"texts": texts})
        assert response.status_code == 200, response.text
        want = [line.split() for line in cli_lines(["decode", str(tagger_run)], texts)]
        assert response.json() == {"tags": want} and [len(t) for t in want] == [3, 0, 4]
        long = client.post("/classify", json={"texts": ["ok", "cats " * 24]})  # 24 words and EOS: over 24 positions
        assert long.status_code == 413 and "texts[1]: " in long.text
        assert "pieces, more than the model's limit of 24" in long.text
        assert client.post("/classify", json={"texts": []}).json() == {"error": "texts: the list of texts is empty"}
        response = client.post("/generate", json={"prompts": ["a"]})
        assert response.status_code == 404 and "serves a tagger or classifier at POST /classify" in response.text
        assert client.get("/health").json()["kind"] == "encoder_only"


def test_a_classifier_labels_each_text_as_tbuild_decode(classifier_run: Path) -> None:
    texts = ["the dog runs", "", "le chien court", "der Hund " * 10]  # the last cut to 12 positions, as trained
    for client in client_of(classifier_run):
        response = client.post("/classify", json={"texts": texts})
        assert response.status_code == 200, response.text
        assert response.json() == {"labels": cli_lines(["decode", str(classifier_run)], texts)}
        tab = client.post("/classify", json={"texts": ["ok", "en\tthe dog"]})
        assert tab.status_code == 422 and tab.json()["error"].startswith("texts[1] holds a tab")
        assert client.post("/translate", json={"src": ["a"]}).status_code == 404
        info = client.get("/info").json()
        assert info["endpoint"] == "/classify" and info["kind"] == "encoder_only" and "scores" in info


@pytest.fixture(scope="module")
def prefix_lm_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.cli.test_prefix_lm import prefix_lm_spec

    root = tmp_path_factory.mktemp("serve-prefix-lm")
    return trained(root, prefix_lm_spec(tiny_corpus, root / "run") | {"output_dir": str(root / "run")})


def test_a_prefix_lm_translates_as_tbuild_decode(prefix_lm_run: Path) -> None:
    """A decoder-only translator (model.prefix_lm) at /translate: its best texts, and its n-best texts
    and scores, those of `tbuild decode` (sources of different lengths in one batch)."""
    src = ["A man is walking.", "", "Two dogs play in the snow near a big red house."]
    for client in client_of(prefix_lm_run):
        response = client.post("/translate", json={"src": src})
        assert response.status_code == 200, response.text
        assert response.json()["translations"] == cli_lines(["decode", str(prefix_lm_run)], src)
        nbest = client.post("/translate", json={"src": src, "beam": 3, "nbest": 2, "scores": True}).json()
        want = cli_lines(["decode", str(prefix_lm_run), "--beam", "3", "--nbest", "2"], src)
        empty = [{"text": "", "score": 0.0}]  # the CLI's line for an empty source
        got = [f"{i} ||| {h['text']} ||| {h['score']:.4f}" for i, n in enumerate(nbest["nbest"]) for h in n or empty]
        assert got == want and len(want) == 5
        assert client.post("/generate", json={"prompts": ["a"]}).status_code == 404
        info = client.get("/info").json()
        assert (info["kind"], info["endpoint"], info["engine"]) == ("decoder_only", "/translate", "native")
        assert (info["source_lang"], info["target_lang"]) == ("en", "de") and "bleu" in info


@pytest.mark.parametrize(("option", "says"), [(["--engine", "ctranslate2"], "--engine ctranslate2: a decoder-only "
                                               "translator (model.prefix_lm) is served by the native engine"),
                                              (["--compile"], "--compile: a decoder-only translator "
                                               "(model.prefix_lm) is served uncompiled")])
def test_a_prefix_lm_refuses_what_it_is_not_served_with(prefix_lm_run: Path, option: list[str], says: str) -> None:
    result = runner.invoke(cli, ["serve", str(prefix_lm_run), *option])
    assert result.exit_code == 2 and says in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
