"""The HTTP API through FastAPI's test client, on the tiny run: outputs equal `tbuild decode`'s, every
bad input gets a JSON 4xx naming the problem (and the server keeps serving), a slow request a 503,
a failing engine a 500 with no traceback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")
from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tbuild.cli.app import app as cli  # noqa: E402
from tbuild.engine.run.directory import resolve_run  # noqa: E402
from tbuild.engine.serving.app import create_app  # noqa: E402
from tbuild.engine.serving.segments import split_to_fit  # noqa: E402
from tbuild.engine.serving.service import Service  # noqa: E402
from tbuild.engine.tasks.registry import task_of  # noqa: E402
from tbuild.engine.tasks.service import open_service  # noqa: E402

LINES = ["A dog runs in the snow.", "Two men are talking.", "", "A little girl in a pink dress is climbing stairs."]


def decoded(run: Path, lines: list[str], *args: str) -> list[str]:
    result = CliRunner().invoke(cli, ["decode", str(run), *args], input="".join(f"{line}\n" for line in lines))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def service(tiny_run: Path) -> Iterator[Service]:
    service = open_service(resolve_run(tiny_run), max_wait_ms=5, max_lines=8, max_chars=200)
    yield service
    service.close()


@pytest.fixture(scope="module")
def client(service: Service) -> Iterator[TestClient]:
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        yield client


def test_translations_equal_tbuild_decode(client: TestClient, tiny_run: Path) -> None:
    response = client.post("/translate", json={"src": LINES})
    assert response.status_code == 200, response.text
    assert response.json() == {"translations": decoded(tiny_run, LINES)}


def test_nbest_above_the_beam_widens_it(client: TestClient, tiny_run: Path) -> None:
    """Every nbest the request schema allows is answered: the beam grows to it (as decode --beam N --nbest N)."""
    body = client.post("/translate", json={"src": LINES[:1], "nbest": 3, "beam": 2}).json()
    got = [f"0 ||| {h['text']} ||| {h['score']:.4f}" for h in body["nbest"][0]]
    assert got == decoded(tiny_run, LINES[:1], "--nbest", "3", "--beam", "3")


def test_scores_and_nbest_when_asked(client: TestClient, tiny_run: Path) -> None:
    body = client.post("/translate", json={"src": LINES[:2], "nbest": 2, "beam": 3, "scores": True}).json()
    assert len(body["scores"]) == 2 and len(body["nbest"]) == 2 and all(len(n) == 2 for n in body["nbest"])
    want = decoded(tiny_run, LINES[:2], "--nbest", "2", "--beam", "3")  # `i ||| text ||| score`
    got = [f"{i} ||| {h['text']} ||| {h['score']:.4f}" for i, n in enumerate(body["nbest"]) for h in n]
    assert got == want
    assert body["translations"] == [n[0]["text"] for n in body["nbest"]]


@pytest.mark.parametrize("long", ["Two men are talking. " * 9, "A dog runs in the snow " * 8, str(7**300)[:200]],
                         ids=["sentences", "words", "digits"])
def test_a_line_over_the_models_positions_is_translated_in_pieces(client: TestClient, service: Service,
                                                                  tiny_run: Path, long: str) -> None:
    """Under 200 characters, over the tiny model's 40 positions: split after sentence ends, else between words,
    else within a word; each piece translated as `tbuild decode` translates it, the texts joined by a space."""
    pieces = split_to_fit(long.strip(), service.task.fits)
    assert len(pieces) > 1 and all(service.task.fits(piece) for piece in pieces)
    assert "".join(pieces).replace(" ", "") == long.replace(" ", "")  # nothing lost, in order
    response = client.post("/translate", json={"src": ["ok", long], "scores": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["split"] == [1] and len(body["scores"]) == 2
    assert body["translations"] == [decoded(tiny_run, ["ok"])[0],
                                    " ".join(t for t in decoded(tiny_run, pieces) if t)]
    assert "split" not in client.post("/translate", json={"src": ["ok"]}).json()


def test_health_and_info(client: TestClient) -> None:
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["pending"] == 0
    assert (health["kind"], health["endpoint"]) == ("encoder_decoder", "/translate")
    info = client.get("/info").json()
    assert info["engine"] == "native" and info["source_lang"] == "en" and info["target_lang"] == "de"
    assert (info["kind"], info["endpoint"]) == ("encoder_decoder", "/translate") and "bleu" in info
    assert info["params"] > 0 and len(info["tokenizer_sha256"]) == 64


BAD = [
    (b'{"src": ["a", }', 400, "not valid JSON"),
    (b'{"src": ["caf\xc3\xa9", "\xff"]}', 400, "not valid UTF-8"),
    (b'["a dog"]', 422, "JSON object"),
    (b'{"text": ["a dog"]}', 422, "src"),
    (b'{"src": "a dog"}', 422, "src"),
    (b'{"src": [1, 2]}', 422, "src.0"),
    (b'{"src": []}', 422, "empty"),
    (b'{"src": ["a"], "beam": 0}', 422, "beam"),
    (b'{"src": ["a"], "colour": "red"}', 422, "colour"),
    (b'{"src": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}', 422, "9 sentences, more than the limit of 8"),
    (b'{"src": ["' + b"x" * 201 + b'"]}', 422, "src[0]: 201 characters"),
]


@pytest.mark.parametrize(("body", "status", "says"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_a_json_4xx_naming_it(client: TestClient, body: bytes, status: int, says: str) -> None:
    response = client.post("/translate", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert says in response.json()["error"]
    assert "Traceback" not in response.text
    assert client.post("/translate", json={"src": ["A dog."]}).status_code == 200  # still serving


def test_unknown_routes_and_methods_are_json(client: TestClient) -> None:
    assert client.get("/nope").json() == {"error": "Not Found"}
    other = client.post("/generate", json={"prompts": ["a"]})  # another kind's endpoint names the one served
    assert other.status_code == 404 and other.json()["error"] == (
        "/generate is not served here: this server serves a translator at POST /translate (one endpoint per model "
        "kind; GET /info names it)")
    assert client.get("/translate").status_code == 405 and "error" in client.get("/translate").json()


def test_a_slow_request_is_cancelled_with_503(tiny_run: Path) -> None:
    slow = open_service(resolve_run(tiny_run), max_wait_ms=500, timeout=0.05)  # the batch waits longer than that
    with TestClient(create_app(slow)) as client:
        response = client.post("/translate", json={"src": ["A dog."]})
        assert response.status_code == 503 and "took more than 0.05 s" in response.json()["error"]


def test_an_engine_failure_is_a_500_without_traceback(tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = open_service(resolve_run(tiny_run), max_wait_ms=0)

    def fail(*_: object, **__: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(broken.batcher, "decode", fail)
    with TestClient(create_app(broken), raise_server_exceptions=False) as client:
        response = client.post("/translate", json={"src": ["A dog."]})
        assert response.status_code == 500 and "secret" not in response.text and "Traceback" not in response.text
        assert client.get("/health").json()["status"] == "ok"


def test_the_model_is_loaded_and_decoded_on_one_thread_not_the_main_one(tiny_run: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's CPU threads (libgomp) sleep at every barrier once two threads' teams outnumber the cores, so the
    server's one engine thread must be the one that loaded the model (docs/benchmarks.md, "The server")."""
    run = resolve_run(tiny_run)
    task = type(task_of(run.spec))
    threads: dict[str, list[int]] = {"load": [], "decode": []}
    serve = task.serve

    def recorded_serve(self: object, *args: object) -> object:
        threads["load"].append(threading.get_ident())
        endpoint = serve(self, *args)
        decode = endpoint.decode

        def recorded_decode(*a: object) -> object:
            threads["decode"].append(threading.get_ident())
            return decode(*a)

        endpoint.decode = recorded_decode
        return endpoint

    monkeypatch.setattr(task, "serve", recorded_serve)
    service = open_service(run, max_wait_ms=0)
    with TestClient(create_app(service)) as client:
        assert client.post("/translate", json={"src": ["A dog.", "Two men."]}).status_code == 200
    assert len(threads["load"]) == 1 and set(threads["decode"]) == set(threads["load"])
    assert threads["load"][0] != threading.get_ident()
