"""Distributed maps: ``ctx.map(workflow, items, distributed=True)``, each item a child run.

The map takes one position P in its caller's sequence. Item i runs as a child run of
the registered workflow, recorded at ``P.i`` like ``ctx.start_child``
(``durable.engine.children``: the record and the child are written together, the child's
end settles the record and wakes the parent, or the parent's look at the child does).
What the parent knows is what those records say, so everything below is recomputed from
them on every invocation, never kept in memory:

* the **window**: children started (records under P) minus children ended (records
  settled) is at most ``max_concurrency``. The parent starts the next items, in order,
  only into free places, so no crash, replay or zombie can exceed it (a zombie's start
  fails its lease guard; the records and children are written together);
* creation is **batched**: up to ``MAX_CHILDREN_PER_START`` children per atomic write;
* the **completion rule** (``durable.core.completion``) is applied to the settled records; once
  decided, the *decision* is written at P (fenced): the rule's verdict, how many items
  were started and which were still running. Those are canceled then (with their
  compensations), after the decision, as an inline batch cancels its open branches: a
  crash between replays the decision and cancels them again (a cancel is idempotent);
* while the window is full the parent looks again at the open items' records only (a
  batched read, O(window)) and goes on in the same invocation as long as children keep
  ending; when none has, it suspends until its next look at its children themselves
  (``durable.engine.children.report_look_due``: a report can be lost between a child's
  end and the parent's record). Each report bumps the parent's inbox, so a suspension
  that raced one is refused and the parent reloads, and a parent that is waiting is
  invoked by the report. The parent is woken per stall of progress, not per child, and
  a look costs O(window), not O(items).

``BatchResult`` is built from the records: an item's value is its child's result
(decoded by the workflow's return annotation), its error a ``ChildFailed``, and an item
that was running or not started when the rule was decided is ``canceled`` whatever it did
later. The decision holds counts and the open indices only (at most ``max_concurrency``),
so a map of 100,000 items fits one record; the values stay in the items' records.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from durable.core import serde
from durable.core.codecs import Coded
from durable.core.completion import (
    BatchItem,
    BatchResult,
    Completion,
    check_max_concurrency,
    parse_completion,
)
from durable.core.ids import derived_run_id
from durable.core.limits import record_size
from durable.core.model import RunRecord, StepKind, StepRecord, StepStatus, position_path
from durable.core.ports import MAX_CHILDREN_PER_START, TRANSACTION_BYTES, ConditionFailed, RunExists
from durable.core.retention import incarnation
from durable.engine.children import (
    child_annotation,
    child_detail,
    child_of,
    link,
    look_for_ends,
    report_look_due,
)
from durable.errors import (
    ChildFailed,
    InvalidInput,
    InvalidState,
    LeaseLost,
    NonDeterminismError,
)

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.engine.execution_parts import ExecutionParts

log = logging.getLogger("durable.distributed")

# Items one distributed map takes: a parent's history holds a record per item.
DISTRIBUTED_LIMIT = 100_000
# Children running at once when ``max_concurrency`` is not given.
DEFAULT_WINDOW = 100
# A look at the open items happens only with this much of the invocation left, and on a
# lease good for at least this long (``LeaseKeeping.ensure_lease``).
REFRESH_MIN_SECONDS = 10.0
# Looks at the open items are this far apart at least (seconds): a window of 100 read
# once a second is 100 read units a second, whatever the children's pace.
LOOK_INTERVAL = 1.0
REFRESH_BUDGET = timedelta(seconds=5)


def run_distributed(
    x: ExecutionParts,
    name: str,
    wf: WorkflowDef,
    items: Sequence[Any],
    *,
    max_concurrency: int | None,
    completion: Any,
    codec: Coded | None = None,
) -> BatchResult[Any]:
    """``codec`` (``serdes=``): what decodes each child's result, in place of its
    workflow's return annotation."""
    rule = parse_completion(completion)
    check_max_concurrency(max_concurrency)
    total = len(items)
    _check(name, wf, total, rule)
    window = max_concurrency or DEFAULT_WINDOW
    position = x.next_position()
    rec = x.recorded(position, name, StepKind.BATCH)
    _check_replayed_items(x, wf, position, items)
    if rec is not None and rec.status == StepStatus.DONE and rec.output is not None:
        decision = json.loads(rec.output)
        if decision["n"] != total:
            x.nondeterminism = NonDeterminismError(
                position, f"a map of {decision['n']}", f"a map of {total}"
            )
            raise x.nondeterminism
        _cancel_open(x, position, decision)
        return _result(x, name, wf, position, decision, codec)
    looked: list[datetime] = []  # when this invocation last looked at the open items
    while True:
        started, open_, succeeded, failed = _count(x, position, total)
        verdict = rule.decide(total, succeeded, failed)
        if verdict is not None:
            decision = {
                "n": total,
                "rule": rule.describe(),
                "ok": verdict,
                "started": started,
                "open": open_,
                "distributed": True,
            }
            written = x.write_fenced(
                x.new_record(
                    position,
                    name,
                    StepKind.BATCH,
                    StepStatus.DONE,
                    output=json.dumps(decision, separators=(",", ":")),
                )
            )
            decision = json.loads(written.output or "{}")
            _cancel_open(x, position, decision)
            return _result(x, name, wf, position, decision, codec)
        free = window - len(open_)
        if free > 0 and started < total:
            if started == 0:
                _check_items(x, wf, items)
            _start(x, wf, position, items, started + 1, min(total, started + free))
        elif not _refresh(x, position, open_, looked):
            waiting = [x.steps[_item_position(position, i)] for i in open_]
            if look_for_ends(x, waiting):
                continue  # ends whose reports were lost: settled from the children
            oldest = min(waiting, key=lambda rec: rec.updated_at)
            raise x.suspend(report_look_due(oldest, x.clock.now()), replayed=True)


