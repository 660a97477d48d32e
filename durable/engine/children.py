"""Child runs: ``ctx.run_child`` and ``ctx.start_child`` (a run of its own, started by a
workflow, whose end the starting workflow can wait for).

A child takes one position P in its parent's sequence, like a step. Starting it is one
atomic write (``Ledger.start_child``): the parent's record at P, WAITING and naming the
child, the child's run item, and the parent's ``children`` count, under the parent's
lease; so a zombie parent starts nothing, and no child exists without the record that
waits for it. Its id is derived from the parent's id and P (or, with ``id=``, from the
child's workflow and that key, as a start with that idempotency key would be), so a
parent that crashes and replays finds its record and starts nothing twice.

The child's end is its own final write, then its report (``Ledger.finish_child``: plain
conditional writes, not one transaction, which would cost twice the units): the parent's
record at P becomes DONE (the child's result) or TERMINAL_FAILED (its error) if it still
waits for this child, then the parent's inbox is bumped so it wakes. A record settles
once, so a completion is never counted twice. A parent that ended first (fire and
forget, or a parent canceled meanwhile) is not woken.

A worker can stop between the child's end and its report (or between the report and the
wake-up): the outcome is in the child's run item, and nobody tells the parent. So the
parent that waits for a child does not wait for ever: it suspends due at its next look
(``report_look_due``: after as long again as it has waited, from one minute to a day),
and a wake-up by that due time (the sweeper's, or a timer's) looks at each child whose
record has waited that minute (``look_for_ends``) and settles the record from the
child's end. A report that comes first leaves the look nothing to do; a look that
comes first leaves the report nothing to settle. Its own cancel cancels the children it
is still waiting for (with their compensations when the cancel asks for them); any
other end leaves them running.

A keyed child (``id=``) whose key a running run already holds (started by another
parent, or by an operator under that key) is refused by default (``if_running="fail"``);
``if_running="attach"`` takes that run instead: "start it unless it is already running",
the commonest reason to key a run. The record names the run with ``attached``; the run
is not this parent's child, so it reports elsewhere, and neither this run's cancel nor
its batch's decision cancels it. A parent that waits for it (``run_child``,
``handle.result()``) looks at it on a backoff (10 s, growing to 15 minutes) until it ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic

# A TypeVar default (PEP 696, typing's from Python 3.13) keeps a bare ``ChildHandle``
# valid under mypy --strict, as ``ChildHandle[Any]``. Installed with pydantic.
from typing_extensions import TypeVar

from durable.core import serde
from durable.core.codecs import Coded, Serdes, coded
from durable.core.ids import check_user_key, derived_run_id
from durable.core.leases import settle_child_record
from durable.core.model import (
    RunRecord,
    RunStatus,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    parse_time,
)
from durable.core.ports import ChildReport, ConditionFailed, RunExists
from durable.core.retention import incarnation, leftover_cutoff
from durable.core.tokens import refuse_token
from durable.engine import keys
from durable.engine.engine_parts import IfRunning, Reuse
from durable.engine.keys import check_reuse
from durable.engine.lineage import follow
from durable.errors import (
    ChildFailed,
    InvalidInput,
    InvalidState,
    LeaseLost,
    RunNotFound,
    WorkflowNotFound,
)

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.core.ports import LedgerReads
    from durable.engine.engine_parts import EngineParts
    from durable.engine.execution_parts import ExecutionParts

log = logging.getLogger("durable.children")

# The scope of the ids derived for children started without ``id=``: no caller's
# idempotency key can produce one of them (``durable.core.ids.derived_run_id``).
_CHILD_SCOPE = "child"

T = TypeVar("T", default=Any)

IF_RUNNING: tuple[IfRunning, ...] = ("fail", "attach")
# How often a parent looks at a run it attached to and waits for: a tenth of the time
# it has waited so far, within these bounds.
ATTACHED_LOOK_MIN = timedelta(seconds=10)
ATTACHED_LOOK_MAX = timedelta(minutes=15)
# How often a parent looks at its own child for an end whose report was lost: after as
# long again as it has waited, within these bounds. A lost report is rare (a worker
# stopped in the moment between two writes), and each look is a wake-up of the parent
# (a claim, a load, a read of the child, a suspension: about 5 write units), so the
# looks thin out as the wait grows: their number grows with the wait's logarithm (a child
# that runs an hour costs its parent 6 of them, a day 11, three days 13), and a lost
# report is found within as long again as the parent had waited, a day at most. An hour
# as the cap would find it sooner but cost a day-long child 29 looks (145 units), far
# more than the transaction this design saves (6 units a child).
REPORT_LOOK_MIN = timedelta(minutes=1)
REPORT_LOOK_MAX = timedelta(days=1)
# The wake-ups a parent's due time brings, and the one a child's retried invocation sends
# when it finds the child ended and its parent still waiting (``parent_to_wake``): only
# those look (a report's wake-up, or a worker going on in the same invocation, has news
# and no reason to).
LOOK_REASON = "look"
_LOOKING_REASONS = frozenset({"timer", "sweep", LOOK_REASON})


@dataclass(frozen=True, slots=True)
class ChildHandle(Generic[T]):
    """A child run started by ``ctx.start_child``: ``run_id`` names it (``durable show``);
    ``result()`` waits for its end, as ``ctx.run_child`` does. Never calling ``result()``
    is fire and forget: the child runs to its end whether the parent succeeds or fails;
    canceling the parent cancels it (a cancel stops the parent's work, children included).

    ``ChildHandle[Receipt]`` is the handle of a workflow function returning a ``Receipt``
    (what ``start_child`` gives for one); started by name, it is ``ChildHandle[Any]``."""

    run_id: str
    workflow: str
    position: str
    _execution: ExecutionParts = field(repr=False)
    _workflow: WorkflowDef | None = field(repr=False, default=None)
    # The codec that decodes the child's result (``serdes=``), in place of the annotation.
    _serdes: Serdes[Any] | None = field(repr=False, default=None)

    def result(self) -> T:
        """The child's result (decoded by its workflow's return annotation, at the version
        the child ran, or by the codec given as ``serdes``), or ``ChildFailed`` when it
        failed or was canceled. Suspends the parent until then."""
        codec = coded(self._serdes, f"child run {self.run_id} at position {self.position}")
        value: T = await_child(self._execution, self.position, self._workflow, codec)
        return value


def link(parent_id: str, position: str) -> str:
    """What a child run stores as its ``parent``: ``<parent run id>@<position>``."""
    return f"{parent_id}@{position}"


def parse_link(parent: str) -> tuple[str, str]:
    run_id, _, position = parent.rpartition("@")
    return run_id, position


def resolve_workflow(engine: EngineParts, workflow: str | Callable[..., Any]) -> WorkflowDef:
    """The registered workflow a child runs: by name, or by the function registered."""
    app = engine.app
    if isinstance(workflow, str):
        return app.get_workflow(workflow)
    for wf in app.workflows():
        if wf.fn is workflow:
            return app.get_workflow(wf.name)  # its newest version, as a start would
    name = getattr(workflow, "__name__", repr(workflow))
    raise WorkflowNotFound(
        f"{name} is not a registered workflow: decorate it with @app.workflow, or pass the "
        "name of a registered one, to run it as a child"
    )


def check_if_running(if_running: Any) -> IfRunning:
    if if_running not in IF_RUNNING:
        raise InvalidInput(
            f'if_running is "fail" (refuse a key a running run holds) or "attach" (take '
            f"that run), not {if_running!r}",
            field="if_running",
        )
    value: IfRunning = if_running
    return value


def start_child(
    x: ExecutionParts,
    workflow: str | Callable[..., Any],
    input: Any,
    id: str | None,
    if_running: IfRunning = "fail",
    serdes: Serdes[Any] | None = None,
    reuse: Reuse = "never",
) -> ChildHandle[Any]:
    check_if_running(if_running)
    check_reuse(reuse)
    refuse_token(workflow, "workflow", "child workflow's name")
    wf = resolve_workflow(x.engine, workflow)
    coded(serdes, f"child run of {wf.name!r}")  # refused before the child starts
    if serde.has_secrets(wf.return_annotation):
        raise InvalidInput(
            f"workflow {wf.name!r} returns secret-typed values, sealed with its own run's "
            "key, which its parent cannot open: return a reference to the secret instead",
            field="workflow",
        )
    if id is not None:
        refuse_token(id, "id", "child's id", "the child's input")
        # A key of one's own: refused here, before its slot is read (a sender's
        # namespace names no slot), as ``new_run`` would refuse it.
        check_user_key(id, "id")
    position = x.next_position()
    rec = x.recorded(position, wf.name, StepKind.CHILD)
    if rec is None:
        rec = _start(x, wf, input, id, position, if_running, reuse)
    child_id = str((rec.detail or {}).get("child", ""))
    return ChildHandle(child_id, wf.name, position, x, wf, serdes)


def _start(
    x: ExecutionParts,
    wf: WorkflowDef,
    input: Any,
    id: str | None,
    position: str,
    if_running: IfRunning = "fail",
    reuse: Reuse = "never",
) -> StepRecord:
    parent_id = x.run.run_id
    if id is None:
        # This incarnation's: a keyed parent restarted after its retention ended reuses
        # its id, and must not find the earlier incarnation's child there.
        key = f"{parent_id}.{incarnation(x.run)}@{position}"
        child_id = derived_run_id(wf.name, key, _CHILD_SCOPE)
        try:
            return _create(x, wf, input, None, position, child_id)
        except _Taken as taken:
            settled = _taken(x, taken, None, if_running, "never")
            assert settled is not None  # only a reused key moves on
            return settled
    for _ in range(keys.MAX_MOVES):
        # The run the key names now (``durable.engine.keys``): a key never reused names the
        # id derived from it, as a start with that idempotency key would.
        slot = keys.read_slot(x.ledger, wf.name, id)
        try:
            return _create(x, wf, input, id, position, slot.run_id, slot.after)
        except _Taken as taken:
            settled = _taken(x, taken, id, if_running, reuse)
            if settled is not None:
                return settled
            keys.move_on(x.ledger, slot)  # lost: another start moved it; read again
    raise InvalidInput(
        f"child id {id!r}: other starts of it keep starting new runs; retry the parent",
        field="id",
    )


class _Taken(Exception):
    """A child's id is a run's already: ``existing``; ``step`` and ``child`` were to be
    written."""

    def __init__(self, existing: RunRecord, step: StepRecord, child: RunRecord) -> None:
        super().__init__(existing.run_id)
        self.existing, self.step, self.child = existing, step, child


def _create(
    x: ExecutionParts,
    wf: WorkflowDef,
    input: Any,
    id: str | None,
    position: str,
    child_id: str,
    after: str | None = None,
) -> StepRecord:
    """Start the child ``child_id`` with this run's record at ``position`` (one write);
    ``_Taken`` when a run has that id already."""
    parent_id = x.run.run_id
    child = x.engine.new_run(
        wf,
        input,
        child_id,
        idempotency_key=id,
        requested_by=f"run {parent_id}",
        parent=link(parent_id, position),
        after=after,
    )
    step = x.new_record(position, wf.name, StepKind.CHILD, StepStatus.WAITING)
    step.detail = child_detail(child_id)
    try:
        stored = x.ledger.start_child(step, x.guard(), child)
    except ConditionFailed as e:
        raise LeaseLost() from e
    except RunExists as e:
        raise _Taken(e.existing, step, child) from e
    rec = x.kept(step, stored)
    if stored is step:
        x.engine.invoke_worker(child_id, "start")
    return rec


def _taken(
    x: ExecutionParts, e: _Taken, id: str | None, if_running: IfRunning, reuse: Reuse
) -> StepRecord | None:
    """What a keyed child whose id a run holds gets: that run attached to or its outcome
    adopted (the record written), ``InvalidInput``, or None: it ended and the key is to
    be reused (``reuse="after_end"``: move its slot on and start there).

    The run is not this run's (the record and the child are written together, so a child
    of this run at this position would have left the record a replay finds first): a run
    with that key, started by an operator, another parent, or the run this one was forked
    from. Finished with the same input, it is the same run: take its outcome. One that
    continued as new is that run too, and its chain's end has its outcome: a chain still
    going is a run still running (``durable.engine.lineage``)."""
    step, child, existing = e.step, e.child, e.existing
    end, going = existing, not existing.terminal
    if existing.terminal:
        reached = follow(x.ledger.get_run, existing)
        end, going = reached.run, not reached.whole or not reached.run.terminal
    if going and if_running == "attach":
        _check_not_own_line(x, existing.run_id, id)
        if end.run_id != existing.run_id:
            _check_not_own_line(x, end.run_id, id)
        detail = {**child_detail(existing.run_id), "attached": True}
        if end.run_id != existing.run_id:
            detail["follow"] = end.run_id  # where the next look walks on from
        step.detail = detail
        return x.write_fenced(step)
    if not going and reuse == "after_end" and existing.workflow == child.workflow:
        return None
    if not going and (existing.workflow, existing.input_hash) == (
        child.workflow,
        child.input_hash,
    ):
        return x.write_fenced(_settled_from(step, end, x.now_text(), existing.run_id))
    if not going:
        advice = (
            "it has ended with another input; a key names one run for its retention "
            'unless reused: pass reuse="after_end" to start a new run under it, or key '
            "each new run apart (add the date, say)"
        )
    else:
        advice = (
            'it is still running: pass if_running="attach" to take that run instead '
            "of starting one, or key each new run apart"
        )
        if end.run_id != existing.run_id:
            advice = f"it continued as new and its chain goes on in run {end.run_id}; " + (
                advice.removeprefix("it is still running: ")
            )
    raise InvalidInput(
        f"child id {id!r} is taken by run {existing.run_id} ({existing.workflow}, "
        f"{existing.status.value}): {advice}",
        field="id",
    ) from e


def _check_not_own_line(x: ExecutionParts, run_id: str, id: str | None) -> None:
    """A run cannot attach to itself or to a run it descends from: each would wait for
    the other for ever (found by the explorer: a run started under key K whose code
    starts a child with ``id=K``)."""
    line: list[str] = []
    current: RunRecord | None = x.run
    while current is not None and len(line) < 100:
        line.append(current.run_id)
        if run_id == current.run_id:
            raise InvalidInput(
                f"child id {id!r} names run {run_id}, which is "
                f"{'this run' if len(line) == 1 else 'an ancestor of this run'}: it would "
                "wait for itself; key the child apart from the runs above it",
                field="id",
            )
        if current.parent is None:
            return
        current = x.ledger.get_run(parse_link(current.parent)[0])


def await_child(
    x: ExecutionParts, position: str, wf: WorkflowDef | None, codec: Coded | None = None
) -> Any:
    """The child's outcome once its report is in (its result decoded by ``codec`` when
    given); else suspend until it is."""
    rec = x.steps[position]
    if not rec.status.final:
        x.check_cancel()
        if is_attached(rec):
            rec = _look_at_attached(x, rec)
        elif rec.status != StepStatus.WAITING:
            rec = _reopened(x, rec)
    if rec.status == StepStatus.DONE:
        annotation = serde.NO_ANNOTATION if wf is None else child_annotation(x, rec, wf)
        return x.decode(rec.output, codec or annotation)
    if rec.status.final:
        raise ChildFailed(
            child_of(rec), rec.name, position, rec.error_type or "Failed", rec.error_summary or ""
        )
    if not is_attached(rec) and look_for_ends(x, [rec]):
        return await_child(x, position, wf, codec)
    raise x.suspend(report_look_due(rec, x.clock.now()), replayed=True)


def parent_to_wake(ledger: LedgerReads, run_id: str) -> str | None:
    """The parent to wake with ``LOOK_REASON`` for a run a worker could not claim: when
    the run is a child that has ended and its parent's record still waits for it, its
    report was lost (or is landing right now); else None.

    Why here: a child's end and its report are separate writes, and a worker stopped
    between them is the invocation Lambda retries about a minute later. That retry cannot
    claim the ended child; without this, the end waited for the parent's own next look,
    which after a day's wait is up to a day away. With it, the retry heals the loss within
    about a minute. Costs a busy claim one read of the run item (and a running child
    nothing more); a report that landed meanwhile is found settled and wakes nothing, one
    landing right now races the parent's look, which settles nothing a report settled
    first (``look_for_ends``)."""
    run = ledger.get_run(run_id)
    if run is None or not run.terminal or run.parent is None:
        return None
    parent_id, position = parse_link(run.parent)
    rec = ledger.get_step(parent_id, position)
    if (
        rec is None
        or rec.kind != StepKind.CHILD
        or rec.status != StepStatus.WAITING
        or is_attached(rec)
        or child_of(rec) != run_id
    ):
        return None
    return parent_id


def report_look_due(rec: StepRecord, now: datetime) -> str:
    """When a parent waiting since ``rec`` was written looks at its child next, should
    no report wake it first: after as long again as it has waited, within
    ``REPORT_LOOK_MIN`` and ``REPORT_LOOK_MAX``. The due time alone (no timer): the
    sweeper's pass brings it."""
    waited = now - parse_time(rec.updated_at)
    return format_time(now + min(max(waited, REPORT_LOOK_MIN), REPORT_LOOK_MAX))


