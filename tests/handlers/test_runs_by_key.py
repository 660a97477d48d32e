"""Runs addressed by business key through the API and the CLI (issue 33, item 1):
``POST /workflows/{w}/runs?if_running=attach``, ``GET /workflows/{w}/runs?key=`` and
``durable show|signal|cancel key:<KEY> --workflow W``."""

from __future__ import annotations

import pytest

from tests.handlers.conftest import Reply, Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through


def keyed_start(stack: Stack, amount: int, key: str, if_running: str | None = None) -> Reply:
    query = {"if_running": if_running} if if_running else None
    return stack.call(
        api_event(
            "POST",
            "/workflows/approval/runs",
            {"amount": amount},
            headers={"Idempotency-Key": key},
            query=query,
        )
    )


def test_a_keyed_start_attaches_to_the_running_run_or_says_how(stack: Stack) -> None:
    first = keyed_start(stack, 5, "expense-77")
    assert first.status == 202
    stack.drain()
    conflict = keyed_start(stack, 6, "expense-77")
    assert conflict.status == 409
    assert 'if_running="attach"' in conflict.error["message"]
    before = stack.snapshot()
    attached = keyed_start(stack, 6, "expense-77", "attach")
    assert attached.status == 202
    assert attached.body["run_id"] == first.body["run_id"]
    assert stack.snapshot() == before and stack.invoker.pop() is None  # nothing started
    bad = keyed_start(stack, 6, "expense-77", "ATTACH")
    assert bad.status == 422


def test_a_run_is_listed_by_its_key_within_its_workflow(stack: Stack) -> None:
    started = keyed_start(stack, 5, "expense-78")
    run_id = started.body["run_id"]
    stack.drain()
    for path in ("/workflows/approval/runs", "/runs"):
        query = (
            {"key": "expense-78"}
            if path != "/runs"
            else {"key": "expense-78", "workflow": "approval"}
        )
        found = stack.call(api_event("GET", path, query=query))
        assert found.status == 200 and [r["run_id"] for r in found.body["runs"]] == [run_id]
        assert found.body["runs"][0]["idempotency_key"] == "expense-78"
    none = stack.call(api_event("GET", "/workflows/greet/runs", query={"key": "expense-78"}))
    assert none.status == 200 and none.body["runs"] == []
    unscoped = stack.call(api_event("GET", "/runs", query={"key": "expense-78"}))
    assert unscoped.status == 400 and unscoped.error["field"] == "workflow"


def test_the_cli_addresses_a_run_by_its_key(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable import cli

    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    assert (
        cli.main(
            [*base, "start", "approval", "--input", '{"amount": 5}', "--idempotency-key", "exp-9"]
        )
        == 0
    )
    stack.drain()
    capsys.readouterr()
    assert cli.main([*base, "show", "--key", "exp-9", "--workflow", "approval"]) == 0
    shown = capsys.readouterr().out
    assert "approval" in shown and "WAITING" in shown
    run_id = stack.call(api_event("GET", "/workflows/approval/runs", query={"key": "exp-9"})).body[
        "runs"
    ][0]["run_id"]
    assert cli.main([*base, "signal", "key:exp-9", "nudge", "--workflow", "approval"]) == 0
    assert "sent to run key:exp-9" in capsys.readouterr().out
    signals = stack.call(api_event("GET", f"/runs/{run_id}")).body["signals"]
    assert [s["name"] for s in signals] == ["nudge"]
    assert (
        cli.main([*base, "cancel", "key:exp-9", "--workflow", "approval", "--reason", "dup"]) == 0
    )
    capsys.readouterr()
    stack.drain()
    found = stack.call(api_event("GET", "/workflows/approval/runs", query={"key": "exp-9"}))
    assert found.body["runs"][0]["status"] == "CANCELED"
    assert cli.main([*base, "show", "key:exp-9"]) == 1  # no --workflow
    assert "add --workflow" in capsys.readouterr().err
    assert cli.main([*base, "show", "--key", "nope", "--workflow", "approval"]) == 1
    assert "no run of 'approval' has the key 'nope'" in capsys.readouterr().err


def test_a_repeated_key_says_the_run_was_already_there(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`durable start --idempotency-key k1` twice said "started" both times: the second
    answer now says the run the key started before is the answer (the API's `existing`),
    through the duplicate guard and through attach alike."""
    from durable import cli

    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    start = [*base, "start", "approval", "--input", '{"amount": 5}', "--idempotency-key", "k1"]

    def said() -> str:  # the CLI's own line (a metric line may come before it)
        return capsys.readouterr().out.splitlines()[-1]

    assert cli.main(start) == 0
    first = said()
    assert first.startswith("started run ")
    run_id = first.split()[2]
    assert cli.main(start) == 0
    assert said().startswith(f"already started: run {run_id} (")
    assert cli.main([*start, "--if-running", "attach"]) == 0
    assert said().startswith(f"attached to run {run_id} (")
    fresh = keyed_start(stack, 7, "k2")
    assert fresh.status == 202 and fresh.body["existing"] is False
    again = keyed_start(stack, 7, "k2")
    assert again.body["existing"] is True and again.body["run_id"] == fresh.body["run_id"]