def _check(name: str, wf: WorkflowDef, total: int, rule: Completion) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidInput('a map needs a name: name="import-records"', field="name")
    if total > DISTRIBUTED_LIMIT:
        raise InvalidInput(
            f"map {name!r} has {total} items; a distributed map takes at most "
            f"{DISTRIBUTED_LIMIT}: split them into maps of at most that many (or pass "
            "each child a page of items)",
            field="items",
        )
    if rule.kind == "min_successful" and rule.count > total:
        raise InvalidInput(
            f"completion {rule.describe()} over {total} item(s) can never be met: ask for "
            "at most as many successes as there are items",
            field="completion",
        )
    if serde.has_secrets(wf.return_annotation):
        raise InvalidInput(
            f"workflow {wf.name!r} returns secret-typed values, sealed with its own run's "
            "key, which the map cannot open: return a reference to the secret instead",
            field="fn",
        )


def _check_items(x: ExecutionParts, wf: WorkflowDef, items: Sequence[Any]) -> None:
    """Every item against the workflow's input type and its flow-control keys, before the
    first child starts: a bad item is the caller's mistake, found at the call with nothing
    started (its children would keep running after the parent failed). Inputs with
    secrets are checked as each child starts (sealing them needs the child's key)."""
    annotation = wf.input_annotation
    if serde.has_secrets(annotation):
        return
    for index, item in enumerate(items, start=1):
        try:
            text = serde.validate_input(item, annotation, wf.name, None)
            x.engine.admission.gate_for(wf, text)
        except InvalidInput as e:
            raise InvalidInput(f"map item {index} (of {len(items)}): {e}", field="items") from e


def _refresh(x: ExecutionParts, position: str, open_: list[int], looked: list[datetime]) -> bool:
    """Look again at the open items' records only (one batched read per 100), and take
    those their children settled since: while reports keep coming, the parent goes on
    in this invocation at O(window) a look, instead of suspending, being refused for the
    inbox the reports moved, and reloading its whole history (O(items)). False when
    none settled: the parent suspends (a refusal then reloads, as for any event)."""
    if not open_ or x.dry_run or x.cursor.replay_only:
        return False
    remaining = x.remaining()
    if remaining is not None and remaining < REFRESH_MIN_SECONDS:
        return False  # leave the rest to the next invocation
    if looked:  # at most one look per LOOK_INTERVAL: each reads up to a window of items
        wait = LOOK_INTERVAL - (x.clock.now() - looked[-1]).total_seconds()
        if wait > 0:
            x.idle(wait)
    looked[:] = [x.clock.now()]
    x.ensure_lease(REFRESH_BUDGET)  # renewed when due, and a cancel is seen
    positions = [_item_position(position, i) for i in open_]
    moved = False
    for at, rec in x.ledger.get_steps(x.run.run_id, positions).items():
        if rec.status.final:
            x.steps[at] = rec
            moved = True
    return moved