def look_for_ends(x: ExecutionParts, records: list[StepRecord]) -> list[StepRecord]:
    """Settle each of ``records`` (WAITING for a child of this run) whose child has ended
    without its report reaching the record, from the child's run item; the settled
    records. Only on a wake-up the parent's due time brought, and only for records that
    have waited ``REPORT_LOOK_MIN``: a report normally lands long before, and a look
    reads one run item per child.

    The write is fenced and settles nothing a report settled meanwhile (the first final
    record wins, the later writer adopts it): one outcome, counted once."""
    if x.reason not in _LOOKING_REASONS or x.dry_run or x.cursor.replay_only:
        return []
    now = x.clock.now()
    settled: list[StepRecord] = []
    for rec in records:
        if rec.status != StepStatus.WAITING or is_attached(rec):
            continue
        if now - parse_time(rec.updated_at) < REPORT_LOOK_MIN:
            continue
        child_id = child_of(rec)
        child = x.ledger.get_run(child_id)
        if child is not None and _later_run(x, rec, child):
            child = None  # a keyed id's next run, started elsewhere: this one is gone
        if child is not None and not child.terminal:
            continue  # running: its report will come
        if child is None:
            # Its retention ended before this look (a sweeper stopped for longer than
            # the retention, or a look due after it): the outcome is gone, and waiting
            # for it would be for ever.
            ended = _gone(
                x,
                rec,
                "ended and no longer exists (its retention ended before its parent "
                "took its outcome)",
            )
        else:
            log.info("child run %s ended without its report reaching its parent", child_id)
            ended = _settled_from(rec, child, x.now_text())
        settled.append(x.write_fenced(ended))
    return settled


