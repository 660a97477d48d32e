"""Issue 46 item 3 through the handlers: the worker's fire handler records each fire's
verdict, ``GET /schedules`` lists the recent ones, ``durable schedules`` shows the last
fire and ``durable schedules NAME`` the recent ones, and under ``durable dev``'s console
the worker prints one line per fire."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import cli
from durable.engine.run_logging import STEP_LOGGER, WORKFLOW_LOGGER
from tests.conftest import MakeTables
from tests.handlers.conftest import Stack, build_stack
from tests.handlers.events import LambdaContext, api_event
from tests.handlers.test_api_events import cli_through


def _fire(stack: Stack, ago: timedelta) -> dict[str, Any]:
    stamp = (stack.clock.now() - ago).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {"schedule": "morning-greet", "scheduled_time": stamp}
    reply: dict[str, Any] = stack.worker(event, LambdaContext())
    return reply


def _fires(stack: Stack) -> list[dict[str, Any]]:
    reply = stack.call(api_event("GET", "/schedules"))
    assert reply.status == 200, reply.body
    (listed,) = [s for s in reply.body["schedules"] if s["name"] == "morning-greet"]
    fires: list[dict[str, Any]] = listed["recent_fires"]
    return fires


def test_get_schedules_lists_each_fires_verdict_newest_first(stack: Stack) -> None:
    stack.worker({"control": "reconcile-schedules"}, LambdaContext())
    assert _fires(stack) == []
    started = _fire(stack, timedelta(minutes=1))
    assert started["result"] == "started"
    _fire(stack, timedelta(minutes=1))  # Scheduler delivers it again
    missed = _fire(stack, timedelta(hours=3))
    assert missed["result"] == "skipped_missed"
    run_now = stack.call(api_event("POST", "/schedules/morning-greet/run"))
    assert run_now.status == 202
    fires = _fires(stack)
    assert [(f["result"], f["run_id"], f["manual"]) for f in fires] == [
        ("started", run_now.body["run_id"], True),
        ("skipped_missed", None, False),
        ("duplicate", started["run_id"], False),
        ("started", started["run_id"], False),
    ]
    assert fires[1]["detail"] == "3:00:00 late"
    stamp = (stack.clock.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert fires[3]["scheduled_time"] == stamp and fires[3]["decided_at"]
    assert fires[3]["detail"] == "0:01:00 late"


def test_the_cli_shows_the_last_fire_and_a_schedules_recent_fires(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.worker({"control": "reconcile-schedules"}, LambdaContext())
    started = _fire(stack, timedelta(minutes=1))
    _fire(stack, timedelta(hours=3))
    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    capsys.readouterr()
    assert cli.main([*base, "schedules"]) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    assert header.rstrip().endswith("last fire")
    assert row.rstrip().endswith(" missed") and "morning-greet" in row
    for argv in (["schedules", "morning-greet"], ["schedules", "show", "morning-greet"]):
        assert cli.main([*base, *argv]) == 0
        out = capsys.readouterr().out
        assert "schedule morning-greet: greet at cron(0 9 * * ? *) Europe/Berlin, enabled" in out
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("fire "))
        missed, first = lines[at + 2], lines[at + 3]
        assert " missed " in missed and missed.rstrip().endswith("3:00:00 late")
        assert " started " in first and str(started["run_id"]) in first
    assert cli.main([*base, "schedules", "nightly"]) == 1
    assert "no schedule named 'nightly' (known: morning-greet)" in capsys.readouterr().err


def _restore_run_loggers(request: pytest.FixtureRequest) -> None:
    """The console's composition routes the workflow and step loggers to itself and stops
    their propagation, for the whole process: put them back after the test, or a later
    test's JSON log lines from inside a step never reach stdout."""
    saved = [
        (lg, list(lg.handlers), lg.level, lg.propagate) for lg in (WORKFLOW_LOGGER, STEP_LOGGER)
    ]

    def restore() -> None:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate

    request.addfinalizer(restore)


def test_the_dev_console_says_every_fire(
    moto_client: Any,
    make_tables: MakeTables,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    """Under durable dev (its console on) the worker prints one line per fire: the
    schedule, the fire time, the verdict and the run, a fire that started nothing too."""
    _restore_run_loggers(request)  # the console re-routes them process-wide
    stack = build_stack(moto_client, make_tables, console_events=True)
    stack.worker({"control": "reconcile-schedules"}, LambdaContext())
    capsys.readouterr()
    started = _fire(stack, timedelta(minutes=1))
    missed = _fire(stack, timedelta(hours=3))
    stack.worker({"schedule": "gone", "scheduled_time": "2026-12-04T09:00:00Z"}, LambdaContext())
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if "⏱" in line or "⤼" in line]  # not the JSON logs
    stamp = (stack.clock.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    late = (stack.clock.now() - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert len(lines) == 3, lines
    assert str(started["run_id"]) in lines[0] and "⏱" in lines[0]
    assert lines[0].endswith(f"schedule morning-greet fire {stamp}: started its run (0:01:00 late)")
    assert missed["run_id"] is None and "greet" in lines[1]
    assert lines[1].endswith(
        f"schedule morning-greet fire {late}: missed: later than its grace, nothing started "
        "(3:00:00 late)"
    )
    assert lines[2].endswith("schedule 'gone' fire dropped: the code lacks it")