def _item_position(position: str, index: int) -> str:
    return f"{position}.{position_path(index)}"


def _item_digest(wf: WorkflowDef, item: Any) -> str | None:
    """What an item's child id is derived from besides its position: the hash of the
    child's input as it would be stored. None for a workflow whose input holds secrets
    (sealing is randomized, so no stable digest): its children are told apart by
    position only, and a change to their items is not seen."""
    if serde.has_secrets(wf.input_annotation):
        return None
    text = serde.validate_input(item, wf.input_annotation, wf.name, None)
    return serde.identity_hash(text)[:32]


def _child_id(wf: WorkflowDef, stem: str, at: str, digest: str | None) -> str:
    key = stem + at if digest is None else f"{stem}{at}#{digest}"
    return derived_run_id(wf.name, key, "child")


def _check_replayed_items(
    x: ExecutionParts, wf: WorkflowDef, position: str, items: Sequence[Any]
) -> None:
    """The items of a map that started children are the items it started them with: a
    replay with fewer items (the dropped ones' children would never be waited for nor
    canceled), another workflow, or another item at a started position is a
    ``NonDeterminismError``, as an inline map's is. An item's child id is derived from
    its position and its input (``_item_digest``), so this reads nothing; a child started
    by an engine that derived ids from the position alone is taken as it is."""
    prefix = position + "."
    started = [p for p in x.steps if p.startswith(prefix) and "." not in p[len(prefix) :]]
    if not started:
        return
    stem = f"{x.run.run_id}.{incarnation(x.run)}@"
    for at in sorted(started):
        index = int(at[len(prefix) :])
        rec = x.steps[at]
        if index > len(items):
            x.nondeterminism = NonDeterminismError(
                at, f"map item {index} (child run {child_of(rec)})", f"a map of {len(items)}"
            )
            raise x.nondeterminism
        if rec.name != wf.name:
            x.nondeterminism = NonDeterminismError(
                at, f"a child of {rec.name!r}", f"a map of workflow {wf.name!r}"
            )
            raise x.nondeterminism
        found = child_of(rec)
        try:
            digest = _item_digest(wf, items[index - 1])
        except InvalidInput:  # it was valid when its child started: it changed
            digest = "an item that is no longer valid"
        if found not in (_child_id(wf, stem, at, digest), _child_id(wf, stem, at, None)):
            x.nondeterminism = NonDeterminismError(
                at,
                f"map item {index} started with another input (child run {found})",
                f"item {index} changed",
            )
            raise x.nondeterminism


def _count(x: ExecutionParts, position: str, total: int) -> tuple[int, list[int], int, int]:
    """(started, open indices, succeeded, failed) from the items' records. Items start
    in order, so the started ones are 1..started."""
    started = succeeded = failed = 0
    open_: list[int] = []
    steps = x.steps
    for index in range(1, total + 1):
        rec = steps.get(_item_position(position, index))
        if rec is None:
            break
        started = index
        if rec.status == StepStatus.DONE:
            succeeded += 1
        elif rec.status.final:
            failed += 1
        else:
            open_.append(index)
    return started, open_, succeeded, failed