def _later_run(x: ExecutionParts, rec: StepRecord, child: RunRecord) -> bool:
    """Whether ``child``, the run now under the id ``rec`` names, is a later run than the
    one ``rec`` waits for: not this run's child, and ``rec`` a leftover beside it by
    ``durable.core.retention``'s rule (written well before it was created: the run it
    named ended, expired, and its key was used again). A keyed run this run adopted
    (started by an operator or another parent, and waited for again after an operator's
    retry of this run reopened the record, ``_reopened``) is older than the record, and
    its end is this record's."""
    if child.parent == link(x.run.run_id, rec.position):
        return False
    return rec.updated_at < leftover_cutoff(child)


def is_attached(rec: StepRecord) -> bool:
    """A record naming a run this run attached to (``if_running="attach"``): not its child."""
    return rec.kind == StepKind.CHILD and bool((rec.detail or {}).get("attached"))


def _look_at_attached(x: ExecutionParts, rec: StepRecord) -> StepRecord:
    """Settle the record from the attached run once it has ended; until then, suspend to
    look again after a tenth of the time waited so far (``ATTACHED_LOOK_MIN`` to
    ``_MAX``): no report comes from a run that is not this run's child.

    A run that continued as new has not ended: its chain's end has (or will have) its
    outcome. The record keeps the furthest run of the chain it reached (``follow``), so
    each look walks on from there, and the run it names may expire meanwhile."""
    named = child_of(rec)
    start_id = str((rec.detail or {}).get("follow") or named)
    attached = x.ledger.get_run(start_id)
    if attached is None:
        gone = replace(
            rec,
            status=StepStatus.TERMINAL_FAILED,
            error_type="ChildGone",
            error_summary=f"run {start_id} no longer exists (its retention ended)",
            updated_at=x.now_text(),
        )
        return x.write_fenced(gone)
    reached = follow(x.ledger.get_run, attached)
    end = reached.run
    if reached.whole and end.terminal:
        return x.write_fenced(_settled_from(rec, end, x.now_text(), named))
    if end.run_id != start_id:
        # Walked on: keep the place (same record, same wait so far) for the next look.
        rec = x.write_fenced(replace(rec, detail={**(rec.detail or {}), "follow": end.run_id}))
    now = x.clock.now()
    waited = now - parse_time(rec.updated_at)
    look = min(max(waited / 10, ATTACHED_LOOK_MIN), ATTACHED_LOOK_MAX)
    raise x.suspend(format_time(now + look), rec.position, replayed=True)


