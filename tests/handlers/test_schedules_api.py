"""Schedules through the handlers: the worker reconciles and fires, the API lists,
pauses, resumes and runs now, and the CLI says it all."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable import cli
from tests.handlers.conftest import Stack
from tests.handlers.events import LambdaContext, api_event
from tests.handlers.test_api_events import cli_through, show


def _listed(stack: Stack) -> dict[str, dict[str, object]]:
    reply = stack.call(api_event("GET", "/schedules"))
    assert reply.status == 200, reply.body
    return {s["name"]: s for s in reply.body["schedules"]}


def test_a_schedule_is_declared_reconciled_paused_and_fired(stack: Stack) -> None:
    assert _listed(stack)["morning-greet"]["state"] == "not deployed"
    reply = stack.worker({"control": "reconcile-schedules"}, LambdaContext())
    assert reply["created"] == ["morning-greet"]
    listed = _listed(stack)["morning-greet"]
    assert listed["state"] == "enabled" and listed["expression"] == "cron(0 9 * * ? *)"
    assert listed["timezone"] == "Europe/Berlin" and listed["overlap"] == "skip"
    assert str(listed["next_fire"]).endswith(("T08:00:00.000Z", "T07:00:00.000Z"))

    stamp = (stack.clock.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fire = {"schedule": "morning-greet", "scheduled_time": stamp}
    first = stack.worker(fire, LambdaContext())
    assert first["result"] == "started"
    assert stack.worker(fire, LambdaContext()) == {**first, "result": "duplicate"}
    stack.drain()
    assert show(stack, str(first["run_id"]))["output"] == {"greeting": "hello team"}
    assert stack.worker({"schedule": "gone", "scheduled_time": stamp}, LambdaContext()) == {
        "schedule": "gone",
        "result": "dropped",
    }

    paused = stack.call(api_event("POST", "/schedules/morning-greet/pause"))
    assert paused.status == 202 and paused.body["state"] == "paused"
    assert paused.body["next_fire"] is None
    assert stack.recurring.held["morning-greet"].enabled is False
    again = stack.worker({"control": "reconcile-schedules"}, LambdaContext())
    assert again["unchanged"] == ["morning-greet"]
    assert stack.recurring.held["morning-greet"].enabled is False  # a deploy keeps it paused
    resumed = stack.call(api_event("POST", "/schedules/morning-greet/resume"))
    assert resumed.status == 202 and resumed.body["state"] == "enabled"

    missing = stack.call(api_event("POST", "/schedules/nightly/pause"))
    assert missing.status == 404 and "no schedule named 'nightly'" in missing.error["message"]
    assert "morning-greet" in missing.error["message"]


def test_run_now_starts_once_per_key(stack: Stack) -> None:
    headers = {"Idempotency-Key": "ops-1"}
    first = stack.call(api_event("POST", "/schedules/morning-greet/run", headers=headers))
    assert first.status == 202 and first.body["result"] == "started"
    again = stack.call(api_event("POST", "/schedules/morning-greet/run", headers=headers))
    assert again.body == {**first.body, "result": "duplicate"}
    other = stack.call(api_event("POST", "/schedules/morning-greet/run"))
    assert other.body["result"] == "started" and other.body["run_id"] != first.body["run_id"]
    stack.drain()
    run = show(stack, first.body["run_id"])
    assert run["status"] == "SUCCEEDED"
    assert run["idempotency_key"] == "schedule/morning-greet/now-ops-1"


def test_the_cli_lists_pauses_and_runs(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.worker({"control": "reconcile-schedules"}, LambdaContext())
    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    capsys.readouterr()
    assert cli.main([*base, "schedules"]) == 0
    out = capsys.readouterr().out
    assert "morning-greet" in out and "cron(0 9 * * ? *) Europe/Berlin" in out
    assert "enabled" in out and "skip" in out
    assert cli.main([*base, "schedules", "pause", "morning-greet"]) == 0
    assert capsys.readouterr().out.strip() == "schedule morning-greet: paused"
    assert cli.main([*base, "schedules", "run", "morning-greet", "--key", "k1"]) == 0
    assert "schedule morning-greet: started, run " in capsys.readouterr().out
    assert cli.main([*base, "schedules", "resume"]) == 1
    assert "needs the schedule's name" in capsys.readouterr().err
