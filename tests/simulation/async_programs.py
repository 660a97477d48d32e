"""The generated program run as an ``async def`` workflow (issue 36): the same ops as
``programs.sim``, where a step without an undo is a decorated async step the workflow
awaits, adjacent ones are awaited together (``asyncio.gather``), and a parallel batch's
branches are tasks gathered at once (each numbered under its own position).

Which runs are async is derived from what the policy already drew (``is_async_start``),
so every seed's schedule stays the same. What the explorer checks holds unchanged: a
replay meets the same values (``replay_values_equal``), an at-most-once body runs at most
once per attempt, every run finishes once the world settles.
"""

from __future__ import annotations

import asyncio
from typing import Any

from durable import App, Context
from durable.core.callables import Semantics
from durable.engine.registry import StepFunction
from durable.errors import CallbackFailed, CallbackTimeout, ChildFailed, StepFailed
from tests.simulation.journal import typed
from tests.simulation.programs import (
    APP,
    APP_V2,
    ASYNC_BODIES,
    BIG,
    SimInput,
    _interpret,
    _run_key,
    hooks,
    step_policy,
)

ASYNC = "sim-async"
Op = dict[str, Any]
_CAUGHT = (StepFailed, CallbackTimeout, CallbackFailed, ChildFailed)


def is_async_start(starts: int, gated: bool, rated: bool, key: str | None) -> bool:
    """Every other fresh start (no key, no gate, no rate limit) runs as ``ASYNC``."""
    return key is None and not gated and not rated and starts % 2 == 0


def awaited(op: Op) -> bool:
    """A step op the async workflow awaits: one without an undo (an awaited step takes
    no per-call options; its decorator's are per op, see ``_step_function``)."""
    return op["op"] == "step" and not op["undo"]


def _step_function(op: Op, i: int | str) -> StepFunction[Any, Any]:
    """The op's body as a decorated step, its options per op (a decorator per call is
    cheap: it records nothing)."""
    semantics: Semantics = "at_most_once_per_attempt" if op["amo"] else "at_least_once"
    return App().step(name=f"op{i}", retry=step_policy(op), semantics=semantics)(
        ASYNC_BODIES[op["ret"]]
    )


def _caught(op: Op, error: BaseException) -> list[str]:
    if not isinstance(error, _CAUGHT) or not op.get("catch"):
        raise error
    return ["caught", type(error).__name__, str(error)]


@APP.workflow(name=ASYNC)
async def sim_async(ctx: Context, spec: SimInput) -> dict[str, Any]:
    h = hooks()
    run = _run_key(ctx)
    if ctx.run_id not in h.journal.runs_seen:
        h.journal.runs_seen.append(ctx.run_id)
    h.journal.produced["async def workflow"] += 1
    ops, i = spec.ops, 0
    while i < len(ops):
        group = 0
        while i + group < len(ops) and awaited(ops[i + group]):
            group += 1
        if group >= 2:
            values = await _gather_steps(ops[i : i + group], i)
            for k, value in enumerate(values):
                h.observe(run, i + k, value)
            i += group
            continue
        h.observe(run, i, await _interpret_async(ctx, run, i, ops[i], spec))
        i += 1
    if any(op["op"] == "big" for op in ops):
        return {"blob": "x" * BIG}
    return {"iteration": spec.iteration, "ops": len(ops)}


async def _gather_steps(ops: list[Op], first: int) -> list[Any]:
    """Adjacent step ops awaited at once; ``return_exceptions`` gives each its own
    outcome, the same on every replay whichever body finished first."""
    h = hooks()
    h.journal.produced["asyncio.gather(steps)"] += 1
    h.journal.produced["await step"] += len(ops)
    calls = [_step_function(op, first + k)(op) for k, op in enumerate(ops)]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    return [
        _caught(op, value) if isinstance(value, BaseException) else value
        for op, value in zip(ops, outcomes, strict=True)
    ]


async def _interpret_async(ctx: Context, run: str, i: int | str, op: Op, spec: SimInput) -> Any:
    h = hooks()
    if awaited(op):
        h.journal.produced["await step"] += 1
        try:
            return await _step_function(op, i)(op)
        except _CAUGHT as error:
            return _caught(op, error)
    if op["op"] == "batch" and not op["map"]:
        # A parallel's branches as tasks: each its own positions under its start's.
        h.journal.produced["asyncio.gather(tasks)"] += 1
        branches = [
            _pipeline(ctx, run, f"{i}.{j}", ops, spec) for j, ops in enumerate(op["branches"], 1)
        ]
        return await asyncio.gather(*branches)
    return _interpret(ctx, run, i, op, spec)  # every other call works as in ``sim``


async def _pipeline(ctx: Context, run: str, i: str, ops: list[Op], spec: SimInput) -> list[str]:
    """One task: its ops in turn, each observed under ``i.k`` as a batch's branch's are."""
    h = hooks()
    seen = []
    for k, op in enumerate(ops, start=1):
        value = await _interpret_async(ctx, run, f"{i}.{k}", op, spec)
        h.observe(run, f"{i}.{k}", value)
        seen.append(typed(value))
    return seen


# After a deploy the code is the same: the async workflow is in the new app too.
APP_V2.workflow(name=ASYNC)(sim_async)
