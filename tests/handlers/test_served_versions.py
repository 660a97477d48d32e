"""A deploy caught halfway: the API refuses to start a version the workers do not serve.

The API handler asks the workers (a ``describe`` control event, answered here by a real
worker handler composed on the workers' code over the same tables) and answers 503 with
Retry-After, writing nothing, when this code would start a version they cannot run.
"""

from __future__ import annotations

from typing import Any

import pytest

from durable import App, Context
from durable.api.served import ServedVersions
from tests.handlers import workflows
from tests.handlers.conftest import Stack, build_stack
from tests.handlers.events import LambdaContext, api_event

SIGNUP = {"user_id": "u1", "email": "u1@example.com"}

# The API's new code: greet at version 2 (what a start now gets), version 1 kept.
upgraded = App().include(workflows.app)


@upgraded.workflow(name="greet", version=2)
def greet_v2(ctx: Context, signup: workflows.Signup) -> dict[str, str]:
    return {"greeting": f"hi {signup.user_id}"}


def _describe(client: Any, tables: tuple[str, str], app: App) -> Any:
    """What a worker on ``app`` answers the API, through its own handler."""
    workers = build_stack(client, None, tables=tables, app=app)

    def describe() -> dict[str, list[int]]:
        reply = workers.worker({"control": "describe"}, LambdaContext())
        served: dict[str, list[int]] = reply["workflows"]
        return served

    return describe


def _api(client: Any, make_tables: Any, api_app: App, workers_app: App) -> Stack:
    tables = make_tables(client)
    return build_stack(
        client, None, tables=tables, app=api_app, served=_describe(client, tables, workers_app)
    )


def _start(stack: Stack) -> Any:
    return stack.call(api_event("POST", "/workflows/greet/runs", SIGNUP))


def test_new_api_old_workers_the_start_is_refused_and_nothing_is_written(
    moto_client: Any, make_tables: Any
) -> None:
    stack = _api(moto_client, make_tables, upgraded, workflows.app)
    before = stack.snapshot()
    reply = _start(stack)
    assert reply.status == 503, reply.body
    assert reply.error["type"] == "VersionNotServed" and reply.error["field"] == "workflow"
    assert "'greet' version 2 is not served" in reply.error["message"]
    assert "they serve version(s) 1" in reply.error["message"]
    assert reply.headers["Retry-After"] == "30"
    assert stack.snapshot() == before and stack.invoker.pop() is None


def test_old_api_new_workers_that_dropped_its_version_is_refused_too(
    moto_client: Any, make_tables: Any
) -> None:
    only_v2 = App()
    only_v2.workflow(name="greet", version=2)(greet_v2)
    stack = _api(moto_client, make_tables, workflows.app, only_v2)
    reply = _start(stack)
    assert reply.status == 503 and "'greet' version 1 is not served" in reply.error["message"]


def test_workers_serving_the_version_start_it(moto_client: Any, make_tables: Any) -> None:
    stack = _api(moto_client, make_tables, upgraded, upgraded)
    reply = _start(stack)
    assert reply.status == 202, reply.body
    assert [w["result"] for w in stack.drain()] == ["succeeded"]
    shown = stack.call(api_event("GET", f"/runs/{reply.body['run_id']}"))
    assert shown.body["output"] == {"greeting": "hi u1"}


def test_workers_that_cannot_be_asked_do_not_block_starts(
    moto_client: Any, make_tables: Any
) -> None:
    def unreachable() -> dict[str, list[int]]:
        raise RuntimeError("durable-worker-test:live failed: Task timed out")

    stack = build_stack(moto_client, make_tables, app=upgraded, served=unreachable)
    assert _start(stack).status == 202


def test_turned_off_the_api_does_not_ask(moto_client: Any, make_tables: Any) -> None:
    asked: list[int] = []

    def describe() -> dict[str, list[int]]:
        asked.append(1)
        return {}

    stack = build_stack(
        moto_client, make_tables, app=upgraded, served=describe, served_check_seconds=0
    )
    assert _start(stack).status == 202 and asked == []


# --- the cache ---------------------------------------------------------------------------


class Asked:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self) -> dict[str, list[int]]:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, Exception):
            raise answer
        served: dict[str, list[int]] = answer
        return served


def test_an_answer_is_trusted_for_its_ttl_then_asked_again() -> None:
    clock = [0.0]
    asked = Asked({"greet": [1]}, {"greet": [1]})
    served = ServedVersions(asked, ttl=30, recheck=5, now=lambda: clock[0])
    served.refuse_unserved("greet", 1)
    clock[0] = 29.9
    served.refuse_unserved("greet", 1)
    assert asked.calls == 1
    clock[0] = 30.0
    served.refuse_unserved("greet", 1)
    assert asked.calls == 2


def test_a_refusal_asks_again_at_most_every_recheck_seconds() -> None:
    """A deploy that just finished is seen by the next start, not a TTL later."""
    clock = [0.0]
    asked = Asked({"greet": [1]}, {"greet": [1]}, {"greet": [1, 2]})
    served = ServedVersions(asked, ttl=30, recheck=5, now=lambda: clock[0])
    with pytest.raises(Exception, match="version 2 is not served"):
        served.refuse_unserved("greet", 2)
    assert asked.calls == 1  # the first answer is fresh: not asked twice
    clock[0] = 4.9
    with pytest.raises(Exception, match="version 2 is not served"):
        served.refuse_unserved("greet", 2)
    assert asked.calls == 1
    clock[0] = 5.0
    with pytest.raises(Exception, match="version 2 is not served"):
        served.refuse_unserved("greet", 2)
    clock[0] = 10.0
    served.refuse_unserved("greet", 2)  # the workers now serve it
    assert asked.calls == 3


def test_an_unknown_answer_starts_and_is_counted() -> None:
    metrics: list[str] = []
    asked = Asked(RuntimeError("throttled"))
    served = ServedVersions(asked, now=lambda: 0.0, metric=metrics.append)
    served.refuse_unserved("greet", 7)
    assert metrics == ["ServedVersionsUnknown"]


def test_a_workflow_the_workers_lack_entirely_is_named() -> None:
    served = ServedVersions(Asked({"other": [1]}), now=lambda: 0.0)
    with pytest.raises(Exception, match="they serve no version of it"):
        served.refuse_unserved("greet", 1)


def test_a_retried_keyed_start_gets_its_run_back_during_a_deploy(
    moto_client: Any, make_tables: Any
) -> None:
    """The start went through; the client retries it (a lost answer) while a deploy has
    the workers on other code: the retry is answered with the run, not refused."""
    serving = {"greet": [1]}
    stack = build_stack(moto_client, make_tables, served=lambda: dict(serving))
    headers = {"Idempotency-Key": "signup-u1"}
    first = stack.call(api_event("POST", "/workflows/greet/runs", SIGNUP, headers=headers))
    assert first.status == 202
    serving.clear()  # the workers now serve nothing this code starts
    stack.handlers["api"].runtime.api.served._asked_at = None  # type: ignore[union-attr]
    again = stack.call(api_event("POST", "/workflows/greet/runs", SIGNUP, headers=headers))
    assert (again.status, again.body["run_id"]) == (202, first.body["run_id"])
    other = stack.call(api_event("POST", "/workflows/greet/runs", SIGNUP))
    assert other.status == 503  # a new run is still refused
