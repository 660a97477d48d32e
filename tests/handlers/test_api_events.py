"""Callbacks, signals and operator decisions through the API; every refusal writes nothing."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from typing import Any

import pytest

from durable import cli
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
    (stored,) = [s["output"] for s in show(stack, run_id)["steps"] if s["name"] == "manager.submit"]
    url = workflows.OUTBOX[run_id]
    assert url.startswith(stack.settings.callback_base_url + "/callbacks/")
    assert stored == stack.settings.callback_base_url + "/callbacks/<callback token redacted>"
    token: str = url.rsplit("/", 1)[1]
    return token


def answer(stack: Stack, token: str, body: Any) -> Reply:
    """Post the sender's own JSON as the callback's result (authorized by the token: no
    IAM caller)."""
    return stack.call(api_event("POST", f"/callbacks/{token}", body, caller=None))


def reject(stack: Stack, token: str, body: Any) -> Reply:
    return stack.call(api_event("POST", f"/callbacks/{token}/fail", body, caller=None))


def test_callback_approve_resumes_the_run(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    reply = answer(stack, callback_token(stack, run_id), {"by": "manager"})
    assert reply.status == 202
    assert reply.body == {"run_id": run_id, "outcome": "result"}
    stack.drain()
    assert show(stack, run_id)["output"] == {"approved": {"by": "manager"}}


def test_an_operator_approves_by_run_and_wait_name(stack: Stack) -> None:
    """GIVEN a run waiting on its "manager" callback
    WHEN an IAM caller answers POST /runs/{id}/waits/manager (no token)
    THEN the run resumes with the answer and the step records the caller's ARN; a second
    answer is 409 and an unknown wait 404, writing nothing."""
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    reply = stack.call(api_event("POST", f"/runs/{run_id}/waits/manager", {"result": "ops"}))
    assert (reply.status, reply.body) == (202, {"run_id": run_id, "outcome": "result"})
    before = stack.snapshot()
    again = stack.call(api_event("POST", f"/runs/{run_id}/waits/manager", {"result": "x"}))
    unknown = stack.call(api_event("POST", f"/runs/{run_id}/waits/nope", {"result": "x"}))
    assert (again.status, unknown.status) == (409, 404)
    assert stack.snapshot() == before
    stack.drain()
    shown = show(stack, run_id)
    assert shown["output"] == {"approved": "ops"}
    (wait,) = [s for s in shown["steps"] if s["name"] == "manager"]
    assert wait["completed_by"] == OPERATOR_ARN


def test_the_cli_approves_and_rejects_by_run_and_wait_name(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    approved = run_to_wait(stack, "approval", {"amount": 5})
    rejected = run_to_wait(stack, "approval", {"amount": 6})
    base = ["--endpoint", "http://127.0.0.1:1"]
    assert cli.main([*base, "approve", approved, "manager", "--result", '"cli"']) == 0
    assert cli.main([*base, "reject", rejected, "manager", "--reason", "no"]) == 0
    stack.drain()
    assert show(stack, approved)["output"] == {"approved": "cli"}
    assert show(stack, rejected)["output"] == {"rejected": "no"}


def test_callback_reject_fails_the_wait(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {})
    reply = reject(stack, callback_token(stack, run_id), {"message": "too much"})
    assert reply.body["outcome"] == "error"
    stack.drain()
    assert show(stack, run_id)["output"] == {"rejected": "too much"}


def test_callback_answered_twice_is_409_and_writes_nothing(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    assert answer(stack, token, True).status == 202
    stack.drain()
    before = stack.snapshot()
    reply = answer(stack, token, False)
    assert reply.status == 409
    assert reply.error["type"] == "CallbackAlreadyCompleted"
    assert stack.snapshot() == before


def test_expired_callback_is_410(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    later(stack, days=2)
    before = stack.snapshot()
    reply = answer(stack, token, True)
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
    reply = answer(stack, bad, True)
    assert reply.status == (422 if mangle in {"truncate", "garbage"} else 404), reply.body
    assert stack.snapshot() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [({"type": ""}, "type"), ({"surprise": 1}, "surprise"), ([1], None)],
)
def test_malformed_rejections(stack: Stack, body: Any, field: str | None) -> None:
    run_id = run_to_wait(stack, "approval", {})
    token = callback_token(stack, run_id)
    before = stack.snapshot()
    reply = reject(stack, token, body)
    assert reply.status == 422
    if field:
        assert reply.error["field"] == field
    assert stack.snapshot() == before
    malformed = stack.call(api_event("POST", f"/callbacks/{token}", raw='{"result": '))
    assert malformed.status == 400


def test_a_senders_own_json_is_the_result_whatever_its_shape(stack: Stack) -> None:
    """GIVEN a carrier that posts its own payload to the callback URL (issue 13: the body
    had to be wrapped in {"result": ...} and answered 422 otherwise)
    WHEN it posts, unwrapped
    THEN that payload is the callback's result."""
    run_id = run_to_wait(stack, "approval", {})
    payload = {"tracking": "1Z999", "status": "delivered", "result": "not an envelope"}
    assert answer(stack, callback_token(stack, run_id), payload).status == 202
    stack.drain()
    assert show(stack, run_id)["output"] == {"approved": payload}


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