def child_detail(child_id: str) -> dict[str, Any]:
    """A waiting child record's ``detail``: exactly this, because a report settles the
    record only when its detail names the reporting child (``Ledger.finish_child``)."""
    return {"child": child_id}


def child_of(rec: StepRecord) -> str:
    return str((rec.detail or {}).get("child", ""))


def _gone(x: ExecutionParts, rec: StepRecord, why: str) -> StepRecord:
    """``rec`` failed for good with ``ChildGone``: its child's run item no longer exists."""
    return replace(
        rec,
        status=StepStatus.TERMINAL_FAILED,
        error_type="ChildGone",
        error_summary=f"child run {child_of(rec)} {why}",
        updated_at=x.now_text(),
    )


def _reopened(x: ExecutionParts, rec: StepRecord) -> StepRecord:
    """A child record an operator's retry of the parent reopened (the child had failed):
    retry the child too when it can be, and wait for it again; settle the record from
    the child when it ended otherwise (or ended while the record was not waiting)."""
    engine = x.engine
    child_id = child_of(rec)
    child = x.ledger.get_run(child_id)
    if child is None:
        # Its retention ended and its run item expired: nothing is left to wait for.
        return x.write_fenced(
            _gone(
                x,
                rec,
                "no longer exists (its retention ended); fork this run from an "
                "earlier step to start the child again",
            )
        )
    if child.status == RunStatus.FAILED and not child.compensated:
        try:
            engine.retry(child_id, requested_by=f"run {x.run.run_id}")
        except InvalidState:
            log.info("child run %s could not be retried; its failure stands", child_id)
        else:
            child = None  # running again: wait for its report
    if child is not None and child.terminal:
        return x.write_fenced(_settled_from(rec, child, x.now_text()))
    waiting = x.write_fenced(
        x.new_record(
            rec.position,
            rec.name,
            StepKind.CHILD,
            StepStatus.WAITING,
            detail=child_detail(child_id),
        )
    )
    # It may have ended while the record was not waiting (its report found none): look
    # once more now that a report can land.
    child = x.ledger.get_run(child_id)
    if child is not None and child.terminal:  # a retried child may have failed again
        return x.write_fenced(_settled_from(waiting, child, x.now_text()))
    return waiting


