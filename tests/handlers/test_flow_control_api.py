"""Flow control through the handlers: a run held back by its workflow's concurrency
limit is visible as waiting in line in the API, `durable runs` and `durable show`, and
gets its slot when the run ahead of it ends."""

from __future__ import annotations

from typing import Any

import pytest

from durable import cli
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through, show


def _start(stack: Stack, body: Any) -> str:
    reply = stack.call(api_event("POST", "/workflows/export/runs", body))
    assert reply.status == 202, reply.body
    run_id: str = reply.body["run_id"]
    return run_id


def test_a_run_waiting_for_a_slot_is_shown_in_line_until_it_gets_one(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _start(stack, {"account": "acme"})
    second = _start(stack, {"account": "acme"})
    other = _start(stack, {"account": "bolt"})
    stack.drain()
    assert show(stack, first)["status"] == "WAITING" and show(stack, other)["status"] == "WAITING"
    held = show(stack, second)
    assert held["status"] == "PENDING" and held["queued_at"]
    assert held["gate"] == "C#export#acme" and held["place_in_line"] == 1
    listing = stack.call(api_event("GET", "/runs", query={"workflow": "export"})).body["runs"]
    assert {r["run_id"]: bool(r["queued_at"]) for r in listing} == {
        first: False,
        second: True,
        other: False,
    }
    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    capsys.readouterr()
    assert cli.main([*base, "runs", "--workflow", "export"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if second in line]
    assert "PENDING (in line)" in row
    assert cli.main([*base, "show", second]) == 0
    assert "waits  for a concurrency slot since" in capsys.readouterr().out
    reply = stack.call(api_event("POST", f"/runs/{first}/signals/uploaded", {}))
    assert reply.status == 202, reply.body
    stack.drain()
    assert show(stack, first)["status"] == "SUCCEEDED"
    now = show(stack, second)
    assert now["status"] == "WAITING" and now["queued_at"] is None
    assert now["place_in_line"] is None