def _start(
    x: ExecutionParts, wf: WorkflowDef, position: str, items: Sequence[Any], first: int, last: int
) -> None:
    """Start items ``first..last`` (their records and children together), in batches."""
    parent_id = x.run.run_id
    stem = f"{parent_id}.{incarnation(x.run)}@"
    pending: list[tuple[StepRecord, RunRecord]] = []
    for index in range(first, last + 1):
        at = _item_position(position, index)
        child_id = _child_id(wf, stem, at, _item_digest(wf, items[index - 1]))
        child = x.engine.new_run(
            wf,
            items[index - 1],
            child_id,
            requested_by=f"run {parent_id}",
            parent=link(parent_id, at),
        )
        step = x.new_record(at, wf.name, StepKind.CHILD, StepStatus.WAITING)
        step.detail = child_detail(child_id)
        pending.append((step, child))
    for batch in start_batches(pending):
        _start_batch(x, [s for s, _ in batch], [c for _, c in batch])


def start_batches(
    pending: list[tuple[StepRecord, RunRecord]],
) -> list[list[tuple[StepRecord, RunRecord]]]:
    """``pending`` cut into batches one transaction holds: at most
    ``MAX_CHILDREN_PER_START`` children, and their items within ``TRANSACTION_BYTES``."""
    batches: list[list[tuple[StepRecord, RunRecord]]] = []
    size = 0
    for step, child in pending:
        item = record_size(step) + record_size(child)
        if (
            not batches
            or len(batches[-1]) == MAX_CHILDREN_PER_START
            or (size + item > TRANSACTION_BYTES)
        ):
            batches.append([])
            size = 0
        batches[-1].append((step, child))
        size += item
    return batches


def _start_batch(x: ExecutionParts, steps: list[StepRecord], children: list[RunRecord]) -> None:
    x.check_cancel()
    try:
        together = x.ledger.start_children(steps, x.guard(), children)
    except ConditionFailed as e:
        raise LeaseLost() from e
    if not together:  # one of them is there already (a replay): one by one
        _start_one_by_one(x, steps, children)
    else:
        for step in steps:
            x.steps[step.position] = step
    for child in children:
        x.engine.invoke_worker(child.run_id, "start")


def _start_one_by_one(
    x: ExecutionParts, steps: list[StepRecord], children: list[RunRecord]
) -> None:
    for step, child in zip(steps, children, strict=True):
        try:
            stored = x.ledger.start_child(step, x.guard(), child)
        except ConditionFailed as e:
            raise LeaseLost() from e
        except RunExists as e:
            raise InvalidState(
                f"child run {child.run_id} of map item {step.position} exists without its "
                "record; this should not happen: report it with the run id"
            ) from e
        x.kept(step, stored)


def _cancel_open(x: ExecutionParts, position: str, decision: dict[str, Any]) -> None:
    """Cancel the children that were running when the rule was decided (again after a
    crash: a cancel of a finished or already canceled run is a no-op)."""
    for index in decision.get("open", []):
        rec = x.steps.get(_item_position(position, index))
        if rec is None or rec.status.final:
            continue
        try:
            x.engine.cancel(
                child_of(rec),
                f"map {rec.name!r} of run {x.run.run_id} was decided without it",
                compensate=True,
                requested_by=f"run {x.run.run_id}",
            )
        except InvalidState:
            continue  # it ended meanwhile


def _result(
    x: ExecutionParts,
    name: str,
    wf: WorkflowDef,
    position: str,
    decision: dict[str, Any],
    codec: Coded | None = None,
) -> BatchResult[Any]:
    started, open_ = int(decision["started"]), set(decision.get("open", []))
    items: list[BatchItem[Any]] = []
    for index in range(1, int(decision["n"]) + 1):
        rec = x.steps.get(_item_position(position, index))
        if index > started or index in open_ or rec is None or not rec.status.final:
            items.append(BatchItem(index - 1, "canceled"))
        elif rec.status == StepStatus.DONE:
            value = x.decode(rec.output, codec or child_annotation(x, rec, wf))
            items.append(BatchItem(index - 1, "succeeded", value=value))
        else:
            error = ChildFailed(
                child_of(rec),
                rec.name,
                rec.position,
                rec.error_type or "Failed",
                rec.error_summary or "",
            )
            items.append(BatchItem(index - 1, "failed", error=error))
    return BatchResult(name, str(decision["rule"]), bool(decision["ok"]), tuple(items))
