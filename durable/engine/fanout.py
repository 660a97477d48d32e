"""Inline batches: ``ctx.parallel`` and ``ctx.map`` as branches on threads under one lease.

A batch takes one position P in its caller's sequence. Branch i runs with a cursor of
its own, so its calls are recorded at ``P.i.1``, ``P.i.2``, ... whatever order the threads
run in, and a replay of each branch reads the same records. The branches take turns on
the engine's state (``durable.engine.turns``): workflow code runs one branch at a time, step
bodies, polls and in-process sleeps run concurrently.

The first execution ends in one of three ways:

- the completion rule is decided (``durable.core.completion``): branches still running are
  told to stop at their next durable call, and once every thread has returned the
  *decision* is recorded at P (one fenced write: each branch's outcome), then the
  compensations of the branches it canceled run. A replay returns the decision's
  ``BatchResult`` without running a branch body again; it re-runs only the branches that
  registered compensations, from their records, to rebuild the compensation list in
  branch order (and to finish a canceled branch's compensations after a crash);
- every branch still open is parked on a wait: the run suspends until the earliest of
  them (each branch armed its own timer), and the next invocation replays the batch;
- a branch stopped the run (lease lost, a cancel, a hand-off, an event to reload): every
  branch stops at its next durable call, their compensations join the caller's list in
  branch order, and the signal goes on up as it would from a step.

The decision is written before the canceled branches are compensated: a crash between
the two replays the decision and the compensations resume, whereas compensating first
would let a crash re-run a canceled branch's body on top of its own undo.
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durable.core.completion import (
    BatchItem,
    BatchResult,
    BranchFailed,
    Completion,
    ItemStatus,
    check_batch_size,
    check_max_concurrency,
    parse_completion,
)
from durable.core.model import StepKind, StepStatus, position_key, position_path
from durable.core.retry import error_type_name
from durable.core.tokens import refuse_token
from durable.engine.children import child_of, is_attached
from durable.engine.cursor import Cursor, bind_cursor
from durable.engine.determinism import carried
from durable.engine.interrupts import BranchParked, BranchStopped, DryRunComplete, message_of
from durable.engine.sagas import run_compensations
from durable.engine.turns import Turn
from durable.errors import (
    InvalidInput,
    InvalidState,
    NonDeterminismError,
    RunCanceled,
    RunNotFound,
    StepFailed,
    StorageError,
)

if TYPE_CHECKING:
    from durable.engine.execution_parts import ExecutionParts

# An inline batch's decision is one ledger item: past this many branches it could not
# hold their outcomes (DynamoDB items stop at 400 KB).
INLINE_LIMIT = 1000
# The name every branch thread's name starts with (crash injection in durable.testing
# stops a dead worker's branches by it).
BRANCH_THREAD = "durable-branch"
# Threads a batch starts when max_concurrency is not given: "all at once" for the few
# branches a parallel has, without a thousand threads for a map of a thousand items.
DEFAULT_THREADS = 64

# A branch takes the workflow's Context; this module only passes it through.
Branch = Callable[[Any], Any]


@dataclass(slots=True, eq=False)
class _Branch:
    index: int  # 1-based: the branch's part of its positions
    fn: Branch
    annotation: Any
    cursor: Cursor
    outcome: str = "pending"  # succeeded, failed, parked, stopped or signal
    encoded: str | None = None
    error: BaseException | None = None
    due_at: str | None = None


def run_batch(
    x: ExecutionParts,
    name: str,
    branches: Sequence[tuple[Branch, Any]],
    *,
    max_concurrency: int | None,
    completion: Any,
    names: Sequence[str] | None = None,
) -> BatchResult[Any]:
    """Run ``branches`` (each a callable taking a ``Context``, and the annotation its
    value is encoded by) as one batch; see the module docstring. ``names``: each
    branch's name, recorded in the decision (``durable show`` and the console print it)."""
    if not isinstance(name, str) or not name:
        raise InvalidInput('a batch needs a name: name="fetch-profiles"', field="name")
    refuse_token(name, "name", "batch name")
    labels = check_branch_names(names, len(branches))
    check_max_concurrency(max_concurrency)
    rule = parse_completion(completion)
    check_batch_size(len(branches), f"batch {name!r}", INLINE_LIMIT)
    if rule.kind == "min_successful" and rule.count > len(branches):
        raise InvalidInput(
            f"completion {rule.describe()} over {len(branches)} branch(es) can never be met: "
            "ask for at most as many successes as there are branches",
            field="completion",
        )
    position = x.next_position()
    caller = x.cursor
    runs = _branches(x, caller, branches)
    started = any(b.cursor.frontier for b in runs)
    # A batch whose branches already recorded something is under way: a cancel request
    # stops each branch where it would do new work (its compensations then known), not
    # the batch as a whole before any of them replayed.
    rec = (
        None if started and position not in x.steps else x.recorded(position, name, StepKind.BATCH)
    )
    if rec is not None and rec.status == StepStatus.DONE and rec.output is not None:
        decision = json.loads(rec.output)
        if decision["n"] != len(runs):
            x.nondeterminism = NonDeterminismError(
                position, f"a batch of {decision['n']}", f"a batch of {len(runs)}"
            )
            raise x.nondeterminism
        _rebuild(x, caller, runs, decision)
        _cancel_children(x, position, decision)
        return _result(x, name, decision, runs)
    workers = max_concurrency or min(len(runs), DEFAULT_THREADS)
    _run_threads(x, runs, rule, workers, x.new_context())
    return _conclude(x, caller, position, name, rule, runs, labels)


