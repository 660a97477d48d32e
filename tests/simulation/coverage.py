"""What the explorer must generate: every public operation and outside event, by name.

A schedule counts what it made happen in ``Journal.produced`` (workflow code's durable
calls, operators' actions, outside events). ``test_coverage.py`` runs a fixed set of
schedules and fails when one of these names was never produced, and when ``Context`` or
``Engine`` grew a public operation that is neither here nor declared internal: a feature
ships with its actor in the generator (``programs.py``, ``actors.py``, ``policy.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

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
    "run_child": (
        "ctx.run_child",
        "ctx.run_child(id=)",
        "ctx.run_child(id=, attach)",
        "ctx.run_child(id=, reuse=after_end)",
    ),
    "start_child": (
        "ctx.start_child",
        "ctx.start_child(id=)",
        "ctx.start_child(id=, attach)",
        "ctx.start_child(id=, reuse=after_end)",
    ),
    "continue_as_new": (
        "ctx.continue_as_new",
        "ctx.continue_as_new in a branch",
        "a run continues as new",
    ),
    "compensate": ("ctx.compensate",),
    "changed": ("ctx.changed",),
    "now": ("ctx.now",),
    "uuid": ("ctx.uuid",),
    "random": ("ctx.random",),
    "set_progress": ("ctx.set_progress",),
}

# Each public ``Engine`` method an operator, a trigger or AWS calls, and its names.
ENGINE_CALLS: dict[str, tuple[str, ...]] = {
    "start": (
        "engine.start(key)",
        "engine.start(no key)",
        "engine.start(key, attach)",
        "engine.start(key, sender scope)",  # an SQS message's or an event's namespace
        "engine.start(key shown by a sender)",  # an operator typing "sqs/..." or a fire's
        "engine.start(key) after its run expired",
        "engine.start(key, reuse=after_end)",  # a key reused once its run ended
    ),
    # start's body (start returns its run alone): produced under start's names.
    "start_or_get": (
        "engine.start(key)",
        "engine.start(no key)",
        "engine.start(key, attach)",
        "engine.start(key, reuse=after_end)",
    ),
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
    "erase": ("engine.erase",),
    "resume": (
        *("a worker crash", "a worker crash_after", "a worker pause_after"),
        # Inside a child's end: after its final write, or after its report too.
        *("a worker lose_report", "a worker lose_wake"),
    ),
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
    "ttl deletes the items of a declared lifetime",
    "invocation drop",
    "invocation dup",
    "a worker stalls past its lease (a zombie)",
    "an invocation retried after its worker died",  # Lambda's retry of an async event
    "deploy",
    "schedule fire, on time",
    "schedule fire, late",
    "schedule fire, delivered again",
    "schedule run now",
    "schedule fire, buffer_one",
    "schedule fire, skip",
    "schedule fire, allow",
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


# What a stack does besides the calls above (counted as it happens).
OTHER_EVENTS = (
    "a body of a gated run",
    "a value kept in the payload store",
    "engine.start(a workflow declaring max_lifetime)",
)


def required() -> set[str]:
    names = {n for calls in CONTEXT_CALLS.values() for n in calls} | set(ASYNC_CALLS)
    names |= {n for calls in ENGINE_CALLS.values() for n in calls}
    return names | set(OUTSIDE_EVENTS) | set(OTHER_EVENTS)


# --- composition (issue 43) ------------------------------------------------------------
#
# Features that do not know about each other break where they meet (a parent attached to a
# run that continues as new, a skip schedule whose run continues as new, a signal to a run
# that hands over). Every pair of these must meet in one schedule of the budget: a
# schedule exercises a feature when one of its names was produced, that is when the
# workflow code or the actor actually did it (not when the generator drew it).
FEATURES: dict[str, tuple[str, ...]] = {
    "continue-as-new": ("a run continues as new",),
    "child if_running=fail": ("ctx.run_child(id=)", "ctx.start_child(id=)"),
    "child if_running=attach": ("ctx.run_child(id=, attach)", "ctx.start_child(id=, attach)"),
    "schedule overlap=allow": ("schedule fire, allow",),
    "schedule overlap=skip": ("schedule fire, skip",),
    "schedule overlap=buffer_one": ("schedule fire, buffer_one",),
    "gate": ("a body of a gated run",),
    "signal by key": ("engine.signal(key)",),
    "codec": ("ctx.step(serdes)", "ctx.wait_for_condition(serdes)"),
    "offloaded value": ("a value kept in the payload store",),
    "async workflow": ("async def workflow",),
    "cancel": ("engine.cancel(compensate=False)", "engine.cancel(compensate=True)"),
    "retry/fork": ("engine.retry", "engine.retry(upgrade_to)", "engine.fork"),
    "keyed restart after retention": ("engine.start(key) after its run expired",),
}


def features_of(produced: Mapping[str, int]) -> frozenset[str]:
    """The features a schedule exercised, from what it produced."""
    return frozenset(f for f, names in FEATURES.items() if any(produced.get(n) for n in names))


def feature_pairs() -> list[tuple[str, str]]:
    """Every pair of ``FEATURES``, in a fixed order."""
    return list(combinations(FEATURES, 2))


def focus_for(seed: int) -> frozenset[str]:
    """The pair of features seed ``seed`` leans towards: the seeds take the pairs in
    turn, so any run of ``len(feature_pairs())`` consecutive seeds focuses on each once
    (the generator still draws everything else as it would)."""
    pairs = feature_pairs()
    return frozenset(pairs[seed % len(pairs)])
