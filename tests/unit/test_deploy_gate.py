"""The deploy gate: a worker version's control events, and the PreTraffic hook's verdict.

The worker handler answers in process here (the real ``worker_handler`` over the memory
ledger the runs were recorded in); ``tests/e2e/test_deploy_skew.py`` puts the same
questions to worker processes through durable dev's Lambda Invoke API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from durable import App, Context
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryRecurring
from durable.adapters.nonces import MemoryNonceStore
from durable.aws import worker_handler
from durable.engine.deploy_check import ReadOnlyLedger, Resume, check_deploy
from durable.engine.engine import Engine
from durable.engine.schedules import Remote
from durable.local.lambda_runtime import LocalContext
from durable.ops.deploy_gate import answer, pre_traffic
from durable.runtime import Services
from durable.settings import Settings
from durable.testing import LocalRunner
from tests.unit import deploy_apps

pytestmark = pytest.mark.unit

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def _in_flight(count: int = 3) -> LocalRunner:
    """``count`` orders asleep on the old code, one finished."""
    runner = LocalRunner(deploy_apps.old)
    runner.start("order", "done")
    runner.run_until_idle()
    runner.advance(hours=1)
    for i in range(count):
        runner.start("order", f"o{i}")
    runner.run_until_idle()
    return runner


def _worker(
    runner: LocalRunner,
    app: App,
    seconds: float = 60.0,
    schedules: MemoryRecurring | None = None,
) -> Invoke:
    """The real worker handler on ``app``, over the runner's ledger, answering in process."""
    settings = Settings(app="unused:app", ledger_table="ledger", idempotency_table="idem")
    services = Services(
        ledger=runner.memory_ledger,
        effects=MemoryEffectStore(),
        invoker=MemoryInvoker(),
        nonces=MemoryNonceStore(),
        clock=runner.clock,
        schedules=schedules,
    )
    handler = worker_handler(app, settings, services=services)

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        context = LocalContext("durable-worker-test", "req", time.time() + seconds)
        reply: dict[str, Any] = handler(event, context)
        return reply

    return invoke


def _snapshot(runner: LocalRunner) -> Any:
    ledger = runner.memory_ledger
    return {run_id: ledger.load(run_id) for run_id in ledger.all_run_ids()}


# --- the worker's answers -------------------------------------------------------------


def test_describe_lists_each_workflow_with_its_versions() -> None:
    runner = _in_flight()
    reply = _worker(runner, deploy_apps.both)({"control": "describe"})
    assert reply["workflows"] == {"order": [1, 2]}
    assert reply["function_version"] == "$LATEST"


def test_check_deploy_inside_the_worker_names_the_broken_runs_and_writes_nothing() -> None:
    runner = _in_flight()
    before = _snapshot(runner)
    reply = _worker(runner, deploy_apps.renamed)({"control": "check-deploy"})
    assert (reply["checked"], reply["broken_count"], reply["resume"]) == (3, 3, None)
    assert {b["verdict"] for b in reply["broken"]} == {"nondeterministic"}
    assert {b["position"] for b in reply["broken"]} == {"0002"}
    assert _snapshot(runner) == before


def test_an_unknown_control_event_is_answered_with_what_to_send() -> None:
    """An answer, not a function error: errors count against the version under deploy
    (its alarm rolls the deploy back), and anyone who may invoke the worker can send one."""
    runner = _in_flight()
    reply = _worker(runner, deploy_apps.old)({"control": "reload"})
    assert "'reload' is not a control event" in reply["error"]
    bad = _worker(runner, deploy_apps.old)({"control": "check-deploy", "workflows": "order"})
    assert "list of workflow names" in bad["error"]
    # and the gate treats such an answer as a version that cannot answer
    result = pre_traffic(lambda event: {"control": "x", "error": "no such thing"})
    assert result.status == "Failed" and "no such thing" in result.reason


def test_a_check_stopped_for_time_goes_on_where_it_stopped_and_sees_each_run_once() -> None:
    runner = _in_flight(count=7)
    engine = Engine(
        deploy_apps.same, ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
    )
    whole = check_deploy(engine, ["order"])
    seen: list[str] = []
    resume: Resume | None = None
    calls = 0
    while True:
        calls += 1
        pages = iter([False, True])  # one page per call, then "out of time"
        report = check_deploy(engine, ["order"], page_size=2, resume=resume, stop=pages.__next__)
        seen += [r.run_id for r in report.runs]
        resume = report.resume
        if resume is None:
            break
    assert sorted(seen) == sorted(r.run_id for r in whole.runs) and len(seen) == 7
    # 7 WAITING runs in pages of 2 = 4 pages, plus the three empty statuses' one page each
    assert calls == 7