def _branches(
    x: ExecutionParts, caller: Cursor, branches: Sequence[tuple[Branch, Any]]
) -> list[_Branch]:
    """A cursor per branch; each knows how far its branch got before this invocation."""
    index = caller.counter
    depth = len(caller.prefix) + 1
    base = (*caller.prefix, index)
    frontiers: dict[int, int] = {}
    for p in x.steps:
        key = position_key(p)
        if len(key) > depth + 1 and key[:depth] == base:
            frontiers[key[depth]] = max(frontiers.get(key[depth], 0), key[depth + 1])
    beyond = [i for i in frontiers if i > len(branches)]
    if beyond:
        position = caller.path(index)
        x.nondeterminism = NonDeterminismError(
            position, f"a batch with a branch {max(beyond)}", f"a batch of {len(branches)}"
        )
        raise x.nondeterminism
    runs = []
    for i, (fn, annotation) in enumerate(branches, start=1):
        if not callable(fn):
            raise InvalidInput(
                f"branch {i} of the batch is {fn!r}, not a callable: pass functions that take "
                "the context, e.g. ctx.parallel(lambda c: c.step(fetch, 1), ...)",
                field="branches",
            )
        check_plain_branch(fn, f"branch {i} of the batch")
        cursor = Cursor(prefix=(*base, i), frontier=frontiers.get(i, 0), parent=caller, parks=True)
        runs.append(_Branch(i, fn, annotation, cursor))
    return runs


# --- the first execution: threads --------------------------------------------------------


def _run_threads(
    x: ExecutionParts, runs: list[_Branch], rule: Completion, workers: int, ctx: object
) -> None:
    """Run the branches until each has an outcome or was stopped: the rule decided, or
    one branch stopped the run."""
    if not runs:
        return
    if workers == 1:
        _run_in_order(x, runs, rule, ctx)
        return
    outer = x.turn
    turn = outer or Turn()
    x.turn = turn
    guard_state = carried()
    pool = ThreadPoolExecutor(max_workers=min(workers, len(runs)), thread_name_prefix=BRANCH_THREAD)
    try:
        with turn.released():  # a nested batch's caller holds the turn: its branches need it
            try:
                futures: dict[Future[None], _Branch] = {
                    pool.submit(
                        contextvars.copy_context().run, _run_branch, x, b, ctx, turn, guard_state
                    ): b
                    for b in runs
                }
                pending = set(futures)
                while pending:
                    _, pending = wait(pending, return_when=FIRST_COMPLETED)
                    if _must_stop(runs, rule):
                        for b in runs:
                            b.cursor.stopped = True
                        for f in pending:
                            if not futures[f].cursor.frontier:
                                f.cancel()  # nothing recorded, not started: it never will
            finally:
                for b in runs:  # whatever ended the loop, no branch starts new work now
                    b.cursor.stopped = True
                pool.shutdown(wait=True, cancel_futures=True)
    finally:
        x.turn = outer