# --- signals with an Idempotency-Key --------------------------------------------------------


def send_signal(
    stack: Stack, run_id: str, body: Any, key: str | None, header: str = "Idempotency-Key"
) -> Reply:
    headers = {header: key} if key is not None else None
    return stack.call(api_event("POST", f"/runs/{run_id}/signals/go", body, headers=headers))


def test_a_signal_retried_with_its_idempotency_key_is_stored_once(stack: Stack) -> None:
    # GIVEN a run waiting for its signal, and a sender whose first answer got lost
    run_id = run_to_wait(stack, "signalled")
    first = send_signal(stack, run_id, {"speed": 3}, "order-7-go")
    assert first.status == 202, first.body
    assert first.body["duplicate"] is False
    # WHEN it sends again with the same key and body, before the run took the signal (the
    # header as an HTTP/2 client sends it: lower case) and after the run finished
    before = stack.snapshot()
    again = send_signal(stack, run_id, {"speed": 3}, "order-7-go", header="idempotency-key")
    assert stack.snapshot() == before  # no second signal, no second inbox bump
    stack.drain()
    late = send_signal(stack, run_id, {"speed": 3}, "order-7-go")
    # THEN both repeats are answered with the first signal, marked as a duplicate
    assert (again.status, again.body) == (202, {**first.body, "duplicate": True})
    assert (late.status, late.body) == (202, {**first.body, "duplicate": True})
    assert stack.invoker.pop() is None  # the finished run was not woken
    # AND the run took the signal once; the ledger holds hashes of the key, never the key
    detail = show(stack, run_id)
    assert (detail["status"], detail["output"]) == ("SUCCEEDED", {"speed": 3})
    assert [s["signal_id"] for s in detail["signals"]] == [first.body["signal_id"]]
    assert "order-7-go" not in json.dumps(stack.snapshot())


def test_an_idempotency_key_reused_with_another_body_is_409(stack: Stack) -> None:
    # GIVEN a keyed signal, buffered for a run that waits for another one
    run_id = run_to_wait(stack, "signalled")
    path = f"/runs/{run_id}/signals/later"
    key = {"Idempotency-Key": "k-1"}
    sent = stack.call(api_event("POST", path, {"a": 1, "b": [2]}, headers=key))
    assert sent.status == 202, sent.body
    stack.drain()
    before = stack.snapshot()
    # WHEN the key comes back with another body, and with the same object in another order
    other = stack.call(api_event("POST", path, {"a": 2}, headers=key))
    same = stack.call(api_event("POST", path, raw='{"b": [2], "a": 1}', headers=key))
    # THEN the other body is a 409 naming the header, the reordered one a repeat; neither
    # wrote anything
    assert other.status == 409, other.body
    assert other.error["type"] == "IdempotencyConflict"
    assert other.error["field"] == "Idempotency-Key"
    assert "Idempotency-Key" in other.error["message"]
    assert (same.status, same.body["signal_id"]) == (202, sent.body["signal_id"])
    assert stack.snapshot() == before


@pytest.mark.parametrize(
    "key", ["", "   ", "x" * 257, "bell\x07", "tab\there"], ids=lambda k: repr(k)[:12]
)
def test_a_bad_signal_idempotency_key_is_422_and_writes_nothing(stack: Stack, key: str) -> None:
    run_id = run_to_wait(stack, "signalled")
    before = stack.snapshot()
    reply = send_signal(stack, run_id, {"speed": 3}, key)
    assert reply.status == 422, reply.body
    assert reply.error["field"] == "Idempotency-Key"
    assert stack.snapshot() == before
    assert stack.invoker.pop() is None