def test_a_resume_for_another_list_of_workflows_is_refused() -> None:
    runner = _in_flight()
    engine = Engine(
        deploy_apps.same, ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
    )
    with pytest.raises(ValueError, match="same workflows"):
        check_deploy(engine, ["order"], resume=Resume("invoice", "WAITING", None))


# --- the PreTraffic hook's verdict ------------------------------------------------------


def test_the_gate_passes_code_that_replays_every_run() -> None:
    runner = _in_flight()
    result = pre_traffic(_worker(runner, deploy_apps.same), _worker(runner, deploy_apps.old))
    assert (result.status, result.checked, result.broken_count) == ("Succeeded", 3, 0)
    assert "every one of 3 unfinished runs replays cleanly" in result.reason


def test_the_gate_fails_code_that_would_break_a_run_and_names_one() -> None:
    runner = _in_flight()
    result = pre_traffic(_worker(runner, deploy_apps.renamed), _worker(runner, deploy_apps.old))
    assert (result.status, result.broken_count) == ("Failed", 3)
    run_ids = {b["run_id"] for b in result.broken}
    assert len(run_ids) == 3 and any(run_id in result.reason for run_id in run_ids)
    assert "durable check-deploy" in result.reason


def test_the_gate_fails_code_that_dropped_the_version_runs_are_pinned_to() -> None:
    runner = _in_flight()
    result = pre_traffic(_worker(runner, deploy_apps.only_v2), _worker(runner, deploy_apps.old))
    assert (result.status, result.broken_count) == ("Failed", 3)
    assert {b["verdict"] for b in result.broken} == {"unregistered"}


def test_the_gate_checks_workflows_only_the_current_code_has() -> None:
    """The new code dropped ``order`` whole: its runs are found through the old version's
    describe (the listing is per workflow, never a scan)."""
    runner = _in_flight()
    invoices = App()

    @invoices.workflow(name="invoice", version=1)
    def invoice(ctx: Context) -> None:
        return None

    narrow = pre_traffic(_worker(runner, invoices))  # no current version to ask
    assert (narrow.status, narrow.checked, narrow.workflows) == ("Succeeded", 0, ["invoice"])
    full = pre_traffic(_worker(runner, invoices), _worker(runner, deploy_apps.old))
    assert (full.status, full.broken_count, full.workflows) == ("Failed", 3, ["invoice", "order"])


def test_a_check_longer_than_one_invocation_is_asked_again_until_complete() -> None:
    runner = _in_flight()
    engine = _worker(runner, deploy_apps.same)  # composes the handler's runtime
    engine({"control": "describe"})
    checker = Engine(deploy_apps.same, runner.memory_ledger, MemoryInvoker(), MemoryEffectStore())

    def short_invocation(event: dict[str, Any]) -> dict[str, Any]:
        if event["control"] in ("describe", "reconcile-schedules"):
            return engine(event)
        left = iter([60.0, 0.0])  # time for one page, then out of it
        return answer(checker, event, lambda: next(left, 0.0))

    result = pre_traffic(short_invocation, max_calls=10)
    # one page per call: the four unfinished statuses of "order"
    assert (result.status, result.checked, result.calls) == ("Succeeded", 3, 4)
    stuck = pre_traffic(short_invocation, max_calls=3)
    assert stuck.status == "Failed" and "did not complete in 3 invocations" in stuck.reason


