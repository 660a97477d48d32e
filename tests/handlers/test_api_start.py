"""POST /workflows/{name}/runs and the reads, through real API Gateway proxy events."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest

from tests.handlers.conftest import Reply, Stack, build_stack
from tests.handlers.events import OPERATOR_ARN, api_event

SIGNUP = {"user_id": "u1", "email": "u1@example.com"}


def start(stack: Stack, body: Any = SIGNUP, key: str | None = None, **kw: Any) -> Reply:
    headers = {"Idempotency-Key": key} if key else None
    return stack.call(api_event("POST", "/workflows/greet/runs", body, headers=headers, **kw))


def test_start_without_key_creates_a_run_and_invokes_the_worker(stack: Stack) -> None:
    # WHEN an operator starts a run
    reply = start(stack)
    # THEN it is accepted as PENDING, requested by the IAM caller, and a worker is invoked
    assert reply.status == 202
    assert reply.body["status"] == "PENDING"
    assert reply.body["requested_by"] == OPERATOR_ARN
    assert [w["result"] for w in stack.drain()] == ["succeeded"]
    shown = stack.call(api_event("GET", f"/runs/{reply.body['run_id']}"))
    assert shown.status == 200
    assert shown.body["status"] == "SUCCEEDED"
    assert shown.body["input"] == SIGNUP
    assert shown.body["output"] == {"greeting": "hello u1"}
    assert [s["name"] for s in shown.body["steps"]] == ["greet_user"]
    assert "token_hash" not in json.dumps(shown.body)


def test_two_starts_without_key_are_two_runs(stack: Stack) -> None:
    assert start(stack).body["run_id"] != start(stack).body["run_id"]


def test_same_key_and_body_returns_the_same_run_and_writes_nothing(stack: Stack) -> None:
    first = start(stack, key="signup-u1")
    stack.drain()
    before = stack.snapshot()
    # WHEN the client retries with the same key and body
    again = start(stack, key="signup-u1")
    # THEN it gets the original run back, said to be an existing one; no item changed,
    # no worker was invoked
    assert again.status == 202
    assert again.body == {**first.body, "existing": True}
    assert first.body["existing"] is False
    assert stack.snapshot() == before
    assert stack.invoker.pop() is None


def test_same_key_with_another_body_is_409_and_writes_nothing(stack: Stack) -> None:
    start(stack, key="signup-u1")
    before = stack.snapshot()
    reply = start(stack, {"user_id": "u2", "email": "u2@example.com"}, key="signup-u1")
    assert reply.status == 409
    assert reply.error["type"] == "IdempotencyConflict"
    assert stack.snapshot() == before


def test_key_reused_after_the_guard_record_expired_still_dedupes(stack: Stack) -> None:
    # GIVEN a keyed run whose Powertools record is gone (expired, deleted by TTL)
    first = start(stack, key="k-1")
    idem = stack.tables[1]
    for item in stack.client.scan(TableName=idem)["Items"]:
        stack.client.delete_item(TableName=idem, Key={"id": item["id"]})
    # THEN the run id derived from the key still finds the same run
    again = start(stack, key="k-1")
    assert again.body["run_id"] == first.body["run_id"]


@pytest.mark.integration  # moto in-process does not serialize racing conditional writes
def test_concurrent_identical_requests_get_one_run(local_stack: Stack) -> None:
    replies: list[Reply] = []
    barrier = threading.Barrier(4)

    def send() -> None:
        barrier.wait()
        replies.append(start(local_stack, key="same-delivery"))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in replies] == [202] * 4
    assert len({r.body["run_id"] for r in replies}) == 1
    runs = local_stack.call(api_event("GET", "/runs", query={"workflow": "greet"}))
    assert len(runs.body["runs"]) == 1


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/workflows/nope/runs", SIGNUP, 404, None),
        ("/workflows/greet/runs", {"user_id": "u1"}, 422, "email"),
        ("/workflows/greet/runs", {"user_id": 5, "email": "e"}, 422, "user_id"),
        ("/workflows/greet/runs", None, 422, None),
        ("/workflows/signalled/runs", {"unexpected": 1}, 422, "input"),
    ],
)
def test_refused_starts_write_nothing(
    stack: Stack, path: str, body: Any, status: int, field: str | None
) -> None:
    before = stack.snapshot()
    reply = stack.call(api_event("POST", path, body, headers={"Idempotency-Key": "k"}))
    assert reply.status == status, reply.body
    if field:
        assert reply.error["field"] == field
    assert stack.snapshot() == before
    assert stack.invoker.pop() is None


@pytest.mark.parametrize("raw", ['{"user_id": ', "NaN", "{'single': 'quotes'}", "[1,]"])
def test_malformed_json_is_400(stack: Stack, raw: str) -> None:
    before = stack.snapshot()
    reply = stack.call(api_event("POST", "/workflows/greet/runs", raw=raw))
    assert reply.status == 400
    assert reply.error == {
        "type": "MalformedJSON",
        "message": reply.error["message"],
        "field": "body",
    }
    assert stack.snapshot() == before


def test_oversized_body_is_413_before_anything_is_parsed(stack: Stack) -> None:
    before = stack.snapshot()
    big = {"user_id": "u", "email": "x" * (stack.settings.max_body_bytes + 1)}
    reply = stack.call(api_event("POST", "/workflows/greet/runs", big))
    assert reply.status == 413
    assert reply.error["type"] == "PayloadTooLarge"
    assert stack.snapshot() == before


def test_base64_encoded_body_is_decoded(stack: Stack) -> None:
    reply = start(stack, base64_body=True)
    assert reply.status == 202
    assert reply.body["workflow"] == "greet"


def test_an_empty_idempotency_key_is_422(stack: Stack) -> None:
    before = stack.snapshot()
    reply = start(stack, key=" ")
    assert reply.status == 422
    assert reply.error["field"] == "Idempotency-Key"
    assert stack.snapshot() == before


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/nope"), ("DELETE", "/runs/01JDURABLE0000000000000000/nope"), ("PUT", "/")],
)
def test_unknown_routes_are_404_json(stack: Stack, method: str, path: str) -> None:
    reply = stack.call(api_event(method, path))
    assert reply.status == 404
    assert reply.error["type"] == "NotFound"
    assert reply.headers["Content-Type"] == "application/json"


def test_unknown_and_malformed_run_ids_are_404(stack: Stack) -> None:
    for run_id in ["01JDURABLE0000000000000000", "not-a-run", "x" * 2000]:
        reply = stack.call(api_event("GET", f"/runs/{run_id}"))
        assert reply.status == 404
        assert reply.error["type"] == "RunNotFound"


def test_listing_runs_pages_by_workflow_newest_first(stack: Stack) -> None:
    ids = [start(stack).body["run_id"] for _ in range(3)]
    first = stack.call(api_event("GET", "/runs", query={"workflow": "greet", "limit": "2"}))
    assert first.status == 200
    assert len(first.body["runs"]) == 2
    cursor = first.body["next_cursor"]
    assert cursor
    rest = stack.call(
        api_event("GET", "/runs", query={"workflow": "greet", "limit": "2", "cursor": cursor})
    )
    listed = [r["run_id"] for r in first.body["runs"] + rest.body["runs"]]
    assert sorted(listed) == sorted(ids)
    assert rest.body.get("next_cursor") is None


def test_listing_filters_by_status(stack: Stack) -> None:
    start(stack)
    stack.drain()
    start(stack)
    done = stack.call(api_event("GET", "/runs", query={"workflow": "greet", "status": "SUCCEEDED"}))
    assert [r["status"] for r in done.body["runs"]] == ["SUCCEEDED"]


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ({}, 400, "workflow"),
        ({"workflow": "greet", "status": "DONE"}, 422, "status"),
        ({"workflow": "greet", "limit": "0"}, 422, "limit"),
        ({"workflow": "greet", "cursor": "%%%"}, 400, "cursor"),
    ],
)
def test_bad_listing_queries(stack: Stack, query: dict[str, str], status: int, field: str) -> None:
    reply = stack.call(api_event("GET", "/runs", query=query))
    assert reply.status == status, reply.body
    assert reply.error["field"] == field


def crafted(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        crafted({"pk": {"S": "RUN#X"}}),  # not the index's key
        crafted({"pk": 1, "sk": 2, "list_pk": 3, "list_sk": 4}),  # not strings
        crafted(
            {
                "pk": {"S": "RUN#X"},
                "sk": {"S": "RUN"},
                "list_pk": {"S": "WF#other"},  # another listing's cursor
                "list_sk": {"S": "PENDING#2026"},
            }
        ),
        crafted(["not", "a", "key"]),
        "bm90IGpzb24",  # base64, not JSON
        "12x",
    ],
)
def test_a_crafted_cursor_is_400_naming_the_cursor(stack: Stack, cursor: str) -> None:
    """GIVEN a cursor this API never handed out (issue 13, finding 7)
    WHEN a listing is asked for with it
    THEN 400 naming the cursor, never a 500 or a 503 that says to retry."""
    reply = stack.call(api_event("GET", "/runs", query={"workflow": "greet", "cursor": cursor}))
    assert reply.status == 400, reply.body
    assert reply.error["field"] == "cursor"


def test_a_cursor_handed_out_pages_on(stack: Stack) -> None:
    for i in range(3):
        body = json.dumps({"user_id": f"u{i}", "email": "e"})
        assert stack.call(api_event("POST", "/workflows/greet/runs", raw=body)).status == 202
    query = {"workflow": "greet", "limit": "2"}
    first = stack.call(api_event("GET", "/runs", query=query))
    cursor = first.body["next_cursor"]
    second = stack.call(api_event("GET", "/runs", query={**query, "cursor": cursor}))
    assert second.status == 200 and len(first.body["runs"]) + len(second.body["runs"]) == 3


def test_runs_needing_attention_are_listed_without_a_workflow(stack: Stack) -> None:
    reply = stack.call(api_event("GET", "/runs", query={"needs_attention": "true"}))
    assert reply.status == 200
    assert reply.body["runs"] == []


def test_workflows_lists_versions_and_input_schemas(stack: Stack) -> None:
    reply = stack.call(api_event("GET", "/workflows"))
    by_name = {w["name"]: w for w in reply.body["workflows"]}
    assert by_name["greet"]["versions"] == [1]
    assert by_name["greet"]["input_schema"]["required"] == ["user_id", "email"]
    assert by_name["signalled"]["takes_input"] is False
    assert by_name["signalled"]["input_schema"] is None


def test_a_keyed_start_while_the_idempotency_table_is_down_is_503(stack: Stack) -> None:
    """GIVEN an idempotency table that cannot be reached (here: one that does not exist)
    WHEN a keyed start comes in
    THEN 503 with Retry-After, like every other storage outage, not a 500 (finding 8); and
    no run was created."""
    broken = build_stack(stack.client, None, tables=(stack.tables[0], "no-such-table"))
    body = json.dumps({"user_id": "u1", "email": "e"})
    reply = broken.call(
        api_event("POST", "/workflows/greet/runs", raw=body, headers={"Idempotency-Key": "k-503"})
    )
    assert reply.status == 503, reply.body
    assert reply.headers.get("Retry-After") == "5"
    listed = stack.call(api_event("GET", "/runs", query={"workflow": "greet"}))
    assert listed.body["runs"] == []


@pytest.mark.parametrize("route", ["get", "list", "start"])
def test_error_bodies_never_carry_internals(stack: Stack, route: str) -> None:
    """GIVEN a stack whose ledger table cannot be used (a misconfiguration)
    WHEN a client calls it
    THEN the answer is a generic error: no table name, ARN or stack trace leaks (issue 13,
    finding 9); the detail goes to the function's log."""
    broken = build_stack(stack.client, None, tables=("secret-ledger-name", stack.tables[1]))
    if route == "get":
        event = api_event("GET", "/runs/" + "0" * 26)
    elif route == "list":
        event = api_event("GET", "/runs", query={"workflow": "greet"})
    else:
        event = api_event("POST", "/workflows/greet/runs", {"user_id": "u", "email": "e"})
    reply = broken.call(event)
    assert reply.status >= 500, reply.body
    text = json.dumps(reply.body)
    for leak in ("secret-ledger-name", "arn:aws", "Traceback", "ResourceNotFound", ".py"):
        assert leak not in text
