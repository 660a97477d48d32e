"""Schema-driven fuzzing of ``openapi.json`` with schemathesis, against the real handler.

GIVEN the committed OpenAPI document and the API handler on moto in-process, reached through
a small WSGI adapter that turns each request into the REST proxy event ``durable dev`` builds
(``durable.local.apigw``), with real workflow names, run ids and a callback token mixed into
the generated path parameters (so requests get past the 404s)
WHEN schemathesis generates requests for every operation, fitting the schema (positive) and
breaking it (negative)
THEN no answer is a 5xx, every status code is declared for its operation, and every body
and content type matches what the document declares.

These requests may be accepted (a run started, a callback answered), so this module has its
own stack; the "nothing written" property is ``test_api_bad_input.py``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from durable.local.apigw import from_proxy_result, to_rest_event
from tests.fuzz.conftest import FUZZ, Target
from tests.handlers.events import LambdaContext

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = json.loads((ROOT / "openapi.json").read_text())
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations() if isinstance(result, Ok)]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def wsgi(target: Target) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The API handler as a WSGI app: request -> REST proxy event -> handler -> response."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        from werkzeug.wrappers import Request

        request = Request(environ)
        raw_path = environ.get("REQUEST_URI") or request.full_path
        event = to_rest_event(
            request.method, raw_path, dict(request.headers.items()), request.get_data()
        )
        result = target.stack.api(event, LambdaContext(function_name="durable-api-fuzz"))
        status, headers, body = from_proxy_result(result)
        start_response(f"{status} -", list(headers.items()))
        return [body]

    return app


@pytest.fixture(scope="module")
def app(target: Target) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    return wsgi(target)


def known_values(target: Target) -> dict[str, list[str]]:
    return {
        "name": ["greet", "approval", "signalled", "go", "manager"],
        "run_id": [target.waiting, target.signalled, target.finished],
        "token": [target.token],
        # the scoped routes' wait and signal names (their workflow is "name")
        "wait": ["manager", "approval"],
        "signal": ["go", "other"],
    }


def test_the_document_loads_whole() -> None:
    assert len(OPERATIONS) == len(list(SCHEMA.get_all_operations())) == 24


@pytest.mark.parametrize("operation", OPERATIONS, ids=[o.label for o in OPERATIONS])
def test_every_answer_conforms_to_the_document(
    operation: Any, target: Target, app: Callable[..., Iterable[bytes]]
) -> None:
    names = [p.name for p in operation.path_parameters]
    values = known_values(target)
    fixed: list[dict[str, str] | None] = [None]
    fixed += [{n: values[n][i % len(values[n])] for n in names} for i in range(3)] if names else []
    query = [None, {"workflow": "greet"}, {"needs_attention": "true"}]
    strategy = st.tuples(
        st.sampled_from([GenerationMode.POSITIVE, GenerationMode.NEGATIVE]),
        st.sampled_from(fixed),
        st.sampled_from(query if operation.path == "/runs" else [None]),
    ).flatmap(
        lambda choice: operation.as_strategy(choice[0], path_parameters=choice[1], query=choice[2])
    )

    @FUZZ
    @given(case=strategy)
    def check(case: Any) -> None:
        response = case.call(app=app)
        case.validate_response(response, checks=CHECKS)

    check()


def test_the_document_declares_every_answer_the_handler_gives() -> None:
    """The answers no route function returns itself: the preflight's and the factory's."""
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            declared = set(operation["responses"])
            if method == "post":
                # max_body_bytes (413), non-JSON media types (415), the preflight (400/422)
                assert {"400", "413", "415", "422", "503"} <= declared, (method, path)
            if path.startswith("/runs"):
                assert "503" in declared, (method, path)
    for path, model in (("/runs/{run_id}", "RunDetail"), ("/runs", "RunPage")):
        ok = DOCUMENT["paths"][path]["get"]["responses"]["200"]
        assert ok["content"]["application/json"]["schema"]["$ref"].endswith(model), path
