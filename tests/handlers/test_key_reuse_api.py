"""A key reused by a recurring job, through the API and the CLI (issue 46, item 2):
``POST /workflows/{w}/runs?reuse=after_end`` and ``durable start --reuse after_end``
start a new run under a key whose run has ended; ``?key=`` and ``key:KEY`` then name
the newest."""

from __future__ import annotations

import pytest

from tests.handlers.conftest import Reply, Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through


def keyed_start(stack: Stack, key: str, query: dict[str, str] | None = None) -> Reply:
    return stack.call(
        api_event(
            "POST",
            "/workflows/approval/runs",
            {"amount": 5},
            headers={"Idempotency-Key": key},
            query=query,
        )
    )


def end(stack: Stack, run_id: str) -> None:
    reply = stack.call(api_event("POST", f"/runs/{run_id}/cancel", {"reason": "night over"}))
    assert reply.status < 300, reply.body
    stack.drain()


def by_key(stack: Stack, key: str) -> list[str]:
    found = stack.call(api_event("GET", "/workflows/approval/runs", query={"key": key}))
    assert found.status == 200
    return [r["run_id"] for r in found.body["runs"]]


def test_the_start_route_reuses_a_key_whose_run_ended(stack: Stack) -> None:
    first = keyed_start(stack, "supplier-7")
    assert first.status == 202
    stack.drain()
    end(stack, first.body["run_id"])
    # the default: the key names that run for its retention (the same body gets it back)
    again = keyed_start(stack, "supplier-7")
    assert again.body["existing"] is True and again.body["run_id"] == first.body["run_id"]
    night2 = keyed_start(stack, "supplier-7", {"reuse": "after_end"})
    assert night2.status == 202 and night2.body["existing"] is False
    assert night2.body["run_id"] != first.body["run_id"]
    assert by_key(stack, "supplier-7") == [night2.body["run_id"]]
    # the ended run stays readable by its id
    old = stack.call(api_event("GET", f"/runs/{first.body['run_id']}"))
    assert old.status == 200 and old.body["status"] == "CANCELED"
    # while night 2 runs, another start under the key is refused (or attaches)
    stack.drain()
    busy = stack.call(
        api_event(
            "POST",
            "/workflows/approval/runs",
            {"amount": 6},
            headers={"Idempotency-Key": "supplier-7"},
            query={"reuse": "after_end"},
        )
    )
    assert busy.status == 409 and 'if_running="attach"' in busy.error["message"]


def test_a_reuse_that_is_not_one_is_a_422_naming_it(stack: Stack) -> None:
    bad = keyed_start(stack, "supplier-8", {"reuse": "always"})
    assert bad.status == 422
    assert bad.error["type"] == "InvalidInput" and bad.error["field"] == "reuse"


def test_the_cli_starts_a_new_run_under_a_reused_key_and_signals_the_newest(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable import cli

    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    start = [*base, "start", "approval", "--input", '{"amount": 5}', "--idempotency-key", "s-9"]

    def said() -> str:  # the CLI's own line (a metric line may come before it)
        return capsys.readouterr().out.splitlines()[-1]

    assert cli.main([*start, "--reuse", "after_end"]) == 0
    first = said().split()[2]
    stack.drain()
    end(stack, first)
    assert cli.main(start) == 0
    assert said().startswith(f"already started: run {first} (")
    assert cli.main([*start, "--reuse", "after_end"]) == 0
    line = said()
    assert line.startswith("started run ") and first not in line
    second = line.split()[2]
    stack.drain()
    assert cli.main([*base, "signal", "key:s-9", "nudge", "--workflow", "approval"]) == 0
    capsys.readouterr()
    signals = stack.call(api_event("GET", f"/runs/{second}")).body["signals"]
    assert [s["name"] for s in signals] == ["nudge"]
    with pytest.raises(SystemExit):
        cli.main([*start, "--reuse", "sometimes"])