def cli_through(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's HTTP requests answered by the API handler (urllib's own Request, so
    headers travel the way urllib spells them: "Idempotency-key")."""

    def urlopen(request: urllib.request.Request, timeout: float) -> io.BytesIO:
        data = request.data
        assert isinstance(data, bytes | None)
        url = urllib.parse.urlsplit(request.full_url)
        event = api_event(
            request.get_method(),
            url.path,
            query=dict(urllib.parse.parse_qsl(url.query)) or None,
            raw=data.decode() if data else None,
            headers=dict(request.header_items()),
        )
        reply = stack.call(event)
        body = io.BytesIO(json.dumps(reply.body).encode())
        if reply.status >= 400:
            raise urllib.error.HTTPError(request.full_url, reply.status, "", Message(), body)
        return body

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)  # what `durable.cli` calls


def test_the_cli_sends_its_key_as_the_header(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    run_id = run_to_wait(stack, "signalled")
    argv = ["--endpoint", "http://127.0.0.1:1", "signal", run_id, "go"]
    # WHEN the same keyed signal is sent twice, then the key with another payload
    codes = [
        cli.main([*argv, "--payload", '{"speed": 3}', "--key", "order-7-go"]),
        cli.main([*argv, "--payload", '{"speed": 3}', "--key", "order-7-go"]),
        cli.main([*argv, "--payload", '{"speed": 4}', "--idempotency-key", "order-7-go"]),
    ]
    # THEN the first is stored, the second says it was a repeat, the third is refused
    out, err = capsys.readouterr()
    assert codes == [0, 0, 1]
    # (the handler's structured logs go to stdout too)
    sent, repeated = [line for line in out.splitlines() if line.startswith("signal ")]
    assert sent.startswith("signal 'go' sent to run") and "already" in repeated
    assert "Idempotency-Key" in err
    assert len(show(stack, run_id)["signals"]) == 1


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


def test_every_outside_action_on_a_run_names_who_took_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN runs waiting for a signal and for an approval
    WHEN an IAM caller sends the signal, approves by name and cancels the other run
    THEN the API shows each action with the caller's ARN, and `durable show` prints them
    as the run's audit trail."""
    signalled = run_to_wait(stack, "signalled")
    sent = stack.call(api_event("POST", f"/runs/{signalled}/signals/go", {"n": 1}))
    assert sent.status == 202
    stack.drain()
    (signal,) = show(stack, signalled)["signals"]
    assert signal["sent_by"] == OPERATOR_ARN

    approved = run_to_wait(stack, "approval", {"amount": 5})
    stack.call(api_event("POST", f"/runs/{approved}/waits/manager", {"result": "ops"}))
    stack.drain()
    canceled = run_to_wait(stack, "approval", {"amount": 6})
    stack.call(api_event("POST", f"/runs/{canceled}/cancel", {"reason": "duplicate"}))
    stack.drain()

    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    audits = {}
    for run_id in (signalled, approved, canceled):
        assert cli.main([*base, "show", run_id]) == 0
        out = capsys.readouterr().out
        audits[run_id] = out[out.index("who acted on this run:") :]
    assert "signal" in audits[signalled] and OPERATOR_ARN in audits[signalled]
    assert "approved" in audits[approved] and "manager at" in audits[approved]
    assert OPERATOR_ARN in audits[approved]
    assert "cancel" in audits[canceled] and "duplicate" in audits[canceled]
    assert OPERATOR_ARN in audits[canceled]


def test_a_secret_typed_callback_answer_is_sealed_by_the_api_and_opened_by_the_worker(
    stack: Stack,
) -> None:
    """Issue 32, finding 3: a card number posted to a callback whose result_type types it
    SecretStr was stored in the step item and shown by GET /runs. Now no item of either
    table holds it, the API shows ***, and the workflow charges the real number."""
    number = "5555555555554444"
    reply = stack.call(api_event("POST", "/workflows/card-entry/runs", None))
    run_id = reply.body["run_id"]
    stack.drain()
    token = workflows.OUTBOX[run_id].rsplit("/", 1)[1]
    sent = answer(stack, token, {"holder": "Grace", "number": number})
    assert sent.status == 202, sent.body
    assert number not in json.dumps(stack.snapshot())
    (card,) = [s for s in show(stack, run_id)["steps"] if s["name"] == "card"]
    assert card["output"] == {"holder": "Grace", "number": "***"}
    stack.drain()
    shown = show(stack, run_id)
    assert (shown["status"], shown["output"]) == ("SUCCEEDED", "charged 4444")
    assert number in workflows.CHARGED and number not in json.dumps(stack.snapshot())