def test_a_new_version_that_cannot_answer_fails_the_gate() -> None:
    runner = _in_flight()

    def broken(event: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("durable-worker-dev:7 failed: ImportError: no module named shop")

    result = pre_traffic(broken, _worker(runner, deploy_apps.old))
    assert result.status == "Failed" and "did not describe itself" in result.reason
    assert "ImportError" in result.reason

    describe_only = _worker(runner, deploy_apps.same)

    def check_fails(event: dict[str, Any]) -> dict[str, Any]:
        if event["control"] == "describe":
            return describe_only(event)
        raise RuntimeError("Task timed out after 300.00 seconds")

    result = pre_traffic(check_fails)
    assert result.status == "Failed" and "could not check the runs" in result.reason


def test_a_current_version_that_cannot_answer_narrows_the_check_and_says_so() -> None:
    runner = _in_flight()

    def gone(event: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("ResourceNotFoundException: alias live")

    said: list[str] = []
    result = pre_traffic(_worker(runner, deploy_apps.same), gone, log=said.append)
    assert (result.status, result.checked) == ("Succeeded", 3)
    assert "its workflows unchecked" in result.reason and "alias live" in said[0]


def test_the_hook_gives_each_check_its_own_remaining_time_and_fails_when_out_of_it() -> None:
    """The hook reports a verdict before Lambda stops it: each check call gets the hook's
    remaining time less a reserve, and with too little left the gate fails, saying why."""
    runner = _in_flight()
    worker = _worker(runner, deploy_apps.same)
    budgets: list[float] = []

    def recording(event: dict[str, Any]) -> dict[str, Any]:
        if "budget_seconds" in event:
            budgets.append(event["budget_seconds"])
        return worker(event)

    clock = iter([900.0, 600.0])  # the hook's remaining seconds, asked before each call
    result = pre_traffic(recording, time_left=clock.__next__)
    assert result.status == "Succeeded" and budgets == [870.0]

    late = pre_traffic(recording, time_left=lambda: 39.0)  # 30 kept, 9 < the 10 a call needs
    assert late.status == "Failed" and "out of time after checking 0 runs" in late.reason


def test_a_check_call_stops_at_its_budget_even_with_invocation_time_left() -> None:
    runner = _in_flight()
    checker = Engine(deploy_apps.same, runner.memory_ledger, MemoryInvoker(), MemoryEffectStore())
    event = {"control": "check-deploy", "workflows": ["order"], "budget_seconds": 0}
    reply = answer(checker, event, lambda: 600.0)
    assert reply["checked"] == 0
    assert reply["resume"] == {"workflow": "order", "status": "PENDING", "cursor": None}
    refused = answer(checker, {**event, "budget_seconds": "soon"}, lambda: 600.0)
    assert "budget_seconds" in refused["error"]


def test_code_that_cannot_replay_a_run_fails_the_gate_and_names_why() -> None:
    """A change that keeps every call but retypes the input: a replay raises before any
    new work (the stored input no longer validates), so every run would FAIL on wake.
    The check must say so, not call the run ok."""
    runner = _in_flight()
    result = pre_traffic(_worker(runner, deploy_apps.retyped), _worker(runner, deploy_apps.old))
    assert (result.status, result.broken_count) == ("Failed", 3)
    assert {b["verdict"] for b in result.broken} == {"fails"}
    assert "ValidationError" in result.broken[0]["called"]


def test_runs_the_check_could_not_replay_fail_the_gate() -> None:
    runner = _in_flight()
    worker = _worker(runner, deploy_apps.same)

    def unchecked(event: dict[str, Any]) -> dict[str, Any]:
        reply = worker(event)
        if event["control"] == "check-deploy":
            reply = {**reply, "unchecked": 2}
        return reply

    result = pre_traffic(unchecked)
    assert result.status == "Failed" and "2 unfinished run(s) could not be checked" in result.reason


def test_a_passing_gate_sets_up_the_new_codes_schedules() -> None:
    """Once the check passes, the new version makes Scheduler hold its schedules; a
    version that declares schedules but cannot set them up fails the gate."""
    runner = _in_flight()
    app = App().include(deploy_apps.same)
    app.schedule("order", "rate(1 day)", name="nightly-order", input="nightly")
    held = MemoryRecurring()
    held.held["retired"] = Remote("retired", "rate(1 hour)", "UTC", True)
    result = pre_traffic(_worker(runner, app, schedules=held), _worker(runner, deploy_apps.old))
    assert result.status == "Succeeded", result.reason
    assert result.schedules == {"created": ["nightly-order"], "updated": [], "deleted": ["retired"]}
    assert "schedules created: nightly-order; schedules deleted: retired" in result.reason
    assert sorted(held.held) == ["nightly-order"]
    no_port = pre_traffic(_worker(runner, app))
    assert no_port.status == "Failed"
    assert (
        "could not set up its schedules" in no_port.reason
        and "DURABLE_SCHEDULER_GROUP" in no_port.reason
    )
