"""Issue 46, items 7 and 8 through the API handler: ``durable retry`` and ``fork`` take
``key:<KEY>`` with ``--workflow``; ``durable runs --json`` and ``--wide``; ``durable
show`` prints the run's key and "started by schedule NAME"; the start that attaches
says so on a line of its own; a bare ``curl -X POST`` (no body, no content type)
answers a callback and sends a heartbeat; a retried child says what its parent saw."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, cli
from durable.errors import TerminalError
from tests.conftest import MakeTables
from tests.handlers import workflows
from tests.handlers.conftest import Stack, build_stack, later
from tests.handlers.events import LambdaContext, api_event
from tests.handlers.test_api_events import callback_token, cli_through, run_to_wait, show

BASE = ["--endpoint", "http://127.0.0.1:1"]


def said(capsys: pytest.CaptureFixture[str]) -> str:
    """The CLI's own lines (a metric line of the handlers may come before them)."""
    out = capsys.readouterr().out
    return "\n".join(line for line in out.splitlines() if not line.startswith("{"))


def keyed_flaky(stack: Stack, key: str) -> str:
    reply = stack.call(api_event("POST", "/workflows/flaky/runs", headers={"Idempotency-Key": key}))
    assert reply.status == 202, reply.body
    stack.drain()
    run_id: str = reply.body["run_id"]
    assert show(stack, run_id)["status"] == "FAILED"
    return run_id