def _run_in_order(x: ExecutionParts, runs: list[_Branch], rule: Completion, ctx: object) -> None:
    """``max_concurrency=1``: the branches one after another on the caller's thread, in
    branch order (the same records and decisions as threads, with nothing to take turns
    over; the simulation explorer drives batches this way)."""
    for b in runs:
        if _must_stop(runs, rule):
            b.cursor.stopped = True  # it still replays what it recorded, then stops
        _run_branch(x, b, ctx, None, nullcontext)  # the caller holds the turn, if any


def _must_stop(runs: list[_Branch], rule: Completion) -> bool:
    # A cancel request is the run's, not one branch's: every branch meets it at its own
    # next new work, after replaying its records, so the compensation list it leaves is
    # the same whichever branch met it first. Any other signal ends the invocation with
    # nothing to undo: the sooner every branch stops, the better.
    signals = [b.error for b in runs if b.outcome == "signal"]
    if any(not isinstance(e, RunCanceled | DryRunComplete) for e in signals):
        return True
    if signals:  # a dry replay, too, checks every branch up to its own new work
        return False
    succeeded = sum(1 for b in runs if b.outcome == "succeeded")
    failed = sum(1 for b in runs if b.outcome == "failed")
    return rule.decide(len(runs), succeeded, failed) is not None


def _run_branch(
    x: ExecutionParts,
    b: _Branch,
    ctx: object,
    turn: Turn | None,
    guard_state: Callable[[], Any],
) -> None:
    """One branch (on a thread of its own, taking turns, or on the caller's thread with
    ``turn`` None): its outcome is stored on ``b``, never raised."""
    with guard_state(), bind_cursor(x, b.cursor):
        if turn is not None:
            turn.acquire()
        try:
            if b.cursor.halted() and not b.cursor.frontier:
                b.outcome = "stopped"  # decided before it recorded anything: nothing to replay
                return
            value = b.fn(ctx)
            b.encoded = x.redact(x.encode(value, b.annotation))
            b.outcome = "succeeded"
        except BranchParked as parked:
            b.outcome, b.due_at = "parked", parked.due_at
        except BranchStopped:
            b.outcome = "stopped"
        except Exception as error:  # control-flow signals are BaseException
            b.error = error
            b.outcome = "signal" if _stops_run(x, error) else "failed"
        except BaseException as signal:  # lease lost, cancel, hand-off, reload, ...
            b.error = signal
            b.outcome = "signal"
        finally:
            if turn is not None:
                turn.release()


def check_plain_branch(fn: Callable[..., Any], what: str) -> None:
    """A branch is plain workflow code run on a thread: an ``async def`` one would only
    return a coroutine, never run. Async workflows run coroutines concurrently with
    ``asyncio.gather`` instead (``durable.engine.async_workflow``)."""
    if inspect.iscoroutinefunction(fn):
        raise InvalidInput(
            f"{what} is async def: ctx.parallel and ctx.map run plain functions (their "
            "steps may be async def). In an async def workflow, run coroutines at once "
            "with asyncio.gather(...)",
            field="branches",
        )


def _stops_run(x: ExecutionParts, error: Exception) -> bool:
    """Errors that are about the run, not the branch: diverging code, an unavailable
    ledger (the invocation ends and the next one replays)."""
    if isinstance(error, NonDeterminismError) and x.nondeterminism is not None:
        return True
    return isinstance(error, StorageError) and error.retryable


def _conclude(
    x: ExecutionParts,
    caller: Cursor,
    position: str,
    name: str,
    rule: Completion,
    runs: list[_Branch],
    labels: list[str] | None = None,
) -> BatchResult[Any]:
    if x.nondeterminism is not None:  # a branch caught it: still, nothing is decided
        raise x.nondeterminism
    signals = [b for b in runs if b.outcome == "signal"]
    if signals:
        _merge(caller, runs)
        raise signals[0].error  # type: ignore[misc]
    succeeded = sum(1 for b in runs if b.outcome == "succeeded")
    failed = sum(1 for b in runs if b.outcome == "failed")
    ok = rule.decide(len(runs), succeeded, failed)
    if ok is None:  # every branch still open is parked on a wait
        due = [b.due_at for b in runs if b.outcome == "parked" and b.due_at is not None]
        # A nested batch parks its caller's branch, which may be canceled: its branches'
        # undos must be that branch's by then (the top level's are rebuilt on replay).
        _merge(caller, runs)
        raise x.suspend(min(due) if due else None)
    decision = {
        "rule": rule.describe(),
        "ok": ok,
        "n": len(runs),
        "items": [
            {**_item(x, b), **({"name": labels[b.index - 1]} if labels else {})} for b in runs
        ],
        "comp": [b.index for b in runs if b.cursor.compensations],
    }
    text = json.dumps(decision, separators=(",", ":"))
    try:
        stored = x.write_fenced(
            x.new_record(position, name, StepKind.BATCH, StepStatus.DONE, output=text)
        )
    except Exception:
        _merge(caller, runs)  # the run fails here: every branch's undo is the caller's
        raise
    if stored.output and stored.output != text:
        decision = json.loads(stored.output)  # a decision recorded before this one wins
    _cancel_children(x, position, decision)
    _compensate_canceled(x, caller, runs, decision)
    return _result(x, name, decision, runs)