def report_of(child: RunRecord, changes: dict[str, Any]) -> ChildReport | None:
    """What a child's final write (``changes`` on ``child``) reports to its parent; None
    for a run that is not a child."""
    if child.parent is None:
        return None
    parent_id, position = parse_link(child.parent)
    return outcome_report(child, changes, parent_id, position)


def outcome_report(
    run: RunRecord, changes: dict[str, Any], parent_id: str, position: str
) -> ChildReport:
    """The outcome of ``run`` (``changes`` being its final write) as a report to the
    record at ``position`` of ``parent_id``, with the version of its workflow it ran."""
    status = RunStatus(str(changes.get("status", run.status.value)))
    if status == RunStatus.SUCCEEDED:
        return ChildReport(
            parent_id,
            position,
            run.run_id,
            StepStatus.DONE,
            output=changes.get("output"),
            version=run.version,
        )
    error = changes.get("error")
    error_type = error.type if error is not None else status.value.title()
    message = error.message if error is not None else ""
    return ChildReport(
        parent_id,
        position,
        run.run_id,
        StepStatus.TERMINAL_FAILED,
        error_type=error_type,
        error_message=message,
        version=run.version,
    )


def _settled_from(
    rec: StepRecord, child: RunRecord, now: str, named: str | None = None
) -> StepRecord:
    """``rec`` settled by the outcome of the finished run ``child``: its own child, or a
    run with the same key and input an operator (or the run this one was forked from)
    started, which is adopted as if it had been started here.

    ``named``: the run the record names when ``child`` is the end of its chain (a run
    that continued as new): the record keeps naming it (a handle's ``run_id`` is the
    same on every replay) and says which run ended the chain (``ended_in``)."""
    changes: dict[str, Any] = {"status": child.status.value, "output": child.output}
    if child.error is not None:
        changes["error"] = child.error
    report = outcome_report(child, changes, rec.run_id, rec.position)
    if named is None or named == child.run_id:
        return settle_child_record(rec, report, now)
    settled = settle_child_record(rec, replace(report, child_id=named), now)
    return replace(settled, detail={**(settled.detail or {}), "ended_in": child.run_id})


