"""A run's bill through the handlers: recorded by the worker, priced by the API, shown by
``durable show`` and added up by ``durable cost``."""

from __future__ import annotations

from typing import Any

import pytest

from durable import cli
from durable.core.usage import Prices
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through, run_to_wait, show


def _approved_run(stack: Stack) -> str:
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    reply = stack.call(api_event("POST", f"/runs/{run_id}/waits/manager", {"result": "ok"}))
    assert reply.status == 202, reply.body
    stack.drain()
    assert show(stack, run_id)["status"] == "SUCCEEDED"
    return run_id


def test_the_api_shows_what_a_run_used_and_its_price(stack: Stack) -> None:
    run_id = _approved_run(stack)
    run = show(stack, run_id)
    usage = run["usage"]
    # the start (its API request and write), then two worker invocations: the one that
    # waits for the answer and the one the answer wakes
    assert usage["api"] == 1 and usage["inv"] == 2 and "timers" not in usage
    assert usage["wcu"] >= 10 and usage["ddb"] >= 6 and usage["ms"] >= 2
    assert run["cost"]["prices_of"] == "us-east-1"
    assert run["cost"]["usd"] == pytest.approx(Prices.of("us-east-1").dollars(usage), abs=1e-9)
    assert run["cost"]["usd"] > 0


def test_show_and_cost_in_the_cli(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _approved_run(stack), _approved_run(stack)
    waiting = run_to_wait(stack, "approval", {"amount": 9})
    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    capsys.readouterr()
    assert cli.main([*base, "show", first]) == 0
    shown = capsys.readouterr().out
    assert "  cost   $0.0000" in shown and "at us-east-1 list prices" in shown
    assert cli.main([*base, "cost", "--workflow", "approval", "--since", "1d"]) == 0
    out = capsys.readouterr().out
    rows = {
        line.split()[1]: line.split() for line in out.splitlines() if line.startswith("approval")
    }
    assert rows["SUCCEEDED"][2] == "2" and rows["WAITING"][2] == "1"
    runs: dict[str, Any] = {r: show(stack, r) for r in (first, second, waiting)}
    wcu = sum(runs[r]["usage"]["wcu"] for r in (first, second))
    assert rows["SUCCEEDED"][3] == f"{wcu:g}"
    (total,) = [line.split() for line in out.splitlines() if line.startswith("all")]
    assert total[1] == "3"  # every run counted once
    assert "at us-east-1 list prices" in out
    assert cli.main([*base, "cost", "--workflow", "approval", "--since", "2020-01-01x"]) == 1
    assert "--since '2020-01-01x'" in capsys.readouterr().err
