"""The server keeps its OpenAPI document: a schema-driven fuzz (schemathesis) of every route, in
process through the ASGI app on the tiny run, checks that each answer's status is declared, its body
matches the declared model and its headers are right (a 405 carries ``Allow``); and the limits the
document states (1 to N sentences, at most M characters each) are the ones the server applies."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")
schemathesis = pytest.importorskip("schemathesis", reason="the fuzz needs schemathesis (the dev extra)")
from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402

from tbuild.engine.run.directory import resolve_run  # noqa: E402
from tbuild.engine.serving.api import Limits, TranslateRequest  # noqa: E402
from tbuild.engine.serving.app import create_app  # noqa: E402
from tbuild.engine.serving.service import Service  # noqa: E402
from tbuild.engine.tasks.service import open_service  # noqa: E402

MAX_LINES, MAX_CHARS, MAX_TOKENS = 8, 200, 40  # MAX_TOKENS: the tiny run's model.max_positions
EXAMPLES = 50  # per route: a few seconds on two cores
# A body the schema allows is answered 2xx: a sentence over the model's limit in tokens (which no schema can
# state, since the tokenizer counts them) is translated in pieces, not refused. Data the schema forbids (too many
# or too long sentences included) gets 400 or 422, schemathesis's own expectation.
CONFIG = {
    "generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True, "database": "none"},
    "phases": {"stateful": {"enabled": False}},
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx"]}},
}


@pytest.fixture(scope="module")
def service(tiny_run: Path) -> Iterator[Service]:
    service = open_service(resolve_run(tiny_run), max_wait_ms=0, max_lines=MAX_LINES, max_chars=MAX_CHARS)
    yield service
    service.close()


@pytest.fixture(autouse=True)
def subnormal_floats() -> Iterator[None]:
    """Hypothesis draws floats that need subnormals, which the CLI flushes to zero in this process
    (``configure_process``, run by the tiny run's training): allowed again for the test, then as they were."""
    import torch

    flushed = sys.float_info.min / 2 == 0.0
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(flushed)


@pytest.fixture(scope="module")
def app(service: Service) -> FastAPI:
    return create_app(service)


def document() -> dict[str, Any]:
    """The server's OpenAPI document at these limits (it depends on them alone: no model is loaded)."""
    settings = SimpleNamespace(limits=Limits(MAX_LINES, MAX_CHARS, MAX_TOKENS), endpoint="translate")
    task = SimpleNamespace(request=TranslateRequest)
    return create_app(cast(Service, SimpleNamespace(settings=settings, task=task))).openapi()


schema = schemathesis.openapi.from_dict(document(), config=SchemathesisConfig.from_dict(CONFIG))


def test_the_fuzzed_document_is_the_servers(app: FastAPI) -> None:
    assert app.openapi() == document()


@schema.parametrize()
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_every_answer_keeps_the_openapi_document(case: Any, app: FastAPI) -> None:
    """Every check of schemathesis: the status is declared, the body and headers match the document, data
    it forbids is refused (400 or 422), data it allows accepted (a sentence over the model's positions too), an
    undeclared method is a 405 with ``Allow``."""
    case.call_and_validate(app=app)


@pytest.fixture(scope="module")
def default_client(tiny_run: Path) -> Iterator[TestClient]:
    """A server at `tbuild serve`'s default limits: 256 sentences of at most 2,000 characters."""
    with TestClient(create_app(open_service(resolve_run(tiny_run), max_wait_ms=0))) as client:
        yield client


def request_schema(client: TestClient) -> dict[str, Any]:
    return client.get("/openapi.json").json()["components"]["schemas"]["TranslateRequest"]["properties"]["src"]


def declared(client: TestClient, method: str, path: str) -> set[int]:
    return {int(status) for status in client.get("/openapi.json").json()["paths"][path][method]["responses"]}


def test_the_document_states_the_limits(default_client: TestClient) -> None:
    src = request_schema(default_client)
    assert (src["minItems"], src["maxItems"], src["items"]["maxLength"]) == (1, 256, 2000)
    assert declared(default_client, "post", "/translate") == {200, 400, 422, 500, 503}  # no 413: split instead
    assert declared(default_client, "get", "/health") == declared(default_client, "get", "/info") == {200, 500}


@pytest.mark.parametrize(("src", "status", "says"), [
    ([], 422, "src: the list of sentences is empty"),
    ([""] * 257, 422, "src: 257 sentences, more than the limit of 256 per request"),
    (["ok", "x" * 2001], 422, "src[1]: 2001 characters, more than the limit of 2000"),
], ids=["empty", "257-sentences", "2001-characters"])
def test_the_limits_are_refused_with_a_declared_status(default_client: TestClient, src: list[str], status: int,
                                                        says: str) -> None:
    response = default_client.post("/translate", json={"src": src})
    assert response.status_code == status and status in declared(default_client, "post", "/translate")
    assert says in response.json()["error"]


@pytest.mark.parametrize("src", [["x " * 1000], ["1" + str(3**4190)[:1999]]], ids=["words", "digits"])
def test_2000_characters_over_the_positions_are_translated_in_pieces(default_client: TestClient,
                                                                     src: list[str]) -> None:
    """A schema-valid line longer than the model's 40 positions: translated in pieces, never refused."""
    response = default_client.post("/translate", json={"src": src})
    assert response.status_code == 200 and response.json()["split"] == [0], response.text


def test_the_most_sentences_are_served(default_client: TestClient) -> None:
    response = default_client.post("/translate", json={"src": [""] * 256})
    assert response.status_code == 200 and response.json() == {"translations": [""] * 256}


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("GET", "/translate", "POST"), ("DELETE", "/translate", "POST"), ("POST", "/health", "GET"),
    ("PUT", "/info", "GET"),
])
def test_a_405_names_the_allowed_methods(default_client: TestClient, method: str, path: str, allow: str) -> None:
    response = default_client.request(method, path)
    assert response.status_code == 405 and response.headers["allow"] == allow
    assert response.json() == {"error": "Method Not Allowed"}


def test_a_body_not_sent_as_json_is_a_422_saying_so(default_client: TestClient) -> None:
    response = default_client.post("/translate", content=b'{"src": ["A dog."]}', headers={"content-type": "text/plain"})
    assert response.status_code == 422 and "sent as application/json" in response.json()["error"]
