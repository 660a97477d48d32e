"""What a client sees for a wrong method, and a failed run's error, through real API events."""

from __future__ import annotations

import pytest

from durable import cli
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through, show

RUN = "01JDURABLE0000000000000000"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", f"/runs/{RUN}", "GET"),
        ("PUT", "/workflows", "GET"),
        ("DELETE", "/workflows/greet/runs", "GET, POST"),
        ("GET", f"/runs/{RUN}/cancel", "POST"),
        ("PATCH", "/callbacks/some-token", "POST"),
        ("POST", "/runs", "GET"),
        ("DELETE", "/openapi.json", "GET"),
    ],
)
def test_a_wrong_method_on_a_known_path_is_405_with_allow(
    stack: Stack, method: str, path: str, allow: str
) -> None:
    """GIVEN a path the API serves WHEN it is asked with a method it does not answer
    THEN 405 (not 404) with an Allow header naming the methods it does, writing nothing."""
    before = stack.snapshot()
    reply = stack.call(api_event(method, path, {"reason": "x"} if method != "GET" else None))
    assert reply.status == 405, reply.body
    assert reply.headers["Allow"] == allow
    assert reply.error["type"] == "MethodNotAllowed"
    assert reply.error["message"] == f"{method} is not allowed on {path}; it answers {allow}"
    assert reply.headers["Content-Type"] == "application/json"
    assert stack.snapshot() == before


def test_an_unknown_path_is_still_404(stack: Stack) -> None:
    reply = stack.call(api_event("DELETE", f"/runs/{RUN}/steps"))
    assert (reply.status, reply.error["type"]) == (404, "NotFound")
    assert "Allow" not in reply.headers


def test_a_failed_runs_error_names_its_type_once(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a run failed by a step WHEN the API shows it and `durable show` prints it
    THEN the type is its own field, and the printed line says it once (it used to say
    "StepFailed: StepFailed: ...")."""
    run_id = stack.call(api_event("POST", "/workflows/flaky/runs")).body["run_id"]
    stack.drain()
    error = show(stack, run_id)["error"]
    assert error["type"] == "StepFailed"
    assert error["message"].startswith("step 'fragile' at position 0001 failed")
    cli_through(stack, monkeypatch)
    assert cli.main(["--endpoint", "http://127.0.0.1:1", "show", run_id]) == 0
    out = capsys.readouterr().out
    assert "  error  StepFailed: step 'fragile' at position 0001 failed" in out
    assert out.count("StepFailed") == 1