def test_retry_and_fork_take_a_run_by_its_key(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    run_id = keyed_flaky(stack, "nightly-7")
    workflows.FLAKY["fail"] = False
    assert cli.main([*BASE, "retry", "key:nightly-7"]) == 1  # a key needs its workflow
    assert "add --workflow" in capsys.readouterr().err
    assert cli.main([*BASE, "retry", "key:nightly-7", "--workflow", "flaky"]) == 0
    assert said(capsys) == f"run {run_id} retried: PENDING on version 1"
    stack.drain()
    assert show(stack, run_id)["status"] == "SUCCEEDED"
    argv = [*BASE, "fork", "key:nightly-7", "--workflow", "flaky", "--from-step", "1"]
    assert cli.main(argv) == 0
    line = said(capsys)
    assert line.startswith("forked run ") and line.endswith(f" from {run_id} at step 1")
    forked = line.split()[2]
    (op,) = show(stack, forked)["operations"]
    assert op["action"] == "fork" and f"source={run_id}" in op["detail"]


def test_runs_as_json_and_wide_and_show_prints_the_key(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    key = "supplier-acme-corporation-international-2026-11-30"  # longer than a cell
    run_id = keyed_flaky(stack, key)
    capsys.readouterr()
    assert cli.main([*BASE, "runs", "--workflow", "flaky", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    (run,) = listed["runs"]
    assert (run["run_id"], run["idempotency_key"], run["status"]) == (run_id, key, "FAILED")
    assert run["error"]["message"] and listed["next_cursor"] is None
    assert cli.main([*BASE, "runs", "--workflow", "flaky"]) == 0
    narrow = said(capsys)
    assert key not in narrow and "…" in narrow
    assert cli.main([*BASE, "runs", "--workflow", "flaky", "--wide"]) == 0
    wide = said(capsys)
    assert f"(key {key})" in wide and run["error"]["message"] in wide
    assert cli.main([*BASE, "show", run_id]) == 0
    assert f"  key    {key}" in said(capsys).splitlines()


def test_a_schedules_run_says_started_by_schedule_name(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    stamp = (stack.clock.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fired = stack.worker({"schedule": "morning-greet", "scheduled_time": stamp}, LambdaContext())
    run_id = fired["run_id"]
    assert show(stack, run_id)["requested_by"] == "schedule:morning-greet"
    capsys.readouterr()
    assert cli.main([*BASE, "show", run_id]) == 0
    head = said(capsys).splitlines()[1]
    assert head.endswith("  started by schedule morning-greet"), head
    assert cli.main([*BASE, "runs", "--workflow", "greet", "--wide"]) == 0
    (row,) = [line for line in said(capsys).splitlines() if line.startswith(run_id)]
    assert "schedule morning-greet (key schedule/morning-greet/" in row


def test_an_attaching_start_says_so_on_a_line_of_its_own(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    start = [*BASE, "start", "approval", "--input", '{"amount": 5}', "--idempotency-key", "a1"]
    assert cli.main(start) == 0
    stack.drain()
    run_id = said(capsys).split()[2]
    created = show(stack, run_id)["created_at"]
    assert cli.main([*start, "--if-running", "attach"]) == 0
    out = capsys.readouterr().out
    assert out.endswith(f"attached to run {run_id} (WAITING), started {created}\n"), out


def bare_post(path: str) -> dict[str, Any]:
    """``curl -X POST URL`` as API Gateway delivers it: no body, no Content-Type."""
    event = api_event("POST", path, None, caller=None)
    for headers in (event["headers"], event["multiValueHeaders"]):
        del headers["Content-Type"]
    headers = event["headers"]
    headers["Accept"] = "*/*"
    headers["User-Agent"] = "curl/8.5.0"
    event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    assert event["body"] is None and event["isBase64Encoded"] is False
    return event


def test_a_bare_post_answers_a_callback_and_sends_a_heartbeat(stack: Stack) -> None:
    run_id = run_to_wait(stack, "transcode")
    token = workflows.OUTBOX[run_id].rsplit("/", 1)[-1]
    later(stack, minutes=8)
    beat = stack.call(bare_post(f"/callbacks/{token}/heartbeat"))
    assert beat.status == 202, beat.body
    assert beat.body["run_id"] == run_id
    (waiting,) = [s for s in show(stack, run_id)["steps"] if s["status"] == "WAITING"]
    assert waiting["expires_at"] == beat.body["expires_at"]  # what `durable show` prints
    approval = run_to_wait(stack, "approval", {"amount": 5})
    answered = stack.call(bare_post(f"/callbacks/{callback_token(stack, approval)}"))
    assert answered.status == 202, answered.body
    stack.drain()
    assert show(stack, approval)["output"] == {"approved": None}


def test_durable_runs_shows_the_expiry_a_heartbeat_moved_on(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_through(stack, monkeypatch)
    run_id = run_to_wait(stack, "transcode")
    token = workflows.OUTBOX[run_id].rsplit("/", 1)[-1]

    def row() -> str:
        assert cli.main([*BASE, "runs", "--workflow", "transcode", "--wide"]) == 0
        (line,) = [x for x in said(capsys).splitlines() if x.startswith(run_id)]
        return line

    def expiry() -> str:
        (waiting,) = [s for s in show(stack, run_id)["steps"] if s["status"] == "WAITING"]
        stamp = str(waiting["expires_at"])
        return f"{stamp[:10]} {stamp[11:16]}"  # as the listing prints a time

    before = expiry()
    assert f"callback transcoded until {before}" in row()
    later(stack, minutes=8)
    assert cli.main([*BASE, "heartbeat", token]) == 0
    capsys.readouterr()
    after = expiry()
    assert after != before
    moved = row()
    assert f"callback transcoded until {after}" in moved and before not in moved, moved


# --- a retried child and its parent (item 7) -----------------------------------------

OUTAGE = {"down": True}


def family() -> App:
    app = App()

    @app.workflow(name="import-prices")
    def import_prices(ctx: Context, supplier: str) -> int:
        def fetch() -> int:
            if OUTAGE["down"]:
                raise TerminalError(f"{supplier}'s feed is down")
            return 300

        return int(ctx.step(fetch, name="fetch"))

    @app.workflow(name="nightly")
    def nightly(ctx: Context, supplier: str) -> int:
        rows: int = ctx.run_child(import_prices, supplier, id=f"prices-{supplier}")
        return rows

    return app


@pytest.fixture
def family_stack(moto_client: Any, make_tables: MakeTables) -> Stack:
    OUTAGE["down"] = True
    return build_stack(moto_client, make_tables, app=family())


def test_retrying_a_child_says_what_its_parent_saw_and_how_to_fix_it(
    family_stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = family_stack
    cli_through(stack, monkeypatch)
    started = stack.call(api_event("POST", "/workflows/nightly/runs", "acme"))
    parent = started.body["run_id"]
    stack.drain()
    assert show(stack, parent)["status"] == "FAILED"
    OUTAGE["down"] = False
    capsys.readouterr()
    argv = [*BASE, "retry", "key:prices-acme", "--workflow", "import-prices"]
    assert cli.main(argv) == 0
    first, advice = said(capsys).splitlines()
    assert first.endswith("retried: PENDING on version 1")
    assert advice.startswith(
        f"its parent run {parent} recorded this run's failure at position 0001, and that "
        f"record is final: the parent failed there, so `durable retry {parent}` takes"
    ), advice
    stack.drain()
    assert cli.main([*BASE, "retry", parent]) == 0
    assert said(capsys) == f"run {parent} retried: PENDING on version 1"
    stack.drain()
    detail = show(stack, parent)
    assert (detail["status"], detail["output"]) == ("SUCCEEDED", 300)
