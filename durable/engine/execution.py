"""One invocation's replay of a run: positions, recorded results, step bodies, the lease.

An ``Execution`` is created after the run was claimed and its partition loaded. It calls
the workflow function from the top; every durable call takes the next position and either
returns what the ledger recorded there or executes and records it. It never outlives the
invocation: suspension, hand-off and lease loss are ``BaseException`` signals that unwind
the workflow and are turned into outcomes by ``Engine.resume``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from durable.core import serde
from durable.core.callables import (
    Semantics,
    StepOptionsResolved,
    WorkflowDef,
    callable_name,
    return_annotation,
)
from durable.core.codecs import Coded, Serdes, coded
from durable.core.leases import decided_batch_above, waiting_for
from durable.core.lifetime import lifetime_end, wake_by_lifetime
from durable.core.model import (
    RunHistory,
    RunRecord,
    RunStatus,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    parse_time,
    top_index,
)
from durable.core.ports import ConditionFailed, Invocation, RunGuard
from durable.core.progress import progress_value
from durable.core.retry import RetryPolicy
from durable.core.secrets import SEALED, Sealer, SecretsNeedKeys, key_record, open_sealer
from durable.core.sleeps import keepable, kept_sleeps, overflow, with_sleeps
from durable.core.token_shape import REDACTED_TOKEN, scrub_text
from durable.core.tokens import refuse_token
from durable.core.values import RECORDED_VALUES
from durable.engine.active import bind_context, reset_context
from durable.engine.context import Context
from durable.engine.cursor import Compensation, Cursor, bound_cursor
from durable.engine.events import ensure_inherited
from durable.engine.interrupts import (
    BranchParked,
    BranchStopped,
    ContinueAsNew,
    DryRunComplete,
    HistoryLimitExceeded,
    InboxChanged,
)
from durable.engine.lease_keeping import LeaseKeeping
from durable.engine.registry import (
    RESERVED_STEP_OPTIONS,
    StepFunction,
    check_step_options,
    reject_async_generator,
)
from durable.engine.steps import StepRun
from durable.engine.turns import Turn
from durable.errors import (
    InvalidInput,
    LeaseLost,
    NonDeterminismError,
    RunCanceled,
    StepFailed,
    Suspend,
    TerminalError,
)

if TYPE_CHECKING:
    from durable.engine.engine_parts import EngineParts
    from durable.engine.execution_parts import LoopRun

_PATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# A waiting record's kind as ``waiting_for`` says it: a step waiting is a retry's backoff.
_WAIT_KIND = {StepKind.STEP: "retry", StepKind.COMPENSATION: "retry"}


def check_patch_id(patch_id: str) -> str:
    """A patch id: 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit."""
    # First: the message below repeats the id, and a token must not be repeated.
    refuse_token(patch_id, "patch_id", "ctx.changed's patch id")
    if not isinstance(patch_id, str) or not _PATCH_ID.match(patch_id):
        raise InvalidInput(
            f"ctx.changed({patch_id!r}): name the change with 1-100 letters, digits, '.', "
            "'_' or '-', e.g. ctx.changed(\"fix-tax-rounding\")",
            field="patch_id",
        )
    return patch_id


class Execution(LeaseKeeping):
    """Drives one replay of a claimed run; see the module docstring."""

    def __init__(
        self,
        engine: EngineParts,
        workflow: WorkflowDef,
        history: RunHistory,
        owner: str,
        invocation: Invocation,
        *,
        poisoned: bool = False,
        hop: int = 0,
        reason: str = "",
        events_inbox: int | None = None,
        read_at: datetime | None = None,
    ) -> None:
        self.engine = engine
        self.config = engine.config
        self.clock = engine.clock
        self.ledger = engine.ledger
        self.workflow = workflow
        self.run: RunRecord = history.run
        # A ledger's load already presents the sleeps the run item keeps as records
        # (``durable.core.sleeps``); a history from elsewhere (a cache) gets them here.
        self.steps = with_sleeps(history.run, history.steps)
        # The sleeps this run keeps on its run item (waiting or over): each suspension
        # writes them again, with any it records itself.
        self.sleeps_on_run: set[str] = set(history.run.sleeps or ())
        self.signals = history.signals
        # The inbox count this view of steps and signals includes every event of: the
        # suspend guard. Never a count a later write returned (a lease renewal's item may
        # already count an event this replay has not loaded).
        self.events_inbox = history.run.inbox if events_inbox is None else events_inbox
        self.lifetime_end = lifetime_end(
            history.run, engine.config.max_run_lifetime, engine.config.retention
        )
        self.owner = owner
        self.invocation = invocation
        self.poisoned = poisoned
        self.hop = hop
        self.reason = reason  # why the worker was invoked: start, continue, timer, sweep, event
        self.armed = False
        # When the run item this replay starts from was read (the claim, or a reload): its
        # cancel flag is that old, however long the load took, so the first lease check
        # after ``cancel_check_interval`` of it looks again.
        self._checked_at: datetime | None = read_at or self.clock.now()
        self._lease_cache: tuple[str | None, datetime | None] = (None, None)
        # The top-level code's position counter; a batch's branches have their own.
        self._root = Cursor(frontier=max((top_index(p) for p in history.steps), default=0))
        # Taken in turns by the threads of a running batch (``durable.engine.turns``), else None.
        self.turn: Turn | None = None
        self._executed = 0
        self.nondeterminism: NonDeterminismError | None = None
        self.poison_failed = False
        # Callback tokens this replay made or rebuilt: never written anywhere (a reader of
        # the table or a backup could answer with one), so ``redact`` takes them out of
        # every text this run stores.
        self.tokens: set[str] = set()
        self._sealer: Sealer | None = None
        self._answer_sealers: dict[str, Sealer] = {}  # a callback answer's own keys
        self.compensated = False  # compensations of a failure or a cancel were started
        self.dry_run = False  # replay recorded results only; stop where new work begins
        # The event loop driving an ``async def`` workflow, while it runs (else None).
        self.aio: LoopRun | None = None
        # What ``ctx.set_progress`` set last in this invocation (``durable.core.progress``):
        # it rides in the run item's next write while it differs from the stored one.
        self.progress: dict[str, Any] | None = None

    # --- the calling code's cursor ------------------------------------------------------

    @property
    def cursor(self) -> Cursor:
        """The position counter of the calling code: its branch's, or the top level's."""
        return bound_cursor(self) or self._root

    @property
    def compensations(self) -> list[Compensation]:
        """Completed compensable steps of the calling code, oldest first."""
        return self.cursor.compensations

    @property
    def compensating(self) -> bool:
        """Whether the calling code is running compensations (a cancel does not stop them)."""
        return self.cursor.compensating

    @compensating.setter
    def compensating(self, value: bool) -> None:
        self.cursor.compensating = value

    # --- identity and replay -------------------------------------------------------

    def guard(self, **extra: Any) -> RunGuard:
        return RunGuard(fence=self.run.fence, owner=self.owner, **extra)

    def has_timers(self) -> bool:
        """Whether this run may have armed a timer that is still pending."""
        return self.armed or any(s.wake_at or s.expires_at for s in self.steps.values())

    def check_cancel(self) -> None:
        if self.nondeterminism is not None:
            raise self.nondeterminism  # code that caught it once may not go on diverging
        if self.run.cancel_requested and not self.compensating and not self.cursor.replay_only:
            raise RunCanceled(self.run.cancel_reason or "canceled")

    def replaying(self) -> bool:
        """Whether the workflow code is re-running what an earlier invocation already ran
        (it has not passed the last position recorded before this one), or is a dry run.

        Code between the last recorded call and the point where an invocation handed off
        runs in both invocations; like the code itself, its log lines may repeat there."""
        cursor = self.cursor
        return self.dry_run or cursor.counter < cursor.frontier

    @property
    def position(self) -> str | None:
        """The position of the last durable call the workflow code made (None before it)."""
        cursor = self.cursor
        return cursor.path(cursor.counter) if cursor.counter else None

    def next_position(self) -> str:
        if self.nondeterminism is not None:
            raise self.nondeterminism
        cursor = self.cursor
        if not cursor.compensating and cursor.halted():
            # A stopped branch replays what it recorded and ends where new work begins.
            upcoming = self.steps.get(cursor.path(cursor.counter + 1))
            if upcoming is None or not upcoming.status.final:
                raise BranchStopped()
        cursor.counter += 1
        if cursor.counter > self.config.max_history:
            raise HistoryLimitExceeded(
                f"run {self.run.run_id} passed max_history={self.config.max_history} "
                "positions; long loops should call ctx.continue_as_new(state)"
            )
        if cursor.limit is not None and cursor.counter > cursor.limit:
            raise BranchStopped()  # a decided branch's replay ends where it ended then
        return cursor.path(cursor.counter)

    def recorded(self, position: str, name: str, kind: StepKind) -> StepRecord | None:
        """The final or pending record at ``position``, checked against the call.

        A cancel request stops the run here, at the first position that would do new
        work; replaying recorded results first rebuilds the compensation list.
        """
        rec = self.steps.get(position)
        if self.cursor.replay_only and (
            rec is None or (not rec.status.final and rec.kind != StepKind.CALLBACK)
        ):
            # Rebuilding a decided batch's compensations runs nothing: it stops where the
            # branch has no settled record (a callback it created may still be pending).
            raise BranchStopped()
        if self.dry_run and (
            rec is None or not rec.status.final or rec.status == StepStatus.TERMINAL_FAILED
        ):
            if rec is not None and (rec.name != name or rec.kind != kind):
                self.nondeterminism = NonDeterminismError(
                    position, f"{rec.kind} {rec.name!r}", f"{kind} {name!r}"
                )
                raise self.nondeterminism
            if rec is None or not self._goes_on_past(rec):
                raise DryRunComplete()
        if rec is None:
            self.check_cancel()
            return None
        if rec.name != name or rec.kind != kind:
            self.nondeterminism = NonDeterminismError(
                position, f"{rec.kind} {rec.name!r}", f"{kind} {name!r}"
            )
            raise self.nondeterminism
        if not rec.status.final:
            self.check_cancel()
        return rec

    def _goes_on_past(self, rec: StepRecord) -> bool:
        """Whether the code that recorded ``rec`` went on past it (a dry replay must too,
        to check what follows): a callback created without waiting on it yet, or a step
        failure the workflow caught; either way later positions hold records."""
        if rec.kind != StepKind.CALLBACK and rec.status != StepStatus.TERMINAL_FAILED:
            return False  # a step still running or retrying: nothing can follow it yet
        cursor = self.cursor
        mine = cursor.own_index(rec.position) or 0
        return cursor.last_index(self.steps) > mine

    def now_text(self) -> str:
        return format_time(self.clock.now())

    # --- running the workflow --------------------------------------------------------

    @property
    def root(self) -> Cursor:
        """The top-level cursor every branch's and task's cursor descends from."""
        return self._root

    def new_context(self) -> Context:
        """A workflow ``Context`` over this execution (fan-out's branches take one too)."""
        return Context(self)

    def run_workflow(self) -> Any:
        self._inherit_signals()
        ctx = Context(self)
        args: list[Any] = [ctx]
        if self.workflow.takes_input:
            args.append(self.decode(self.run.input, self.workflow.input_annotation))
        token = bind_context(ctx)
        try:
            with self.engine.guard.workflow_code(self.workflow.fn):
                if inspect.iscoroutinefunction(self.workflow.fn):
                    from durable.engine.async_workflow import AsyncRun

                    return AsyncRun(self).run(self.workflow.fn, args)
                return self.workflow.fn(*args)
        finally:
            reset_context(token)

    def _inherit_signals(self) -> None:
        """A continue-as-new successor's first replay: the signals its predecessor left
        unconsumed must be here before its code runs (the predecessor's worker hands them
        over after its final write, and may have died first). Copied now if not, then
        replayed again with them (``InboxChanged``). Once the run has recorded anything,
        it had them: this replay began after they were in place."""
        if self.run.continued_from is None or self.steps or self.dry_run:
            return
        if not ensure_inherited(self.engine, self.run, self.signals):
            return
        current = self.ledger.get_run(self.run.run_id)
        if current is None or (current.fence, current.lease_owner) != (self.run.fence, self.owner):
            raise LeaseLost()
        raise InboxChanged(current.inbox)

    # --- recorded values (now, uuid, random) -----------------------------------------

    def record_value(self, name: str, producer: str) -> Any:
        position = self.next_position()
        make, annotation = RECORDED_VALUES[producer]
        rec = self.recorded(position, name, StepKind.VALUE)
        if rec is not None and rec.status == StepStatus.DONE:
            return self.decode(rec.output, annotation)
        self.ensure_lease(timedelta(0))
        value = make(self.clock)
        encoded = self.encode(value, annotation)
        stored = self.write_fenced(
            self.new_record(position, name, StepKind.VALUE, StepStatus.DONE, output=encoded)
        )
        return self.decode(stored.output, annotation)

    # --- patches (ctx.changed) -----------------------------------------------------

    def changed(self, patch_id: str) -> bool:
        """Whether this run takes the code after the change ``patch_id`` at this point.

        A run that already recorded something else here ran the old code past this point:
        False, and no position is used (its later records keep their positions). Any
        other run records a marker here (or finds the one it recorded) and gets True, then
        and on every replay: the new code is taken once and for good.
        """
        name = f"changed:{check_patch_id(patch_id)}"
        cursor = self.cursor
        upcoming = self.steps.get(cursor.path(cursor.counter + 1))
        if upcoming is not None and (upcoming.kind, upcoming.name) != (StepKind.VALUE, name):
            return False
        position = self.next_position()
        rec = self.recorded(position, name, StepKind.VALUE)
        if rec is None:
            self.ensure_lease(timedelta(0))
            self.write_fenced(
                self.new_record(position, name, StepKind.VALUE, StepStatus.DONE, output="true")
            )
        return True

    # --- steps ---------------------------------------------------------------------

    def call_step(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str | None,
        retry: RetryPolicy | None,
        timeout: timedelta | None,
        semantics: Semantics | None,
        compensate: Callable[..., Any] | None,
        kind: StepKind = StepKind.STEP,
        serdes: Serdes[Any] | None = None,
    ) -> Any:
        step_name = callable_name(fn, name)
        refuse_token(step_name, "name", "step name", "the step's input")
        if compensate is not None:
            # An undo must be named too, by a name that can be stored: fail before the step.
            refuse_token(
                callable_name(compensate, None), "compensate", "compensation's name", "its input"
            )
        clash = RESERVED_STEP_OPTIONS.intersection(kwargs)
        if clash:  # only reachable through **kwargs dicts, which bypass the signature
            raise TypeError(f"reserved option(s) {sorted(clash)}: use functools.partial")
        check_step_options(retry, timeout, semantics or "at_least_once")
        position = self.next_position()
        codec = coded(serdes, f"step {step_name!r} at position {position}")
        annotation = return_annotation(fn) if codec is None else codec
        rec = self.recorded(position, step_name, kind)
        if rec is not None and rec.status.final:
            result = self.replay_result(rec, annotation)  # the hot path: no options needed
        else:
            body = fn.fn if isinstance(fn, StepFunction) else fn
            if inspect.isasyncgenfunction(body):
                reject_async_generator(body, "step")
            opts = self.resolve_options(fn, retry, timeout, semantics)
            result = StepRun(self, position, step_name, rec, opts, kind).execute(
                lambda: body(*args, **kwargs), annotation
            )
        if compensate is not None:
            self.compensations.append((position, compensate, result, args, kwargs))
        return result

    def resolve_options(
        self,
        fn: Callable[..., Any],
        retry: RetryPolicy | None,
        timeout: timedelta | None,
        semantics: Semantics | None,
    ) -> StepOptionsResolved:
        defaults = fn.options if isinstance(fn, StepFunction) else None
        policy = (
            retry
            or (defaults.retry if defaults else None)
            or self.engine.app.default_retry
            or self.config.default_retry
        )
        budget = timeout or (defaults.timeout if defaults else None)
        return StepOptionsResolved(
            retry=policy,
            budget=budget or self.config.default_step_budget,
            semantics=semantics or (defaults.semantics if defaults else "at_least_once"),
            explicit_budget=budget is not None,
            version=defaults.version if defaults else 1,
        )

    def replay_result(self, rec: StepRecord, annotation: Any) -> Any:
        if rec.status == StepStatus.DONE:
            return self.decode(rec.output, annotation)
        raise StepFailed(
            rec.name,
            rec.position,
            rec.error_type or "Error",
            rec.error_summary or "",
            rec.attempt,
        )

    def new_record(
        self,
        position: str,
        name: str,
        kind: StepKind,
        status: StepStatus,
        updated_at: str | None = None,
        **fields: Any,
    ) -> StepRecord:
        # Every record the engine writes is built here: a name holding a token is refused
        # even where a call's own check (naming its field) missed it.
        refuse_token(name, "name")
        return StepRecord(
            run_id=self.run.run_id,
            position=position,
            name=name,
            kind=kind,
            status=status,
            updated_at=updated_at or self.now_text(),
            fence=self.run.fence,
            # Written with its TTL, when its run's lifetime is declared (``durable.core.lifetime``).
            purge_at=self.run.items_purge_at,
            **fields,
        )

    # --- values, and the secrets in them ----------------------------------------------

    def sealer(self, *, create: bool = False) -> Sealer | None:
        """The run's sealer: its data key opened once per invocation (``durable.core.secrets``).
        With ``create``, a run without a data key gets one first (a fenced write)."""
        keys = self.engine.keys
        if self._sealer is not None or keys is None:
            return self._sealer
        run_id = self.run.run_id
        if self.run.data_key:
            self._sealer = open_sealer(keys, self.run.data_key)
        elif create:
            key, wrapped = keys.new_data_key(run_id)
            record = key_record(run_id, wrapped)
            try:
                self.run = self.ledger.update_run(
                    run_id, self.guard(), {"data_key": record, **self.progress_changes()}
                )
            except ConditionFailed as e:
                raise LeaseLost() from e
            self._sealer = Sealer(key, run_id)
        return self._sealer

    def encode(self, value: Any, annotation: Any) -> str:
        """``value`` as stored JSON text, its secret-typed fields sealed, every callback
        token in it redacted (``redact``). A codec's value is scrubbed before the codec
        encodes it (``durable.core.codecs.Coded.encode``): a codec may write the value in
        a form no scan of its text can read (compressed, encoded), where a token would
        pass unseen."""
        sealer = self.sealer(create=True) if serde.has_secrets(annotation) else None
        return self.redact(serde.encode(value, annotation, sealer))

    def decode(self, text: str | None, annotation: Any) -> Any:
        """A stored value, its sealed secrets opened: by the run's key, or, for a
        callback's answer the API sealed, by the key its nodes carry."""
        if text is None or SEALED not in text or isinstance(annotation, Coded):
            return serde.decode(text, annotation)  # (a codec's text is never sealed)
        sealer = self.sealer() if self.run.data_key else None
        return serde.decode(text, annotation, sealer, self._answer_sealer)

    def _answer_sealer(self, record: str) -> Sealer:
        """The sealer of a key a node carries (``durable.core.secrets``), opened once per
        invocation. Only a key made for this run, or for the run it was forked from (whose
        sealed values a fork copies), opens here: the run id is the key's associated data
        and KMS's encryption context."""
        sealer = self._answer_sealers.get(record)
        if sealer is None:
            owner = record.partition(":")[0]
            run = self.run
            lineage = {run.run_id, (run.data_key or "").partition(":")[0]}
            lineage.add((run.forked_from or "").partition("@")[0])
            if owner not in lineage:
                raise TerminalError(
                    f"a sealed value in run {run.run_id} names a key of run {owner}: sealed "
                    "values do not move between runs"
                )
            keys = self.engine.keys
            if keys is None:
                raise SecretsNeedKeys(
                    "a callback's answer is sealed but no key service is configured to open "
                    "it: set DURABLE_KMS_KEY_ID"
                )
            sealer = self._answer_sealers[record] = open_sealer(keys, record)
        return sealer

    def redact(self, text: str) -> str:
        """``text`` with every callback token replaced (and so every callback URL): what a
        step returned, an error it raised, an effect's reference. Every text with a token's
        shape, this run's or another's (``durable.core.write_boundary.scrub_text``, the
        rule the write boundary applies), then this run's own tokens by their text: a
        value is redacted before it is stored, so what this invocation hands on is what a
        replay reads."""
        text = scrub_text(text)
        for token in tuple(self.tokens):  # a copy: a batch's branch may add one meanwhile
            if token in text:
                text = text.replace(token, REDACTED_TOKEN)
        return text

    def write_result(self, rec: StepRecord) -> StepRecord:
        """Record what a step body returned: one conditional put, no run guard.

        The body ran on a lease this worker vouched for, so its result is a fact whoever
        records it: first writer wins and a loser adopts the winner's record. Only a
        newer owner's pending record stops it (``durable.core.leases.step_replaceable``).

        But a write that comes back accepted after the lease ended by this worker's clock
        proves nothing about the run: it may have ended and expired meanwhile, its records
        purged, so the put landed in an empty partition and the value the run kept was
        another worker's. The record stays (a next owner adopts it if the run lives);
        this worker stops without handing its value to the workflow code.
        """
        self._new_work()
        rec.fence = self.run.fence
        stored = self.ledger.write_step(rec)
        if stored is rec:
            self.check_lease_alive()
        return self.kept(rec, stored)

    def write_fenced(
        self, rec: StepRecord, *, starts_body: bool = False, adopt_pending: bool = False
    ) -> StepRecord:
        """Record a decision about the run's future (a wait, a value, a failure for good,
        a RUNNING mark), fenced by the lease in the same atomic write: a worker whose
        lease is gone writes nothing (``LeaseLost``).

        With ``starts_body`` (the mark an at-most-once body runs after) the write also
        requires no cancel request and a lease that has not ended by this worker's clock:
        a worker that stalled after its lease check must not start the body a day later,
        or after a cancel was acknowledged."""
        self._new_work()
        rec.fence = self.run.fence
        guard = self.guard()
        if starts_body:
            guard = replace(guard, no_cancel=not self.compensating, alive_at=self.now_text())
        try:
            stored = self.ledger.write_step(rec, guard)
        except ConditionFailed as e:
            current = e.current
            if (
                starts_body
                and current is not None
                and (current.fence, current.lease_owner) == (guard.fence, guard.owner)
                and current.cancel_requested
            ):
                self.run = current
                raise RunCanceled(current.cancel_reason or "canceled") from e
            raise LeaseLost() from e
        if adopt_pending and stored is not rec and not stored.status.final:
            # adopt_pending: a pending record that the write may not replace is news to
            # take (a wait a heartbeat moved on), not a newer owner's: this lease holds.
            self.steps[rec.position] = stored
            return stored
        return self.kept(rec, stored)

    def _new_work(self) -> None:
        """A dry replay (a deploy check) stops where the run would write: everything
        before was replayed from records, what comes next is the new code's to do."""
        if self.dry_run:
            raise DryRunComplete()

    def kept(self, rec: StepRecord, stored: StepRecord) -> StepRecord:
        """What the ledger holds at ``rec``'s position after writing it: ``rec``, or a
        final record to adopt. A newer owner's pending record means this lease is gone."""
        if stored is not rec and not stored.status.final:
            raise LeaseLost()  # a newer owner's pending record: this lease is gone
        self.steps[rec.position] = stored
        return stored

    # --- waiting ---------------------------------------------------------------------

    def suspend(
        self, due_at: str | None, position: str | None = None, *, replayed: bool = False
    ) -> Suspend:
        """Park the run WAITING unless an event arrived since the claim (then reload).

        The timer is armed first: a crash between the two writes leaves an extra wake-up
        (harmless), never a lost one. A timer wake-up that finds its wait not yet due was
        early, so the wait is re-armed under a fresh schedule name.
        """
        cursor = self.cursor
        if cursor.replay_only:
            raise BranchStopped()  # a decided branch's pending wait: nothing to arm
        self._new_work()
        if due_at is not None and position is not None:
            self.armed = True
            early = replayed and self.reason == "timer"
            self.engine.arm_timer(
                self.run.run_id,
                position,
                parse_time(due_at),
                rearm_at=self.clock.now() if early else None,
            )
        if cursor.parks:  # a branch: its batch decides whether the run suspends
            raise BranchParked(due_at)
        # An undo waiting (a retry's backoff) keeps the run COMPENSATING: the run item says
        # it is undoing, and a cancel cannot take it for a run merely waiting.
        status = RunStatus.COMPENSATING if self.run.status == RunStatus.COMPENSATING else None
        # A run whose items expire is woken by its lifetime's end whatever it waits for
        # (a wait without a timeout included): the claim then fails it before they go.
        if self.run.items_purge_at is not None:
            bound = wake_by_lifetime(
                parse_time(due_at) if due_at is not None else None,
                self.run,
                self.config.max_run_lifetime,
                self.config.retention,
            )
            due_at = format_time(bound) if bound is not None else None
        changes: dict[str, Any] = {
            "status": (status or RunStatus.WAITING).value,
            "lease_owner": None,
            "lease_until": None,
            "due_at": due_at,
            "updated_at": self.now_text(),
            "waiting_for": self.waiting_for(),
        }
        if self.sleeps_on_run:
            changes["sleeps"] = self.kept_sleeps()
        changes.update(self.progress_changes())
        try:
            self.run = self.ledger.update_run(
                self.run.run_id, self.guard(inbox=self.events_inbox), changes
            )
        except ConditionFailed as e:
            current = e.current
            if (
                current is not None
                and current.fence == self.run.fence
                and current.lease_owner == self.owner
            ):
                raise InboxChanged(current.inbox) from e
            raise LeaseLost() from e
        return Suspend()

    def kept_sleeps(self) -> dict[str, Any]:
        """The sleeps the run item keeps (``durable.core.sleeps``), for a suspension:
        beyond ``MAX_ENTRIES``, the oldest that are over are first written as step items
        (fenced: this worker still holds the lease) and leave the map."""
        entries = kept_sleeps(self.run, self.steps, self.sleeps_on_run)
        for position in overflow(entries, self.steps):
            self.write_fenced(replace(self.steps[position]))
            self.sleeps_on_run.discard(position)
            del entries[position]
        return entries

    def waiting_for(self) -> str | None:
        """What the run waits for as it parks (its open waits, a person's first), for the
        run item: the listing says it, and a callback puts the run in "Needs attention"."""
        waits = [
            (_WAIT_KIND.get(r.kind, r.kind.value), r.name, r.wake_at or r.expires_at)
            for r in self.steps.values()
            if r.status == StepStatus.WAITING and not decided_batch_above(r.position, self.steps)
        ]
        return waiting_for(waits)

    # --- durable sleep ---------------------------------------------------------------

    def wake_time(self, duration: timedelta) -> datetime:
        """Used only on first execution; a replay reads the recorded ``wake_at``."""
        return self.clock.now() + duration

    def sleep_until(self, when: datetime, name: str) -> None:
        """Record the wake time once (replay never recomputes it), then wait for it."""
        refuse_token(name, "name", "sleep name")
        position = self.next_position()
        rec = self.recorded(position, name, StepKind.SLEEP)
        if rec is not None and rec.status.final:
            return
        replayed = rec is not None
        if rec is None:
            self.check_lifetime(when, "sleep")
            wake_at = format_time(when)
            waiting = self.new_record(
                position, name, StepKind.SLEEP, StepStatus.WAITING, wake_at=wake_at
            )
            wait = when - self.clock.now()
            if (
                self.config.sleeps_on_run
                and keepable(name)
                and not self.cursor.parks
                and wait > timedelta(0)
                and not self.can_wait_in_process(wait, timedelta(0))
            ):
                # Only at the top level, where the suspension follows at once: a branch's
                # (or an async task's) sleep parks while the rest of the run goes on, and
                # must be recorded before a hand-off or a crash could lose it.
                # Recorded in the suspension's own fenced write (``durable.core.sleeps``).
                self._new_work()
                waiting.fence = self.run.fence
                self.steps[position] = waiting
                self.sleeps_on_run.add(position)
                raise self.suspend(wake_at, position)
            rec = self.write_fenced(waiting)
            if rec.status.final:
                return
        wake_at = rec.wake_at or format_time(when)
        wait = parse_time(wake_at) - self.clock.now()
        if wait > timedelta(0):
            if not self.can_wait_in_process(wait, timedelta(0)):
                raise self.suspend(wake_at, position, replayed=replayed)
            self.idle(wait.total_seconds())
        # Reached only when the wake time passed inside this invocation (an in-process
        # wait, or a claim that came just before it): a sleep whose claim came after its
        # wake time is over in the history already (``durable.core.sleeps``).
        done = self.new_record(position, name, StepKind.SLEEP, StepStatus.DONE, wake_at=wake_at)
        self.write_fenced(done)

    def check_lifetime(self, until: datetime, what: str) -> None:
        """A wait may not end after the run's lifetime: the records that keep its side
        effects from repeating (``durable.engine.effects``) are kept for that long and no longer."""
        if until > self.lifetime_end:
            raise ValueError(
                f"this {what} would end at {format_time(until)}, after the run's "
                f"max_run_lifetime ({self.config.max_run_lifetime.days} days from "
                f"{self.run.created_at}, so by {format_time(self.lifetime_end)}): wait less, "
                "continue long-lived work as a new run (ctx.continue_as_new), or raise "
                "max_run_lifetime in the settings"
            )

    def skip_recorded_positions(self) -> None:
        """Move the position counter past every recorded position of the workflow's own
        calls, so what runs next (compensations after a failure or a cancel) never meets
        a record the interrupted code path left further on (a ``submit`` step after the
        callback a cancel stopped at). Compensation records are not counted: a replay of
        the same ending reaches the same positions."""
        cursor = self.cursor
        last = cursor.last_index(
            position for position, rec in self.steps.items() if rec.kind != StepKind.COMPENSATION
        )
        cursor.counter = max(cursor.counter, last)

    def off_turn(self) -> AbstractContextManager[None]:
        """Around slow work that touches no engine state (a step body, a poll, a sleep):
        the other branches of a running batch take their turns meanwhile."""
        return nullcontext() if self.turn is None else self.turn.released()

    def idle(self, seconds: float) -> None:
        """An in-process wait (a short sleep, a retry's backoff, a poll's interval); a
        branch whose batch was decided meanwhile stops after it."""
        with self.off_turn():
            self.clock.sleep(seconds)
        cursor = self.cursor
        if not cursor.compensating and cursor.halted():
            raise BranchStopped()

    def can_wait_in_process(self, wait: timedelta, then_needed: timedelta) -> bool:
        """Short waits are served here when the invocation has time for them and after."""
        if wait > self.config.inprocess_wait_threshold:
            return False
        remaining = self.remaining()
        if remaining is None:
            return True
        needed = wait + then_needed + self.config.safety_margin
        return remaining >= needed.total_seconds()

    # --- progress (``durable.core.progress``) ------------------------------------------

    def set_progress(self, done: object, total: object, note: object) -> None:
        """Keep the value for the run item's next write; checked on replay as on the first
        run (a bad value fails the same way), taken only past what is replayed."""
        value = progress_value(done, total, note, self.now_text())
        if self.replaying():
            # An earlier invocation ran this code and stored this value or a newer one:
            # taking it again could move the shown progress back.
            return
        if "note" in value:
            # Stored as the write boundary would store it, so the kept value equals the
            # stored one and does not ride again in every later write.
            value["note"] = scrub_text(self.redact(value["note"]))
        self.progress = value

    def progress_changes(self) -> dict[str, Any]:
        """``{"progress": value}`` for a run-item write while the value set last is not
        the stored one, else nothing."""
        value = self.progress
        if value is None or value == self.run.progress:
            return {}
        return {"progress": value}

    def continue_as_new(self, input_value: Any) -> None:
        self.check_cancel()  # honours cancel and non-determinism like any durable call
        if self.run.parent is not None:
            # Its parent waits for this run's own end (``durable.engine.children``): a successor
            # would end under another id the parent's record does not name.
            raise InvalidInput(
                "ctx.continue_as_new is not available in a child run (its parent waits "
                "for this run's end): loop inside the child, or let the parent start a "
                "new child for the next part",
                field="continue_as_new",
            )
        raise ContinueAsNew(input_value)
