"""Engine operations: start runs, drive invocations, read the ledger.

``resume`` is one worker invocation (DESIGN section 3): claim first, then load, replay
the workflow, and turn the way it stopped (suspend, hand-off, result, failure, lost
lease) into exactly one conditional write on the run item.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any, cast

from durable.core import serde
from durable.core.callables import WorkflowDef
from durable.core.claim_check import ClaimCheck
from durable.core.clock import Clock, SystemClock
from durable.core.config import EngineConfig
from durable.core.ids import (
    check_idempotency_key,
    check_key_scope,
    check_user_key,
    keyed_run,
    new_ulid,
    next_keyed_run_id,
    reserved_prefix,
    run_id_for_key,
)
from durable.core.lifetime import items_purge_at, lifetime_end
from durable.core.model import (
    RunHistory,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepRecord,
    format_time,
    position_key,
)
from durable.core.ports import (
    Claim,
    ConditionFailed,
    EffectStore,
    Invocation,
    Invoker,
    Ledger,
    NoTimers,
    Page,
    PayloadStore,
    RunExists,
    RunGuard,
    Timers,
)
from durable.core.retention import (
    nothing_recorded_yet,
    purge_expired,
    visible_history,
    without_leftovers,
)
from durable.core.secrets import KeyService, Sealer, key_record
from durable.core.tokens import refuse_token
from durable.core.write_boundary import WriteBoundary
from durable.engine import events, keys, lineage, operations
from durable.engine.admission import Admission
from durable.engine.children import LOOK_REASON, check_if_running, parent_to_wake
from durable.engine.determinism import Guard, NoGuard
from durable.engine.effects import Effects
from durable.engine.endings import FINISHED, Endings, LifetimeExceeded, Outcome
from durable.engine.engine_parts import IfRunning, Reuse
from durable.engine.execution import Execution
from durable.engine.interrupts import InboxChanged
from durable.engine.keys import check_reuse
from durable.engine.registry import App
from durable.engine.sweeper import SweepReport, sweep
from durable.errors import (
    DurableError,
    IdempotencyConflict,
    InvalidInput,
    InvalidState,
    LeaseLost,
    PayloadMissing,
    RunNotFound,
    StorageError,
    WorkflowNotFound,
)

log = logging.getLogger("durable.engine")
# Later than any time a ledger holds: an erasure deletes whatever was written under an id.
_EVER = "9999-12-31T23:59:59.999Z"


class Engine:
    def __init__(
        self,
        app: App,
        ledger: Ledger,
        invoker: Invoker,
        effects: EffectStore,
        *,
        clock: Clock | None = None,
        config: EngineConfig | None = None,
        guard: Guard | None = None,
        timers: Timers | None = None,
        keys: KeyService | None = None,
        payloads: PayloadStore | None = None,
    ) -> None:
        self.app = app
        self.invoker = invoker
        self.clock = clock or SystemClock()
        self.config = config or EngineConfig()
        # Values too large for an item go to the payload store, and reads resolve them
        # (``durable.core.claim_check``); without a store, a reference read fails clearly.
        self.claims = ClaimCheck(
            ledger,
            payloads,
            offload_bytes=self.config.payload_offload_bytes,
            max_bytes=self.config.payload_max_bytes,
            clock=self.clock,
        )
        ledger = cast(Ledger, self.claims)
        # Every write passes the boundary that keeps live callback tokens out of storage
        # (``durable.core.write_boundary``): whatever workflow code puts them in. It is the
        # outer wrapper, so a token is redacted before a value is stored anywhere.
        self.ledger: Ledger = WriteBoundary(ledger)
        self.effects = Effects(effects, self.config)
        self.guard: Guard = guard or NoGuard()
        self.timers: Timers = timers or NoTimers()
        # Seals secret-typed values with a data key per run (KMS on AWS); None refuses them.
        self.keys = keys
        self.endings = Endings(self)
        self.admission = Admission(self)

    # --- timers ------------------------------------------------------------------------

    def arm_timer(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None:
        """Arm a wake-up; a failure is logged, not raised: the due index is the backstop."""
        try:
            self.timers.arm(run_id, position, wake_at, rearm_at=rearm_at)
        except Exception:
            log.warning(
                "arming a timer for run %s failed; the sweeper will wake it", run_id, exc_info=True
            )

    def cancel_timers(self, run_id: str) -> None:
        try:
            self.timers.cancel_run(run_id)
        except Exception:  # a leftover schedule only causes a harmless extra invocation
            log.warning("deleting the timers of run %s failed", run_id, exc_info=True)

    # --- starting ------------------------------------------------------------------

    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        requested_by: str | None = None,
        version: int | None = None,
        key_scope: str | None = None,
        gate: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> RunRecord:
        """Create a run and invoke a worker for it (``start_or_get``, without saying
        whether this call created it)."""
        return self.start_or_get(
            workflow,
            input,
            idempotency_key=idempotency_key,
            requested_by=requested_by,
            version=version,
            key_scope=key_scope,
            gate=gate,
            if_running=if_running,
            reuse=reuse,
        )[0]

    def start_or_get(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        requested_by: str | None = None,
        version: int | None = None,
        key_scope: str | None = None,
        gate: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> tuple[RunRecord, bool]:
        """Create a run and invoke a worker for it; the run, and True when this call
        created it (False: a repeated key's run, or the run attached to).

        Invalid input raises ``InvalidInput`` and writes nothing. With an idempotency key
        (scoped to the workflow, and to ``key_scope`` when given: a sender's namespace,
        ``durable.core.ids.SENDER_SCOPES`` or the workflow's webhook's, so a hook's keys
        never meet an operator's) the same key and input return the same run; the same
        key with another input raises ``IdempotencyConflict``, unless the run is still
        going and ``if_running="attach"``: then that run is returned ("start it unless it
        is running"). A key of one's own (no ``key_scope``) in one of those namespaces
        (``sqs/...``, ``schedule/...``) is refused: its run would show a sender's key.

        ``reuse`` says what a key whose run has ended means: ``"never"`` (the default: a
        key names one run for its retention, so the same input gets that run back and
        another is refused) or ``"after_end"``: a new run of the key, the ended one
        staying readable by its id (``durable.engine.keys``). While the key's run is
        going, ``if_running`` decides as above whatever ``reuse`` says. Only a key of
        one's own can be reused: a sender's keys name one delivery each.
        """
        check_if_running(if_running)
        check_reuse(reuse)
        if gate is not None:  # a gate's name is stored in clear: it names the gate
            refuse_token(gate, "gate", "gate name")
        wf = self.app.get_workflow(workflow, version)
        if idempotency_key is None:
            run = self.new_run(
                wf, input, new_ulid(self.clock.now()), requested_by=requested_by, gate=gate
            )
            created = self.ledger.create_run(run)
            self.invoke_worker(run.run_id, "start")
            return created, True
        if key_scope is None:
            check_user_key(idempotency_key, "idempotency_key")
        else:
            check_idempotency_key(idempotency_key, "idempotency_key")
            check_key_scope(wf.name, key_scope)
            if reuse != "never":
                raise InvalidInput(
                    f'reuse="{reuse}" is for a key of one\'s own: a key in {key_scope!r} '
                    "names one delivery",
                    field="reuse",
                )
        # What the run shows: a sender's key with its scope, so nobody mistakes it for an
        # operator's.
        run_id, stored_key = keyed_run(wf.name, idempotency_key, key_scope)
        after: str | None = None
        for _ in range(keys.MAX_MOVES):
            slot = keys.read_slot(self.ledger, wf.name, stored_key) if key_scope is None else None
            if slot is not None:
                run_id, after = slot.run_id, slot.after
            run = self.new_run(
                wf,
                input,
                run_id,
                idempotency_key=stored_key,
                requested_by=requested_by,
                gate=gate,
                after=after,
            )
            try:
                created = self.ledger.create_run(run)
            except RunExists as e:
                answer = self._keyed_answer(
                    e, wf.name, run.input_hash, idempotency_key, if_running, reuse
                )
                if answer is not None:
                    return answer, False
                assert slot is not None  # reuse is refused in a sender's scope
                keys.move_on(self.ledger, slot)  # lost: another start moved it; read again
                continue
            self.invoke_worker(run_id, "start")
            return created, True
        raise IdempotencyConflict(
            f"idempotency key {idempotency_key!r}: other starts of it keep starting new "
            "runs; try again"
        )

    def _keyed_answer(
        self,
        e: RunExists,
        workflow: str,
        input_hash: str | None,
        idempotency_key: str,
        if_running: IfRunning,
        reuse: Reuse,
    ) -> RunRecord | None:
        """What a keyed start whose run exists gets: that run (or the run carrying its
        chain now), ``IdempotencyConflict``, or None: it ended and the key is to be
        reused (move its slot on and start there)."""
        existing = e.existing
        # The key names the chain's first run; a start repeating it means the work, so it
        # gets the run that carries the chain now (``durable.engine.lineage``).
        reached = lineage.follow(self.ledger.get_run, existing)
        current = reached.run
        going = not reached.whole or not current.terminal
        if if_running == "attach" and going and existing.workflow == workflow:
            return current
        if not going and reuse == "after_end" and existing.workflow == workflow:
            return None
        if existing.input_hash != input_hash or existing.workflow != workflow:
            continued = (
                f", continued as new up to {current.run_id}, {current.status.value}"
                if current is not existing
                else ""
            )
            hint = (
                'use a new key, or if_running="attach" to take that run'
                if going
                else 'use a new key, or reuse="after_end" to start a new run under it'
            )
            raise IdempotencyConflict(
                f"idempotency key {idempotency_key!r} was already used for run "
                f"{existing.run_id} ({existing.status.value}{continued}) with a different "
                "input; "
                f"{hint}"
            ) from e
        return current

    def new_run(
        self,
        wf: WorkflowDef,
        input: Any,
        run_id: str,
        *,
        idempotency_key: str | None = None,
        requested_by: str | None = None,
        gate: str | None = None,
        parent: str | None = None,
        after: str | None = None,
    ) -> RunRecord:
        """The PENDING run item of a new run of ``wf`` (nothing written): its input
        validated (``InvalidInput`` names the field) and sealed, due at once so the
        sweeper starts it if the invocation that should is lost. The key it shows must
        name it (``run_by_key``): the id derived from the key, or with ``after`` (a key
        reused, ``durable.engine.keys``) the one derived from the key and that run."""
        if idempotency_key is not None:
            if parent is not None:  # a keyed child's ``id=``: never a sender's key
                check_user_key(idempotency_key, "id")
            named = (
                run_id_for_key(wf.name, idempotency_key)
                if after is None
                else next_keyed_run_id(wf.name, idempotency_key, after)
            )
            if named != run_id:
                raise InvalidInput(
                    f"idempotency key {idempotency_key!r} names another run than {run_id}",
                    field="idempotency_key",
                )
        if not wf.takes_input and input is not None:
            raise InvalidInput(
                f"workflow {wf.name!r} takes no input; start it without one", field="input"
            )
        stamp = format_time(self.clock.now())
        sealer, data_key = self.new_sealer(run_id, wf.input_annotation)
        input_text = serde.validate_input(input, wf.input_annotation, wf.name, sealer)
        return RunRecord(
            run_id=run_id,
            workflow=wf.name,
            version=wf.version,
            status=RunStatus.PENDING,
            input=input_text,
            input_hash=serde.identity_hash(input_text),
            created_at=stamp,
            updated_at=stamp,
            requested_by=requested_by,
            idempotency_key=idempotency_key,
            data_key=data_key,
            due_at=stamp,
            # ``gate``: a one-slot gate of the caller's (a buffer_one schedule's).
            gate=gate or self.admission.gate_for(wf, input_text),
            parent=parent,
            items_purge_at=items_purge_at(stamp, wf.max_lifetime, self.config.retention),
        )

    def new_sealer(self, run_id: str, annotation: Any) -> tuple[Sealer | None, str | None]:
        """A data key for a new run whose input may hold secrets: (its sealer, its wrapped
        form for the run item); (None, None) when the input cannot hold any, or when no key
        service is configured (a secret then fails validation, naming the setting)."""
        if self.keys is None or not serde.has_secrets(annotation):
            return None, None
        key, wrapped = self.keys.new_data_key(run_id)
        return Sealer(key, run_id), key_record(run_id, wrapped)

    def answer_sealer(self, run_id: str) -> Sealer:
        """A sealer for a callback's answer to ``run_id``: a fresh data key whose record
        its nodes carry (``durable.core.secrets``), as the API cannot open the run's key."""
        if self.keys is None:
            raise InvalidInput(
                "this answer has secret-typed fields but no key service is configured to "
                "seal them: set DURABLE_KMS_KEY_ID",
                field="result",
            )
        key, wrapped = self.keys.new_data_key(run_id)
        record = key_record(run_id, wrapped)
        return Sealer(key, run_id, record)

    def invoke_worker(self, run_id: str, reason: str, hop: int = 0) -> None:
        try:
            self.invoker.invoke(run_id, reason, hop)
        except Exception:  # the due time is already set: the sweeper will pick it up
            log.warning(
                "invoking a worker for run %s failed; the sweeper will retry", run_id, exc_info=True
            )

    # --- driving -------------------------------------------------------------------

    def resume(
        self,
        run_id: str,
        invocation: Invocation | None = None,
        hop: int = 0,
        reason: str = "",
    ) -> Outcome:
        """One worker invocation for ``run_id`` (``reason``: start, continue, timer, ...)."""
        claimed: list[RunRecord] = []
        owner = uuid.uuid4().hex  # fresh per execution: Lambda retries reuse request ids
        try:
            outcome = self._resume(run_id, invocation, hop, reason, owner, claimed)
        except PayloadMissing as error:
            return self._lost_while_reading(run_id, owner, error)
        if outcome.result in FINISHED and claimed:
            self.leave_gate(claimed[0])
        return outcome

    def leave_gate(self, run: RunRecord) -> None:
        """A run that ended frees its concurrency slot (``durable.engine.admission``)."""
        if run.gate is None:
            return
        try:
            wf = self.app.get_workflow(run.workflow, run.version)
        except WorkflowNotFound:
            wf = None
        self.admission.leave(run, self.admission.limit_of(wf, run))

    def _busy(self, run_id: str) -> Outcome:
        """A run this worker could not claim (running elsewhere, ended or missing). An
        ended child whose parent still waits for it had its report lost: this is the
        invocation Lambda retries after such a loss, so the parent is woken to look now
        (``durable.engine.children.parent_to_wake``)."""
        try:
            # States only, never values: a busy claim fetches no object (and an erasure
            # may have deleted them). Best effort: a failed read leaves the parent's own
            # look to find the end.
            parent_id = parent_to_wake(self.claims.unresolved(), run_id)
        except StorageError:
            log.warning("could not read run %s after a refused claim", run_id, exc_info=True)
            parent_id = None
        if parent_id is not None:
            log.info("child run %s ended without its report; waking %s", run_id, parent_id)
            self.invoke_worker(parent_id, LOOK_REASON)
        return Outcome(run_id, "busy")

    def _resume(
        self,
        run_id: str,
        invocation: Invocation | None,
        hop: int,
        reason: str,
        owner: str,
        claimed: list[RunRecord],
    ) -> Outcome:
        invocation = invocation or Invocation()
        now = self.clock.now()
        lease = self.config.lease
        if invocation.remaining_seconds is not None:
            # The lease covers the whole invocation and the overrun renewals allow too:
            # nobody takes over a worker that may still be running.
            remaining = timedelta(seconds=max(invocation.remaining_seconds(), 1.0))
            lease = remaining + self.config.deadline_overrun
        claim = self.ledger.claim(
            run_id,
            owner,
            now=format_time(now),
            lease_until=format_time(now + lease),
            stale_before=format_time(now - self.config.clock_skew),
            # Due when a takeover could succeed: the sweeper then finds a dead owner
            # exactly when a new worker can claim the run, not a skew margin too early.
            due_at=format_time(now + lease + self.config.clock_skew),
        )
        if claim is None:
            return self._busy(run_id)
        claimed.append(claim.run)
        if nothing_recorded_yet(claim.run):
            history: RunHistory | None = RunHistory(claim.run, {}, [])
        else:
            loaded = self.ledger.load(run_id)
            if loaded is None or loaded.run.created_at != claim.run.created_at:
                # The run claimed expired and a new run took its id meanwhile (a keyed
                # start): this claim is of nothing that exists now; touch nothing of it.
                return Outcome(run_id, "lease_lost")
            history = without_leftovers(self.ledger, loaded)
        if history is None:
            return Outcome(run_id, "busy")
        history.run = claim.run
        # Every event the claimed item counts was committed before the load began: that
        # count, not one a later write returns, guards the suspension (DESIGN section 9).
        events_inbox, read_at = claim.run.inbox, now
        try:
            wf = self.app.get_workflow(claim.run.workflow, claim.run.version)
        except WorkflowNotFound as e:
            log.warning("run %s deferred: %s", run_id, e)
            return self.endings.defer(history, owner, e)
        if now > lifetime_end(claim.run, self.config.max_run_lifetime, self.config.retention):
            return self.endings.fail_for_good(
                claim.run,
                owner,
                LifetimeExceeded(
                    f"run {run_id} woke after its max_run_lifetime "
                    f"({self.config.max_run_lifetime.days} days from {claim.run.created_at}); "
                    "the records that keep its effects from repeating may be gone, so it "
                    "stops here: fork it to go on"
                ),
            )
        try:
            poisoned = self._count_takeover(claim, history, owner)
        except LeaseLost:
            return Outcome(run_id, "lease_lost")
        waiting, admitted = self.admission.admit(wf, history.run, owner, events_inbox)
        if waiting is not None:
            return waiting
        if admitted is not history.run:  # read again after an event: replay from that read
            history = RunHistory(admitted, history.steps, history.signals)
            read_at = self.clock.now()
        progress = None
        while True:
            x = Execution(
                self,
                wf,
                history,
                owner,
                invocation,
                poisoned=poisoned,
                hop=hop,
                reason=reason,
                events_inbox=events_inbox,
                read_at=read_at,
            )
            # The progress the refused suspension carried: the replay after the reload
            # takes no value the code set before this point again (``durable.core.progress``).
            x.progress = progress
            try:
                outcome = self.endings.drive(x)
            except InboxChanged as changed:
                progress = x.progress
                read_at = self.clock.now()
                reloaded = self.ledger.load(run_id)
                mine = (x.run.fence, owner)
                if reloaded is None or (reloaded.run.fence, reloaded.run.lease_owner) != mine:
                    # Taken over since the refused suspension (this lease ran out): the
                    # reloaded item's lease is another worker's, never one to replay on.
                    return Outcome(run_id, "lease_lost")
                history, events_inbox = reloaded, changed.inbox
                poisoned = x.poisoned and not x.poison_failed
                continue
            if outcome.result in FINISHED and x.has_timers():
                self.cancel_timers(run_id)
            return outcome

    def _lost_while_reading(self, run_id: str, owner: str, error: PayloadMissing) -> Outcome:
        """A claim, load or reload that could not fetch one of the run's objects (a read
        inside the replay fails the run instead, ``Endings.drive``): a zombie's, when
        the run is no longer this worker's. Its read hung past its lease, another worker
        took the run over, and the run ended and was erased, objects first (explorer seed
        657). That is a lost lease, not an error for Lambda to retry and alarm on. A run
        still held by this worker has lost an object for real: raised as it was. Only a
        missing object is judged so: any other error of a claim (its own write refused,
        the store down) says nothing of who holds the run, and is raised."""
        try:
            run = self.claims.unresolved().get_run(run_id)  # its state only, no object
        except StorageError:
            raise error from None
        if run is not None and run.lease_owner == owner:
            raise error
        log.info("run %s was taken over while this worker read it: %s", run_id, error)
        return Outcome(run_id, "lease_lost")

    def _count_takeover(self, claim: Claim, history: RunHistory, owner: str) -> bool:
        """Whether the run's current step killed ``max_takeovers`` workers in a row."""
        if not claim.took_over:
            return False
        run = claim.run
        progress = sum(1 for s in history.steps.values() if s.status.final)
        if run.takeover_mark != progress:
            try:
                history.run = self.ledger.update_run(
                    run.run_id,
                    RunGuard(fence=run.fence, owner=owner),
                    {"takeovers": 1, "takeover_mark": progress},
                )
            except ConditionFailed as e:
                raise LeaseLost() from e
            return self.config.max_takeovers <= 1
        return run.takeovers >= self.config.max_takeovers

    def purge_expired(self, run_id: str) -> int:
        """What the purge on the table's stream does once a run item has expired: delete
        the steps and signals it left (``durable.core.retention``)."""
        return purge_expired(
            self.ledger,
            run_id,
            self.clock.now(),
            current=self.claims.unresolved().get_run(run_id),  # its state, not its values
            purge_payloads=self.claims.purge_payloads,
        )

    def erase(self, run_id: str) -> int:
        """Delete a finished run now, whatever its TTL says: every item under its id
        and its large values, then its run item (an erasure request; a run whose item
        already expired has its leftovers deleted). ``InvalidState`` while it runs
        (cancel it first). Returns how many items and objects were deleted."""
        run = self.claims.unresolved().get_run(run_id)  # its state, not its values
        if run is not None and not run.terminal:
            raise InvalidState(
                f"run {run_id} is {run.status.value}: erase a finished run (cancel it first)"
            )
        # Its items first and its run item last: an erasure cut short leaves the run to be
        # erased again, never items no run item names (which no purge would come for).
        erased = self.ledger.purge_leftovers(run_id, before=_EVER)
        erased += self.claims.purge_payloads(run_id, before=_EVER)
        if run is not None and self.ledger.delete_run(run_id, created_at=run.created_at):
            erased += 1
        return erased

    def peek_run(self, run_id: str) -> RunRecord | None:
        """The run's item with large values left as references (``durable.core.claim_check``):
        for a reader that needs its state (status, workflow, what it waits for), never its
        input or output, so no object is fetched."""
        return self.claims.unresolved().get_run(run_id)

    # --- external events ------------------------------------------------------------

    def complete_callback(self, token: str, result: Any = None, error: Any = None) -> str:
        """Answer a callback: ``result`` (any JSON) or ``error`` ({type, message}).

        Raises ``InvalidInput`` (malformed), ``CallbackNotFound`` (unknown or forged),
        ``CallbackAlreadyCompleted`` (used), ``CallbackExpired`` (timed out); nothing is
        written in any of these. Returns the run id.
        """
        return events.complete_callback(self, token, result, error)

    def heartbeat(self, token: str) -> tuple[str, str]:
        """A heartbeat for a callback created with ``heartbeat_timeout``: its wait's expiry
        moves to now + that timeout (never past its own ``timeout``). Returns the run id and
        the new expiry. Raises ``CallbackNotFound`` (unknown token), ``InvalidState`` (the
        callback takes no heartbeats), ``CallbackAlreadyCompleted`` or ``CallbackExpired``
        (a heartbeat missed: too late); nothing is written in any of these."""
        return events.heartbeat_callback(self, token)

    def complete_wait(
        self,
        run_id: str,
        name: str,
        result: Any = None,
        error: Any = None,
        requested_by: str | None = None,
        position: str | None = None,
    ) -> StepRecord:
        """Answer the run's pending callback ``name`` as an operator (no token): ``result``
        (any JSON) or ``error`` ({type, message}). When several callbacks of that name wait
        (map branches), ``position`` says which. Raises ``CallbackNotFound`` (no such
        wait), ``AmbiguousWait`` (several wait and no position), ``CallbackAlreadyCompleted``,
        ``CallbackExpired``, ``InvalidState`` (the run finished); nothing is written in any
        of these."""
        return events.complete_wait(self, run_id, name, result, error, requested_by, position)

    def signal(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        sent_by: str | None = None,
    ) -> SignalRecord:
        """Deliver a named signal; buffered until the run waits for it.

        With an idempotency ``key`` (1-256 characters, no control characters; scoped to
        the run and the signal's name) the signal is stored once: a repeat with the same
        payload returns the stored signal (same ``signal_id``) and writes nothing; another
        payload raises ``IdempotencyConflict``. Without one, every call stores a new signal.
        """
        return events.send_signal(self, run_id, name, payload, key, sent_by).signal

    def sweep(self, now: datetime | None = None) -> SweepReport:
        """Invoke a worker for every run due before ``now - sweep_grace`` (capped)."""
        return sweep(self, now)

    # --- operator decisions -----------------------------------------------------------

    def cancel(
        self,
        run_id: str,
        reason: str,
        compensate: bool = False,
        requested_by: str | None = None,
    ) -> RunRecord:
        """Ask a run to stop. A waiting run is canceled at once (timers deleted); a
        running one stops at its next lease check or durable call (its in-flight step
        finishes and is recorded). With ``compensate`` the registered compensations run
        first. Canceling a finished run raises ``InvalidState``; twice is harmless."""
        return operations.cancel(self, run_id, reason, compensate, requested_by)

    def retry(
        self, run_id: str, upgrade_to: int | None = None, requested_by: str | None = None
    ) -> RunRecord:
        """Re-run a FAILED run from its failed step, keeping completed steps and the failed
        step's checkpoint. ``upgrade_to`` re-pins it to a newer version, only if that
        version replays the recorded steps without non-determinism."""
        return operations.retry(self, run_id, upgrade_to, requested_by)

    def fork(self, run_id: str, from_step: int | str, requested_by: str | None = None) -> RunRecord:
        """Start a new run with the ledger of ``run_id`` up to (not including) step
        ``from_step``, re-executing from there."""
        return operations.fork(self, run_id, from_step, requested_by)

    # --- reading -------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        """The run's record (status, input, output or error); ``RunNotFound`` if none."""
        run = self.ledger.get_run(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}; list runs to find its id")
        return run

    def load(self, run_id: str) -> RunHistory:
        """The run's item, steps and signals, without anything an expired run of the same
        id left behind (those are not this run's, though still stored until purged)."""
        loaded = visible_history(self.ledger.load(run_id))
        if loaded is None:
            raise RunNotFound(f"no run {run_id!r}; list runs to find its id")
        return loaded

    def history(self, run_id: str) -> list[StepRecord]:
        """The run's step records in position order."""
        loaded = self.load(run_id)
        return [loaded.steps[p] for p in sorted(loaded.steps, key=position_key)]

    def run_by_key(self, workflow: str, key: str) -> RunRecord | None:
        """The run of ``workflow`` started under idempotency key ``key`` as the run shows
        it (an operator's or a keyed child's key as given; a sender's with its namespace:
        ``eventbridge/<id>``, ``sqs/<id>``, ``hook:<name>/<key>``, a schedule's
        ``schedule/<name>/<time>``), or None. A key in a sender's namespace names one run
        for its retention: a read of the id the key derives. A key of one's own names the
        latest run started under it (a key reused with ``reuse="after_end"`` names one
        run after another: ``durable.engine.keys``)."""
        check_idempotency_key(key, "key")
        if reserved_prefix(key) is None:
            return keys.latest_run(self.ledger, workflow, key)
        run_id = run_id_for_key(workflow, key)
        run = self.ledger.get_run(run_id) if run_id is not None else None
        if run is not None and run.workflow == workflow and run.idempotency_key == key:
            return run
        return None

    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        needs_attention: bool | None = None,
        version: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        """Runs of one ``workflow`` (optionally one ``status`` or ``version``), unfinished
        first, then ended, newest first in each; or those with ``needs_attention``, latest
        changed first. Pass the page's cursor back for the next page."""
        if status is not None and status not in RunStatus.__members__:
            raise DurableError(
                f"unknown status {status!r}; use one of {', '.join(RunStatus.__members__)}"
            )
        return self.ledger.list_runs(
            workflow=workflow,
            status=status,
            needs_attention=needs_attention,
            version=version,
            limit=limit,
            cursor=cursor,
        )


__all__ = ["Engine", "Outcome"]
