""" "Needs attention" says what needs a person (issue 33, item 2): the API, the CLI and
the console list failed runs and runs waiting on a person's answer, and a listing says
what a waiting run waits for and who started it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.handlers import workflows
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through


@pytest.fixture
def failing() -> Iterator[None]:
    workflows.FLAKY["fail"] = True
    try:
        yield
    finally:
        workflows.FLAKY["fail"] = False


def _start(stack: Stack, workflow: str, body: object = None, key: str | None = None) -> str:
    headers = {"Idempotency-Key": key} if key else None
    reply = stack.call(api_event("POST", f"/workflows/{workflow}/runs", body, headers=headers))
    assert reply.status == 202, reply.body
    return str(reply.body["run_id"])


def test_attention_lists_a_failed_run_and_a_waiting_approval_not_a_sleep(
    stack: Stack,
    failing: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With a run FAILED and an approval waiting, "Needs attention" said "No runs match":
    it listed only runs the engine parked. Now both are there, a sleeping run is not, and
    each row says what it waits for and who started it."""
    failed = _start(stack, "flaky")
    waiting = _start(stack, "approval", {"amount": 5}, key="expense-12")
    sleeping = _start(stack, "sleeper")
    stack.drain()
    reply = stack.call(api_event("GET", "/runs", query={"needs_attention": "true"}))
    assert reply.status == 200
    rows = {r["run_id"]: r for r in reply.body["runs"]}
    assert set(rows) == {failed, waiting}, rows
    assert rows[failed]["status"] == "FAILED" and rows[failed]["waiting_for"] is None
    assert rows[waiting]["waiting_for"].startswith("callback manager until ")
    listed = stack.call(api_event("GET", "/workflows/sleeper/runs")).body["runs"]
    assert listed[0]["run_id"] == sleeping
    assert listed[0]["waiting_for"].startswith("sleep sleep until ")
    detail = stack.call(api_event("GET", f"/runs/{waiting}")).body
    assert detail["waiting_for"] == rows[waiting]["waiting_for"]

    from durable import cli

    cli_through(stack, monkeypatch)
    assert cli.main(["--endpoint", "http://127.0.0.1:1", "runs", "--attention"]) == 0
    # The table's lines (the stack's JSON logs share stdout here).
    table = "\n".join(r for r in capsys.readouterr().out.splitlines() if not r.startswith("{"))
    assert "waiting for" in table and "started by" in table
    line = next(row for row in table.splitlines() if row.startswith(waiting))
    assert "callback manager until 20" in line and "(key expense-12)" in line
    assert failed in table and sleeping not in table

    # Answered: the run goes on, and leaves the list.
    answer = stack.call(
        api_event("POST", f"/runs/{waiting}/waits/manager", {"result": {"approved": True}})
    )
    assert answer.status == 202, answer.body
    stack.drain()
    again = stack.call(api_event("GET", "/runs", query={"needs_attention": "true"}))
    assert [r["run_id"] for r in again.body["runs"]] == [failed]


def test_the_attention_alarms_gauge_counts_only_runs_the_engine_parked(
    stack: Stack, failing: None
) -> None:
    """The sweeper's RunsNeedingAttention gauge (the AttentionAlarm, Maximum >= 1) counted
    the attention index; that index now holds every FAILED run and every waiting approval,
    so the alarm would go off at the first routine approval and stay on. It counts the
    runs the engine flagged for an operator, as it did."""
    from durable.core.model import RunError
    from tests.handlers.events import LambdaContext, scheduled_sweep_event

    _start(stack, "flaky")
    _start(stack, "approval", {"amount": 5})
    stack.drain()
    sweeper = stack.handlers["sweeper"]
    context = LambdaContext(function_name="durable-sweeper-test")
    assert sweeper(scheduled_sweep_event(), context)["needs_attention"] == 0
    listed = stack.call(api_event("GET", "/runs", query={"needs_attention": "true"}))
    assert len(listed.body["runs"]) == 2  # both are in the index, for a person to see
    parked = _start(stack, "flaky")
    stack.drain()
    runtime = sweeper.runtime
    assert runtime is not None  # composed by the sweep above
    ledger = runtime.engine.ledger
    ledger.operate(  # the engine parks a run for an operator (a NonDeterminismError, say)
        parked,
        statuses=("FAILED",),
        changes={
            "status": "FAILED",
            "needs_attention": True,
            "error": RunError("NonDeterminismError", "diverged").to_dict(),
        },
    )
    assert sweeper(scheduled_sweep_event(), context)["needs_attention"] == 1


def test_a_heartbeat_through_the_api_and_the_cli_keeps_the_wait_alive(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """POST /callbacks/{token}/heartbeat (the token is the authority, as for an answer),
    and `durable heartbeat TOKEN|URL`: the wait's expiry moves on; a missed one ends it."""
    from durable import cli
    from tests.handlers.conftest import later

    run_id = _start(stack, "transcode")
    stack.drain()
    url = workflows.OUTBOX[run_id]
    token = url.rsplit("/", 1)[-1]
    later(stack, minutes=8)
    beat = stack.call(api_event("POST", f"/callbacks/{token}/heartbeat", None))
    assert beat.status == 202, beat.body
    assert beat.body["run_id"] == run_id and beat.body["expires_at"] > "2026"
    cli_through(stack, monkeypatch)
    later(stack, minutes=8)  # 16 minutes in: alive only thanks to the heartbeats
    assert cli.main(["--endpoint", "http://127.0.0.1:1", "heartbeat", url]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith(f"heartbeat taken: run {run_id} now waits until ")
    stack.drain()
    assert stack.call(api_event("GET", f"/runs/{run_id}")).body["status"] == "WAITING"
    later(stack, minutes=11)  # silence: the next look times it out
    gone = stack.call(api_event("POST", f"/callbacks/{token}/heartbeat", None))
    assert gone.status == 410, gone.body
    forged = stack.call(api_event("POST", f"/callbacks/{token[:-4]}AAAA/heartbeat", None))
    assert forged.status == 404
