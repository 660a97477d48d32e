"""The deploy gate: what a worker version serves, and whether it may take traffic.

On AWS a deploy publishes a new worker *version* behind the ``live`` alias that everything
invokes (the API, the sweeper, timers, hand-offs). Two questions are put to a worker
version through its own invoke, as *control events* (``{"control": ...}``) beside the
run events it normally gets:

``describe``
    the workflows and versions its code registers. The API asks the alias before it
    starts a run, and refuses a version the workers cannot run yet (``ServedVersions``);
    the hook asks the old version, so a workflow the new code dropped is still checked.
``check-deploy``
    ``durable.engine.deploy_check`` run *inside* the new version, on the ledger it is about to
    serve: its code, its dependencies, its configuration, read-only. A check longer than
    one invocation stops between pages and returns where to go on (``resume``).

``pre_traffic`` is CodeDeploy's PreTraffic hook: it puts both questions to the new
version, keeps asking until the check is complete, and answers Succeeded only when no
unfinished run would break; anything else (a broken run, a worker that cannot answer)
fails the hook, and CodeDeploy rolls the alias back: the old code keeps serving.

Nothing here imports an AWS SDK: the hook's invokes and its report are functions passed in
(``durable.adapters.lambda_invoker``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from durable.engine.engine import Engine
    from durable.engine.registry import App

CONTROL = "control"
# A check inside a worker stops for the next page with this much of its invocation left:
# one page (100 runs at about 200 runs/s) and the reply fit in it.
CHECK_RESERVE_SECONDS = 5.0
# The broken runs a check reply lists (all are counted): a Lambda reply is at most 6 MB.
LISTED_BROKEN = 50
# The hook gives up after this many check calls (each one a worker invocation): a check
# that never completes is a failed gate, not a hook that runs until CodeDeploy times out.
MAX_CHECK_CALLS = 500
# The hook keeps this much of its own time to report its verdict, and does not start a
# check call with less than MIN_CHECK_SECONDS of budget (one page, and the way back).
HOOK_RESERVE_SECONDS = 30.0
MIN_CHECK_SECONDS = 10.0

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def is_control(event: Any) -> bool:
    return isinstance(event, dict) and CONTROL in event


def served(app: App) -> dict[str, list[int]]:
    """Each workflow name the app registers, with its versions, ascending."""
    table: dict[str, list[int]] = {}
    for wf in app.workflows():
        table.setdefault(wf.name, []).append(wf.version)
    return {name: sorted(versions) for name, versions in sorted(table.items())}


def read_only_engine(engine: Engine) -> Engine:
    """``engine``'s app, clock, configuration and keys on its ledger made read-only, with
    no invoker, effect store or timers: what a check inside a worker replays with."""
    from durable.engine.deploy_check import ReadOnlyLedger, Refusing

    return type(engine)(
        engine.app,
        ReadOnlyLedger(engine.ledger),
        Refusing("invoker"),
        Refusing("effects"),
        clock=engine.clock,
        config=engine.config,
        keys=engine.keys,
    )


def answer(engine: Engine, event: dict[str, Any], time_left: Callable[[], float]) -> dict[str, Any]:
    """A worker's answer to a control event (``describe`` or ``check-deploy``)."""
    from durable.engine.deploy_check import Resume, check_deploy

    kind = event.get(CONTROL)
    if kind == "describe":
        return {CONTROL: kind, "workflows": served(engine.app)}
    if kind != "check-deploy":
        # An answer, not a raise: a function error would count against the version (the
        # deployment's alarm), and anyone allowed to invoke the worker could send one.
        return {
            CONTROL: kind,
            "error": f"control: {kind!r} is not a control event; send 'describe' or 'check-deploy'",
        }
    names = event.get("workflows")
    if names is None:
        names = list(served(engine.app))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return {CONTROL: kind, "error": "workflows: pass a list of workflow names"}
    try:
        resume = Resume.of(event.get("resume"))
    except ValueError as e:
        return {CONTROL: kind, "error": str(e)}
    budget = event.get("budget_seconds")
    if budget is not None and not isinstance(budget, int | float):
        return {CONTROL: kind, "error": "budget_seconds: pass a number of seconds"}
    began = time.monotonic()

    def stop() -> bool:
        # Out of this invocation's time, or of the caller's (the hook's own deadline).
        spent = time.monotonic() - began
        return time_left() < CHECK_RESERVE_SECONDS or (budget is not None and spent >= budget)

    report = check_deploy(read_only_engine(engine), names, resume=resume, stop=stop)
    return {
        CONTROL: kind,
        "checked": len(report.runs),
        "broken_count": len(report.broken),
        "broken": [asdict(r) for r in report.broken[:LISTED_BROKEN]],
        "unchecked": len(report.unchecked),
        "seconds": round(report.seconds, 3),
        "resume": asdict(report.resume) if report.resume else None,
    }


# --- the PreTraffic hook ------------------------------------------------------------------


@dataclass
class GateResult:
    status: Literal["Succeeded", "Failed"]
    reason: str
    workflows: list[str] = field(default_factory=list)
    checked: int = 0
    broken_count: int = 0
    unchecked: int = 0
    broken: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0
    schedules: dict[str, list[str]] = field(default_factory=dict)


