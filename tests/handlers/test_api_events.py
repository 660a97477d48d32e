"""Callbacks, signals and operator decisions through the API; every refusal writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.handlers import workflows
from tests.handlers.conftest import Reply, Stack, later
from tests.handlers.events import OPERATOR_ARN, api_event


def run_to_wait(stack: Stack, workflow: str, body: Any = None) -> str:
    reply = stack.call(api_event("POST", f"/workflows/{workflow}/runs", body))
    assert reply.status == 202, reply.body
    stack.drain()
    run_id: str = reply.body["run_id"]
    assert show(stack, run_id)["status"] == "WAITING"
    return run_id


def show(stack: Stack, run_id: str) -> dict[str, Any]:
    reply = stack.call(api_event("GET", f"/runs/{run_id}"))
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def callback_token(stack: Stack, run_id: str) -> str:
    (url,) = [s["output"] for s in show(stack, run_id)["steps"] if s["name"] == "manager.submit"]
    assert url.startswith(stack.settings.callback_base_url + "/callbacks/")
    token: str = url.rsplit("/", 1)[1]
    return token


def answer(stack: Stack, token: str, body: Any) -> Reply:
    # Callbacks are authorized by their token: no IAM caller.
    return stack.call(api_event("POST", f"/callbacks/{token}", body, caller=None))


def test_callback_approve_resumes_the_run(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    reply = answer(stack, callback_token(stack, run_id), {"result": {"by": "manager"}})
    assert reply.status == 202
    assert reply.body == {"run_id": run_id, "outcome": "result"}
    stack.drain()
    assert show(stack, run_id)["output"] == {"approved": {"by": "manager"}}


def test_callback_reject_fails_the_wait(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {})
    reply = answer(stack, callback_token(stack, run_id), {"error": {"message": "too much"}})
    assert reply.body["outcome"] == "error"
    stack.drain()
    assert show(stack, run_id)["output"] == {"rejected": "too much"}


def test_callback_answered_twice_is_409_and_writes_nothing(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    assert answer(stack, token, {"result": True}).status == 202
    stack.drain()
    before = stack.snapshot()
    reply = answer(stack, token, {"result": False})
    assert reply.status == 409
    assert reply.error["type"] == "CallbackAlreadyCompleted"
    assert stack.snapshot() == before


def test_expired_callback_is_410(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    later(stack, days=2)
    before = stack.snapshot()
    reply = answer(stack, token, {"result": True})
    assert reply.status == 410
    assert stack.snapshot() == before


@pytest.mark.parametrize("mangle", ["flip", "truncate", "garbage", "other-run"])
def test_bad_tokens_are_refused_and_write_nothing(stack: Stack, mangle: str) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    bad = {
        "flip": token[:-1] + ("A" if token[-1] != "A" else "B"),
        "truncate": token[:-5],
        "garbage": "not-a-token",
        "other-run": "01JDURABLE0000000000000000" + token[26:],
    }[mangle]
    before = stack.snapshot()
    reply = answer(stack, bad, {"result": True})
    assert reply.status == (422 if mangle in {"truncate", "garbage"} else 404), reply.body
    assert stack.snapshot() == before


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"result": 1, "error": {"message": "x"}}, 422, None),
        ({"error": {"type": ""}}, 422, "error.type"),
        ({"surprise": 1}, 422, "surprise"),
    ],
)
def test_malformed_callback_bodies(stack: Stack, body: Any, status: int, field: str | None) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    before = stack.snapshot()
    reply = answer(stack, token, body)
    assert reply.status == status
    if field:
        assert reply.error["field"] == field
    assert stack.snapshot() == before
    malformed = stack.call(api_event("POST", f"/callbacks/{token}", raw='{"result": '))
    assert malformed.status == 400


def test_signal_resumes_a_waiting_run(stack: Stack) -> None:
    run_id = run_to_wait(stack, "signalled")
    reply = stack.call(api_event("POST", f"/runs/{run_id}/signals/go", {"speed": 3}))
    assert reply.status == 202
    assert reply.body["name"] == "go"
    stack.drain()
    detail = show(stack, run_id)
    assert detail["status"] == "SUCCEEDED"
    assert detail["output"] == {"speed": 3}
    assert detail["signals"][0]["consumed_by"]


@pytest.mark.parametrize(
    ("target", "name", "status"),
    [("unknown", "go", 404), ("waiting", "bad%0Aname", 422), ("finished", "go", 409)],
)
def test_refused_signals_write_nothing(stack: Stack, target: str, name: str, status: int) -> None:
    run_id = "01JDURABLE0000000000000000"
    if target != "unknown":
        run_id = run_to_wait(stack, "signalled")
    if target == "finished":
        stack.call(api_event("POST", f"/runs/{run_id}/signals/go", 1))
        stack.drain()
    before = stack.snapshot()
    reply = stack.call(api_event("POST", f"/runs/{run_id}/signals/{name}", 1))
    assert reply.status == status, reply.body
    assert stack.snapshot() == before


def test_cancel_a_waiting_run(stack: Stack) -> None:
    run_id = run_to_wait(stack, "signalled")
    reply = stack.call(api_event("POST", f"/runs/{run_id}/cancel", {"reason": "not needed"}))
    assert reply.status == 202, reply.body
    stack.drain()
    detail = show(stack, run_id)
    assert detail["status"] == "CANCELED"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [({}, 422, "reason"), ({"reason": ""}, 422, "reason"), ({"reason": "x", "now": 1}, 422, "now")],
)
def test_invalid_cancel_bodies_write_nothing(
    stack: Stack, body: Any, status: int, field: str
) -> None:
    run_id = run_to_wait(stack, "signalled")
    before = stack.snapshot()
    reply = stack.call(api_event("POST", f"/runs/{run_id}/cancel", body))
    assert reply.status == status
    assert reply.error["field"] == field
    assert stack.snapshot() == before


def test_cancel_refusals(stack: Stack) -> None:
    unknown = stack.call(
        api_event("POST", "/runs/01JDURABLE0000000000000000/cancel", {"reason": "x"})
    )
    assert unknown.status == 404
    done = stack.call(api_event("POST", "/workflows/greet/runs", {"user_id": "u", "email": "e"}))
    stack.drain()
    before = stack.snapshot()
    finished = stack.call(
        api_event("POST", f"/runs/{done.body['run_id']}/cancel", {"reason": "too late"})
    )
    assert finished.status == 409
    assert stack.snapshot() == before


def test_retry_a_failed_run_after_the_fix(stack: Stack) -> None:
    reply = stack.call(api_event("POST", "/workflows/flaky/runs"))
    stack.drain()
    run_id = reply.body["run_id"]
    failed = show(stack, run_id)
    assert failed["status"] == "FAILED"
    assert "retry" in failed["decisions"]
    workflows.FLAKY["fail"] = False
    retried = stack.call(api_event("POST", f"/runs/{run_id}/retry", {}))
    assert retried.status == 202, retried.body
    stack.drain()
    detail = show(stack, run_id)
    assert (detail["status"], detail["output"]) == ("SUCCEEDED", "ok")
    assert [op.get("by") for op in detail["operations"]] == [OPERATOR_ARN]


def test_retry_refusals_write_nothing(stack: Stack) -> None:
    done = stack.call(api_event("POST", "/workflows/greet/runs", {"user_id": "u", "email": "e"}))
    stack.drain()
    run_id = done.body["run_id"]
    before = stack.snapshot()
    assert stack.call(api_event("POST", f"/runs/{run_id}/retry", {})).status == 409
    bad = stack.call(api_event("POST", f"/runs/{run_id}/retry", {"upgrade_to": 0}))
    assert (bad.status, bad.error["field"]) == (422, "upgrade_to")
    assert stack.snapshot() == before


def test_fork_starts_a_new_run_from_a_step(stack: Stack) -> None:
    done = stack.call(api_event("POST", "/workflows/greet/runs", {"user_id": "u", "email": "e"}))
    stack.drain()
    forked = stack.call(api_event("POST", f"/runs/{done.body['run_id']}/fork", {"from_step": 1}))
    assert forked.status == 201, forked.body
    assert forked.body["run_id"] != done.body["run_id"]
    assert forked.body["requested_by"] == OPERATOR_ARN
    stack.drain()
    assert show(stack, forked.body["run_id"])["status"] == "SUCCEEDED"
