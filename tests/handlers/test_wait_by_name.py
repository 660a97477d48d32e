"""Answering a callback by its name when several of that name wait (issue 31, hole 5).

Map branches that each wait on ``wait_for_callback("approval")``: an answer by name alone
cannot say which one, so it is refused (409 ``AmbiguousWait``, listing the positions,
nothing written) and the answer names one by ``position``: the API, ``durable approve
--position`` and the console (which sends the position of the step its button is on)
all do. With one left waiting, the name alone answers it. Before, the last one was
answered and the others could never be answered by name (409).
"""

from __future__ import annotations

from typing import Any

import pytest

from durable import cli
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event
from tests.handlers.test_api_events import cli_through, run_to_wait, show


def waiting(stack: Stack, run_id: str) -> list[str]:
    steps = show(stack, run_id)["steps"]
    return [s["position"] for s in steps if s["kind"] == "callback" and s["status"] == "WAITING"]


def answer(stack: Stack, run_id: str, body: dict[str, Any]) -> Any:
    return stack.call(api_event("POST", f"/runs/{run_id}/waits/approval", body))


def test_several_waits_of_one_name_are_answered_one_by_position(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = run_to_wait(stack, "approvals", ["rent", "desk", "lamp"])
    first, second, third = waiting(stack, run_id)
    before = stack.snapshot()
    refused = answer(stack, run_id, {"result": "ok"})
    assert refused.status == 409
    assert refused.error["type"] == "AmbiguousWait" and refused.error["field"] == "position"
    assert refused.error["positions"] == [first, second, third]
    assert stack.snapshot() == before  # nothing written

    assert answer(stack, run_id, {"result": "yes", "position": second}).status == 202
    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    assert cli.main([*base, "reject", run_id, "approval", "--position", first]) == 0
    assert waiting(stack, run_id) == [third]
    assert answer(stack, run_id, {"result": "last"}).status == 202  # the one left, by name
    nowhere = answer(stack, run_id, {"result": "x", "position": "0009"})
    assert nowhere.status == 404 and first in nowhere.error["message"]
    stack.drain()
    done = show(stack, run_id)
    assert done["status"] == "FAILED"  # the rejected branch failed the map ("all")
    answered = {s["position"]: s for s in done["steps"] if s["kind"] == "callback"}
    assert answered[second]["output"] == "yes" and answered[third]["output"] == "last"


def test_a_position_that_is_not_one_is_refused_naming_the_field(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approvals", ["rent"])
    bad = answer(stack, run_id, {"result": "ok", "position": "first"})
    assert bad.status == 422 and bad.error["field"] == "position"