def pre_traffic(
    invoke_new: Invoke,
    invoke_current: Invoke | None = None,
    *,
    max_calls: int = MAX_CHECK_CALLS,
    time_left: Callable[[], float] | None = None,
    log: Callable[[str], None] = lambda text: None,
) -> GateResult:
    """May the new worker version take traffic? Succeeded only when every unfinished run
    of every workflow (the new code's and the current code's) replays cleanly on it.

    ``invoke_new`` invokes the new version, ``invoke_current`` the alias as it still is
    (None: a first deploy). An error from the new version fails the gate (a version
    that cannot answer must not serve); the current version's failing only narrows the
    check to the new code's workflows, and the result says so. ``time_left`` (the
    hook's own invocation) bounds each check call, so the hook reports a verdict before
    Lambda stops it: a check it cannot finish in time fails the gate.
    """
    began = time.perf_counter()
    result = GateResult("Failed", "")
    try:
        names = list(_workflows(invoke_new({CONTROL: "describe"})))
    except Exception as e:
        result.reason = f"the new worker version did not describe itself: {e}"
        return _done(result, began)
    note = ""
    if invoke_current is not None:
        try:
            current = _workflows(invoke_current({CONTROL: "describe"}))
            names += [n for n in current if n not in names]
        except Exception as e:
            note = f" (the current version did not describe itself, {e}: its workflows unchecked)"
            log(f"deploy gate: {note.strip(' ()')}")
    result.workflows = names
    resume: Any = None
    while True:
        if result.calls >= max_calls:
            result.reason = f"the check did not complete in {max_calls} invocations"
            return _done(result, began)
        event: dict[str, Any] = {CONTROL: "check-deploy", "workflows": names, "resume": resume}
        if time_left is not None:
            budget = time_left() - HOOK_RESERVE_SECONDS
            if budget < MIN_CHECK_SECONDS:
                result.reason = (
                    f"out of time after checking {result.checked} runs: too many unfinished "
                    "runs for one deploy hook; run `durable check-deploy` before deploying"
                )
                return _done(result, began)
            event["budget_seconds"] = round(budget, 1)
        result.calls += 1
        try:
            reply = _answered(invoke_new(event))
            checked = int(reply["checked"])
            broken_count = int(reply["broken_count"])
            unchecked = int(reply.get("unchecked", 0))
            broken = list(reply.get("broken", []))
        except Exception as e:
            result.reason = f"the new worker version could not check the runs: {e}"
            return _done(result, began)
        result.checked += checked
        result.broken_count += broken_count
        result.unchecked += unchecked
        result.broken += broken[: max(0, LISTED_BROKEN - len(result.broken))]
        log(f"deploy gate: checked {result.checked} runs, {result.broken_count} would break")
        resume = reply.get("resume")
        if resume is None:
            break
    if not _clean(result):
        return _done(result, began)
    changed = _reconcile_schedules(invoke_new, result)
    if changed is None:
        return _done(result, began)
    result.status = "Succeeded"
    result.reason = f"every one of {result.checked} unfinished runs replays cleanly{note}" + (
        f"; {changed}" if changed else ""
    )
    return _done(result, began)


def _clean(result: GateResult) -> bool:
    """Whether the check vouches for every run; if not, ``result.reason`` says why."""
    if result.broken_count:
        first = result.broken[0] if result.broken else {}
        result.reason = (
            f"{result.broken_count} unfinished run(s) would break on the new code, e.g. run "
            f"{first.get('run_id')} ({first.get('workflow')} v{first.get('version')}: "
            f"{first.get('verdict')}). Run `durable check-deploy` for the list and what to do"
        )
        return False
    if result.unchecked:
        result.reason = (
            f"{result.unchecked} unfinished run(s) could not be checked (a sealed value the "
            "worker could not open, or a read that failed): the gate cannot vouch for them. "
            "Run `durable check-deploy` with the stack's keys to see them"
        )
        return False
    return True


def _reconcile_schedules(invoke_new: Invoke, result: GateResult) -> str | None:
    """The new code's schedules (``durable.engine.schedules``) into Scheduler, now that it may
    serve: created, changed, removed (a paused one stays paused). What changed, or None
    with ``result.reason`` set when the new version could not do it."""
    try:
        done = _answered(invoke_new({CONTROL: "reconcile-schedules"}))
    except Exception as e:
        result.reason = f"the new worker version could not set up its schedules: {e}"
        return None
    result.schedules = {k: list(done.get(k, [])) for k in ("created", "updated", "deleted")}
    return "; ".join(f"schedules {k}: {', '.join(v)}" for k, v in result.schedules.items() if v)


def _answered(reply: dict[str, Any]) -> dict[str, Any]:
    """A control event's answer, or the error it answered with, raised."""
    if "error" in reply:
        raise ValueError(str(reply["error"]))
    return reply


def _workflows(reply: dict[str, Any]) -> dict[str, list[int]]:
    workflows = _answered(reply).get("workflows")
    if not isinstance(workflows, dict):
        raise ValueError(f"unexpected describe reply {str(reply)[:200]}")
    return workflows


def _done(result: GateResult, began: float) -> GateResult:
    result.seconds = round(time.perf_counter() - began, 3)
    return result