def child_annotation(x: ExecutionParts, rec: StepRecord, newest: WorkflowDef) -> Any:
    """The annotation a child's result is decoded by: its workflow's at the version the
    child ran (``detail["version"]``, from its report), so a v1 child that ends after v2
    was deployed decodes as v1 wrote it. The newest's when the record does not say (a
    child of an older engine) or that version is no longer registered here."""
    version = (rec.detail or {}).get("version")
    if isinstance(version, int) and version != newest.version:
        try:
            return x.engine.app.get_workflow(newest.name, version).return_annotation
        except WorkflowNotFound:
            log.warning(
                "child run %s ran %s version %d, which this worker does not serve: its "
                "result is decoded as version %d's",
                child_of(rec),
                newest.name,
                version,
                newest.version,
            )
    return newest.return_annotation


def pending_children(steps: dict[str, StepRecord]) -> list[str]:
    """The ids of the children a run still waits for (its unsettled child records)."""
    return [
        child_of(rec)
        for rec in steps.values()
        if rec.kind == StepKind.CHILD
        and not rec.status.final
        and child_of(rec)
        and not is_attached(rec)
    ]


def cancel_children(engine: EngineParts, run: RunRecord, steps: dict[str, StepRecord]) -> None:
    """Cancel the children ``run`` still waits for, as its own cancel asked (with their
    compensations when it asked for them). Each cancel is idempotent; a child that ended
    meanwhile is left as it ended."""
    reason = f"parent run {run.run_id} canceled: {run.cancel_reason or 'canceled'}"
    for child_id in pending_children(steps):
        try:
            engine.cancel(
                child_id,
                reason[:1000],
                compensate=run.cancel_compensate,
                requested_by=f"run {run.run_id}",
            )
        except (InvalidState, RunNotFound):
            continue  # it finished meanwhile, or its retention ended
        except Exception:
            log.warning("canceling child run %s failed", child_id, exc_info=True)
            raise