def _item(x: ExecutionParts, b: _Branch) -> dict[str, Any]:
    # Where the branch ended: a replay that rebuilds its compensations stops there, and a
    # canceled branch's undos take the positions after it.
    own = (p for p, rec in x.steps.items() if rec.kind != StepKind.COMPENSATION)
    end = max(b.cursor.counter, b.cursor.last_index(own))
    return {**_outcome(x, b), "end": end}


def _outcome(x: ExecutionParts, b: _Branch) -> dict[str, Any]:
    if b.outcome == "succeeded":
        return {"s": "succeeded", "v": b.encoded}
    if b.outcome == "failed":
        error = b.error
        assert error is not None  # a branch fails with the error it raised
        item: dict[str, Any] = {
            "s": "failed",
            "t": error_type_name(error),
            "m": x.redact(message_of(error, 1000)),
        }
        if isinstance(error, StepFailed):
            item.update(step=error.step, pos=error.position, tries=error.attempts)
            item["m"] = x.redact(error.error_message)
            item["t"] = error.error_type
        return item
    return {"s": "canceled"}  # parked, stopped or never started: canceled where it stood


def _merge(caller: Cursor, runs: list[_Branch]) -> None:
    """The branches' completed compensable steps join the caller's, in branch order."""
    for b in runs:
        caller.compensations.extend(b.cursor.compensations)
        b.cursor.compensations.clear()


def _cancel_children(x: ExecutionParts, position: str, decision: dict[str, Any]) -> None:
    """Cancel, with their compensations, the child runs a canceled branch still waits for
    (``run_child``, ``start_child``, a distributed map's items, at any depth in it), as a
    distributed map cancels its open items: the decision went on without the branch, so
    nothing will wait for them. Idempotent, so it runs again on every replay of the
    decision (a crash after the decision, before the cancels, leaves none running)."""
    canceled = [
        f"{position}.{position_path(i)}."
        for i, item in enumerate(decision["items"], start=1)
        if item["s"] == "canceled"
    ]
    if not canceled:
        return
    for at, rec in sorted(x.steps.items()):
        if rec.kind != StepKind.CHILD or rec.status.final or not at.startswith(tuple(canceled)):
            continue
        if is_attached(rec):  # another's run, taken with if_running="attach": left be
            continue
        try:
            x.engine.cancel(
                child_of(rec),
                f"branch of batch {position} of run {x.run.run_id} was canceled",
                compensate=True,
                requested_by=f"run {x.run.run_id}",
            )
        except (InvalidState, RunNotFound):
            continue  # it ended meanwhile, or its retention ended


def _compensate_canceled(
    x: ExecutionParts, caller: Cursor, runs: list[_Branch], decision: dict[str, Any]
) -> None:
    """Finished branches' compensations join the caller's; canceled branches' run now,
    each newest first, at positions after the branch's last own record."""
    items = decision["items"]
    for b in runs:
        if items[b.index - 1]["s"] != "canceled":
            caller.compensations.extend(b.cursor.compensations)
            b.cursor.compensations.clear()
    canceled = [b for b in runs if items[b.index - 1]["s"] == "canceled" and b.cursor.compensations]
    for n, b in enumerate(canceled):
        # (Still stopped: an undo is a compensation, which a stop does not hold back.)
        b.cursor.parks = caller.parks  # an undo's durable retry waits as the caller would
        b.cursor.replay_only, b.cursor.limit = False, None
        # Exactly the recorded end: a replay that stopped at its limit has already counted
        # the position after it (the first undo's).
        b.cursor.counter = int(items[b.index - 1]["end"])
        with bind_cursor(x, b.cursor):
            failure = run_compensations(x, mark_status=False)
        if failure is not None:
            # Like a failed compensation anywhere: raised where the undo was due. The
            # other canceled branches' undos are the caller's now, so a run that fails
            # here still runs them.
            for rest in canceled[n + 1 :]:
                caller.compensations.extend(rest.cursor.compensations)
            raise failure


