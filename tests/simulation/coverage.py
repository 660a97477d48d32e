"""What the explorer must generate: every public operation and outside event, by name.

A schedule counts what it made happen in ``Journal.produced`` (workflow code's durable
calls, operators' actions, outside events). ``test_coverage.py`` runs a fixed set of
schedules and fails when one of these names was never produced, and when ``Context`` or
``Engine`` grew a public operation that is neither here nor declared internal: a feature
ships with its actor in the generator (``programs.py``, ``actors.py``, ``policy.py``).
"""

from __future__ import annotations

# Each public ``Context`` method, and the names its calls are counted under (a call with
# an option that changes what the engine does counts apart: keyed children, distributed
# maps). ``run_id``, ``workflow`` and ``version`` are properties, read, not called.
CONTEXT_CALLS: dict[str, tuple[str, ...]] = {
    "step": ("ctx.step", "ctx.step(retryable_errors)", "ctx.step(serdes)", "ctx.step(async)"),
    "sleep": ("ctx.sleep",),
    "sleep_until": ("ctx.sleep_until",),
    "create_callback": ("ctx.create_callback",),
    "wait_for_callback": ("ctx.wait_for_callback",),
    "wait_for_signal": ("ctx.wait_for_signal",),
    "wait_for_condition": (
        "ctx.wait_for_condition",
        "ctx.wait_for_condition(initial_state)",
        "ctx.wait_for_condition(serdes)",
    ),
    "parallel": ("ctx.parallel",),
    "map": (
        "ctx.map",
        "ctx.map(distributed=True)",
        "ctx.map(distributed=True) over a keyed gate",
        "a map item missing its gate key",
    ),
    "run_child": ("ctx.run_child", "ctx.run_child(id=)", "ctx.run_child(id=, attach)"),
    "start_child": ("ctx.start_child", "ctx.start_child(id=)", "ctx.start_child(id=, attach)"),
    "continue_as_new": ("ctx.continue_as_new", "ctx.continue_as_new in a branch"),
    "compensate": ("ctx.compensate",),
    "changed": ("ctx.changed",),
    "now": ("ctx.now",),
    "uuid": ("ctx.uuid",),
    "random": ("ctx.random",),
}

# Each public ``Engine`` method an operator, a trigger or AWS calls, and its names.
ENGINE_CALLS: dict[str, tuple[str, ...]] = {
    "start": ("engine.start(key)", "engine.start(no key)", "engine.start(key, attach)"),
    # start's body (start returns its run alone): produced under start's names.
    "start_or_get": ("engine.start(key)", "engine.start(no key)", "engine.start(key, attach)"),
    "cancel": ("engine.cancel(compensate=False)", "engine.cancel(compensate=True)"),
    "retry": ("engine.retry", "engine.retry(upgrade_to)", "engine.retry of a child"),
    "fork": ("engine.fork",),
    "signal": ("engine.signal(key)", "engine.signal(no key)"),
    "complete_callback": ("engine.complete_callback",),
    "heartbeat": ("engine.heartbeat",),
    "complete_wait": (
        "engine.complete_wait",
        "engine.complete_wait(position)",
        "engine.complete_wait refused as ambiguous",
    ),
    "sweep": ("engine.sweep",),
    "purge_expired": ("engine.purge_expired",),
    "resume": ("a worker crash", "a worker crash_after", "a worker pause_after"),
}
# Public ``Engine`` methods that are the engine's own plumbing or reads, not actions of
# the outside world (each is exercised through the ones above).
ENGINE_INTERNAL = frozenset(
    {
        "answer_sealer",
        "arm_timer",
        "cancel_timers",
        "get_run",
        "history",
        "invoke_worker",
        "leave_gate",
        "list_runs",
        "load",
        "new_run",
        "new_sealer",
        "peek_run",
        "run_by_key",
    }
)

# What AWS, the clock and deploys do to a stack.
OUTSIDE_EVENTS = (
    "timer on_time",
    "timer early",
    "timer twice",
    "timer never",
    "ttl expires a run",
    "invocation drop",
    "invocation dup",
    "a worker stalls past its lease (a zombie)",
    "deploy",
    "schedule fire, on time",
    "schedule fire, late",
    "schedule fire, delivered again",
    "schedule run now",
    "schedule fire, buffer_one",
    "workflow code fails",
    "a result over the item limit",
)


# ``async def`` workflows (issue 36): the workflow itself, a decorated async step awaited
# in it, several awaited at once, and tasks (each a branch with positions of its own).
ASYNC_CALLS = (
    "async def workflow",
    "await step",
    "asyncio.gather(steps)",
    "asyncio.gather(tasks)",
)


def required() -> set[str]:
    names = {n for calls in CONTEXT_CALLS.values() for n in calls} | set(ASYNC_CALLS)
    names |= {n for calls in ENGINE_CALLS.values() for n in calls}
    return names | set(OUTSIDE_EVENTS)