# --- replay of a decided batch --------------------------------------------------------


def _rebuild(
    x: ExecutionParts, caller: Cursor, runs: list[_Branch], decision: dict[str, Any]
) -> None:
    """Re-run, from records only, the branches that registered compensations, in branch
    order: their undos join the caller's list as on the first execution, and a canceled
    branch's compensations finish if a crash cut them short."""
    ctx = x.new_context()
    items = decision["items"]
    for index in decision["comp"]:
        b = runs[index - 1]
        item = items[index - 1]
        b.cursor.replay_only = True
        b.cursor.limit = int(item["end"])
        with bind_cursor(x, b.cursor):
            try:
                b.fn(ctx)
            except BranchStopped:
                pass
            except Exception as error:
                # A failed branch fails again, from its records; a canceled one may now
                # raise past its end (an answer that came after the decision: a late
                # rejection of its callback), which the decision already ignores.
                if _stops_run(x, error) or item["s"] == "succeeded":
                    raise
    _compensate_canceled(x, caller, runs, decision)


def _result(
    x: ExecutionParts, name: str, decision: dict[str, Any], runs: list[_Branch]
) -> BatchResult[Any]:
    """The ``BatchResult`` a decision records: built the same way on the first execution
    and on replay, so both return equal values and errors."""
    items: list[BatchItem[Any]] = []
    for b, item in zip(runs, decision["items"], strict=True):
        status: ItemStatus = item["s"]
        i, label = b.index - 1, item.get("name")
        if status == "succeeded":
            value = x.decode(item["v"], b.annotation)
            items.append(BatchItem(i, status, value=value, name=label))
        elif status == "failed":
            items.append(BatchItem(i, status, error=_error(b.index, item), name=label))
        else:
            items.append(BatchItem(i, status, name=label))
    return BatchResult(name, decision["rule"], bool(decision["ok"]), tuple(items))


# A branch name is shown in tables and a terminal: short, printable. All of a batch's
# names together stay well inside the decision record's room (the 400 KB item holds the
# branches' results too): a batch whose names would take more is refused at the call.
MAX_BRANCH_NAME = 100
MAX_NAMES_TOTAL = 20_000


def check_branch_names(names: Sequence[str] | None, count: int) -> list[str] | None:
    """``names`` checked: one per branch, each a non-empty printable text of at most
    ``MAX_BRANCH_NAME`` characters (``InvalidInput`` naming the field otherwise)."""
    if names is None:
        return None
    if isinstance(names, str) or len(names) != count:
        raise InvalidInput(
            f"branch_names gives {1 if isinstance(names, str) else len(names)} name(s) for "
            f"{count} branch(es): pass one name per branch, in order",
            field="branch_names",
        )
    for label in names:
        # First: the messages below repeat the name, and a token must not be repeated.
        refuse_token(label, "branch_names", "a branch name")
        if (
            not isinstance(label, str)
            or not label
            or len(label) > MAX_BRANCH_NAME
            or not label.isprintable()
        ):
            raise InvalidInput(
                f"branch name {label!r}: a printable text of 1 to {MAX_BRANCH_NAME} characters",
                field="branch_names",
            )
    total = sum(len(label) for label in names)
    if total > MAX_NAMES_TOTAL:
        raise InvalidInput(
            f"the batch's branch names take {total} characters, over {MAX_NAMES_TOTAL}: they "
            "are recorded with its decision; give shorter names (an id), or none",
            field="branch_names",
        )
    return list(names)


def _error(index: int, item: dict[str, Any]) -> BaseException:
    if "step" in item:
        return StepFailed(item["step"], item["pos"], item["t"], item["m"], item["tries"])
    return BranchFailed(index - 1, item["t"], item["m"])
