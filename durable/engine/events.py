"""External events addressed to runs: callback completions and signals.

Each writes its own record and bumps the run's inbox in one transaction, then invokes a
worker. Every error case is decided before anything is written. A signal sent with an
idempotency key is stored once: its item's sort key derives from the key, so a retried
send meets the first one in the ledger's conditional write and gets it back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from durable.core import serde, tokens
from durable.core.ids import check_idempotency_key, new_ulid
from durable.core.leases import decided_batch_above, positions_above, waiting_for_extended
from durable.core.model import (
    RunRecord,
    RunStatus,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    position_key,
    signal_order,
)
from durable.core.ports import RunFinished, SignalExists, WaitNotPending
from durable.core.retention import leftover_cutoff, visible_history
from durable.core.secrets import SEALED, is_sealed, transform
from durable.engine.lineage import (
    MAX_HOPS,
    carried_signals,
    chain_end,
    named_successor,
    successor,
)
from durable.engine.waits import check_wait_name, heartbeat_expiry
from durable.errors import (
    AmbiguousWait,
    CallbackAlreadyCompleted,
    CallbackExpired,
    CallbackNotFound,
    IdempotencyConflict,
    InvalidInput,
    InvalidState,
    RunNotFound,
)

if TYPE_CHECKING:
    from durable.engine.engine_parts import EngineParts

log = logging.getLogger("durable.events")


def _json_text(value: Any, field: str) -> str:
    try:
        return serde.dumps_plain(value)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{field} must be JSON: {e}", field=field) from e


def _error_fields(error: Any) -> tuple[str, str]:
    if not isinstance(error, dict):
        raise InvalidInput('error must be an object {"type": ..., "message": ...}', field="error")
    kind, message = error.get("type", "Rejected"), error.get("message", "")
    if not isinstance(kind, str) or not kind or len(kind) > 200:
        raise InvalidInput(
            "error.type must be a non-empty string (<= 200 chars)", field="error.type"
        )
    if not isinstance(message, str) or len(message) > 10_000:
        raise InvalidInput("error.message must be a string (<= 10000 chars)", field="error.message")
    return kind, message


def _refuse(current: StepRecord | None, now: str) -> None:
    """Raise the error that explains why ``current`` cannot take a completion."""
    if current is None:
        raise CallbackNotFound("unknown callback token")
    expired = current.expires_at is not None and current.expires_at <= now
    if current.status == StepStatus.TIMED_OUT or (current.status == StepStatus.WAITING and expired):
        raise CallbackExpired(
            f"callback {current.name!r} expired at {current.expires_at}; the workflow has "
            "moved on (it saw a CallbackTimeout)"
        )
    raise CallbackAlreadyCompleted(f"callback {current.name!r} was already answered")


def _answered(
    rec: StepRecord, output: str | None, failure: tuple[str, str] | None, now: str
) -> StepRecord:
    """The wait's record once answered with ``output`` or ``failure``."""
    return replace(
        rec,
        status=StepStatus.TERMINAL_FAILED if failure else StepStatus.DONE,
        output=output,
        error_type=failure[0] if failure else None,
        error_class="terminal" if failure else None,
        error_summary=failure[1] if failure else None,
        updated_at=now,
    )


def _deliver(engine: EngineParts, answered: StepRecord, token_hash: str | None, now: str) -> None:
    """One conditional write (still pending, not expired, the token's hash; the inbox
    bump), then a worker; a refusal explains itself and writes nothing."""
    try:
        engine.ledger.complete_waiting(answered, token_hash=token_hash, now=now)
    except WaitNotPending as e:
        _refuse(e.current, now)
    except RunFinished as e:
        raise InvalidState(f"run {answered.run_id} has already finished") from e
    engine.invoke_worker(answered.run_id, "callback")


def complete_callback(
    engine: EngineParts, token: str, result: Any = None, error: Any = None
) -> str:
    """Answer a callback with ``result`` or ``error``; returns the run id."""
    run_id, position, _ = tokens.parse_token(token)
    if error is not None and result is not None:
        raise InvalidInput("send either a result or an error, not both", field="error")
    output = None if error is not None else _json_text(result, "result")
    failure = _error_fields(error) if error is not None else None
    rec, _ = _token_wait(engine, token, run_id, position)
    digest = tokens.token_hash(token)
    now = format_time(engine.clock.now())
    if rec.status != StepStatus.WAITING or (rec.expires_at is not None and rec.expires_at <= now):
        _refuse(rec, now)
    output = _answer_text(engine, rec, result, output, failure)
    _deliver(engine, _answered(rec, output, failure, now), digest, now)
    return run_id


def heartbeat_callback(engine: EngineParts, token: str) -> tuple[str, str]:
    """A heartbeat from the party a callback waits on: its wait's expiry moves to now +
    its ``heartbeat_timeout`` (never past its deadline). One conditional write of the
    wait's own record (still WAITING with this token, not expired, the run not finished:
    ``Ledger.extend_wait``) and, in the same write, the run item's ``waiting_for`` when it
    names this wait (``leases.waiting_for_extended``: a listing shows the new expiry);
    nothing else: no inbox bump, no worker woken. The run stays parked until the expiry
    it had; the worker then meets the moved expiry (a timeout of
    an expiry that moved on is refused by the ledger, ``leases.step_replaceable``) and
    parks it again until the new one. Returns (run id, new expiry)."""
    run_id, position, _ = tokens.parse_token(token)
    rec, run = _token_wait(engine, token, run_id, position)
    heartbeat = (rec.detail or {}).get("heartbeat")
    if not heartbeat:
        raise InvalidState(
            f"callback {rec.name!r} takes no heartbeats: give it a heartbeat_timeout "
            "(ctx.wait_for_callback(..., heartbeat_timeout=timedelta(minutes=5)))"
        )
    now = engine.clock.now()
    stamp = format_time(now)
    if rec.status != StepStatus.WAITING or (rec.expires_at is not None and rec.expires_at <= stamp):
        _refuse(rec, stamp)
    above = engine.ledger.get_steps(run_id, positions_above(position))  # one read
    if decided_batch_above(position, above):
        raise CallbackExpired(
            f"callback {rec.name!r} is no longer waited on: its branch's batch was decided "
            "without it; stop the job"
        )
    deadline = (rec.detail or {}).get("deadline")
    expires = heartbeat_expiry(now, timedelta(seconds=float(heartbeat)), deadline)
    if rec.expires_at is not None and expires is not None and expires <= rec.expires_at:
        return run_id, rec.expires_at  # a later heartbeat already moved it further
    beat = replace(
        rec,
        expires_at=expires,
        updated_at=stamp,
        detail={**(rec.detail or {}), "heartbeat_at": stamp},
    )
    shown = waiting_for_extended(run.waiting_for, rec.name, rec.expires_at, expires)
    try:
        engine.ledger.extend_wait(
            beat,
            token_hash=rec.token_hash or "",
            now=stamp,
            waiting_for=None if shown is None else (run.waiting_for or "", shown),
        )
    except WaitNotPending as e:  # answered or timed out between our read and our write
        _refuse(e.current, stamp)
    except RunFinished as e:
        raise CallbackExpired(f"run {run_id} has finished: stop the job") from e
    return run_id, expires or ""


def _token_wait(
    engine: EngineParts, token: str, run_id: str, position: str
) -> tuple[StepRecord, RunRecord]:
    """The callback a token names, checked (its MAC, its hash, its run's lifetime), and
    its run as read; ``CallbackNotFound`` for anything else."""
    secret = tokens.check_secret(engine.config.callback_secret)
    keys = (secret, *engine.config.callback_verify_only_secrets)
    rec = engine.ledger.get_step(run_id, position)
    if (
        rec is None
        or rec.kind != StepKind.CALLBACK
        or rec.token_nonce is None
        or rec.token_hash != tokens.token_hash(token)
        or not tokens.verify(keys, token, rec.token_nonce)
    ):
        raise CallbackNotFound("unknown callback token: check it was copied whole")
    run = engine.ledger.get_run(run_id)
    if run is None or rec.updated_at < leftover_cutoff(run):
        # The callback of an earlier run under this id (expired, not yet purged): its
        # token must not answer the current run's wait at the same position.
        raise CallbackNotFound("unknown callback token: its run has expired")
    return rec, run


def _answer_text(
    engine: EngineParts, rec: StepRecord, result: Any, output: str | None, failure: Any
) -> str | None:
    """What is stored of an answer. One that does not fit the type the callback declared
    is refused (422, naming the field) when this process can import the type; the
    workflow decodes it again anyway. A type with secret-typed fields (the callback says
    ``sealed``) has them sealed under a data key of the answer's own (``durable.core.secrets``):
    refused, nothing written, when the type cannot be imported here to know which."""
    detail = rec.detail or {}
    reference = detail.get("result_type")
    if failure is not None or not isinstance(reference, str):
        return output
    _refuse_sealed_shapes(result)
    annotation = serde.resolve_reference(reference)
    if annotation is None:
        if detail.get("sealed"):
            raise InvalidInput(
                f"callback {rec.name!r} expects {reference}, whose secret-typed fields must "
                "be sealed, but the API cannot import it: deploy the API with the "
                "workflow's code (the same AppReference)",
                field="result",
            )
        return output
    try:
        value = serde.check_value(result, annotation, f"callback {rec.name!r} expects {reference}")
    except InvalidInput as refused:
        # What to send, not only what was wrong: the type's shape (`durable approve
        # --result '...'` with each placeholder filled in). Built only when refused.
        raise InvalidInput(
            f"{refused} (send a value like {serde.example_answer(annotation)})",
            field=refused.field,
        ) from refused
    if not detail.get("sealed"):
        return output
    return serde.encode(value, annotation, engine.answer_sealer(rec.run_id))


def _refuse_sealed_shapes(result: Any) -> None:
    """An answer from outside may not carry sealed nodes of its own: the worker would try
    to open them as the run's secrets."""

    def found(node: Any) -> Any:
        if is_sealed(node):
            raise InvalidInput(
                f"an answer may not hold {{{SEALED!r}: ...}} objects: that shape is how "
                "sealed secrets are stored; send the plain value",
                field="result",
            )
        return None

    transform(result, found)


def complete_wait(
    engine: EngineParts,
    run_id: str,
    name: str,
    result: Any = None,
    error: Any = None,
    requested_by: str | None = None,
    position: str | None = None,
) -> StepRecord:
    """An operator's answer to a run's pending callback, by run id and wait name (the
    management API, IAM-authorized): no token needed, so nothing an operator sees or the
    ledger holds can answer in their place. The answer is the same conditional write a
    token's is (pending, not expired, with the inbox bump); ``completed_by`` records who.
    Returns the answered step.

    Which callback: the one waiting under that name. When several wait under it (map
    branches that each ask for an approval), the answer must name one by ``position``;
    without it, ``AmbiguousWait`` lists them and nothing is written. When none waits,
    the latest of that name says why (answered: 409, expired: 410)."""
    try:
        check_wait_name(name, "callback")
    except ValueError as e:
        raise InvalidInput(str(e), field="name") from e
    if error is not None and result is not None:
        raise InvalidInput("send either a result or an error, not both", field="error")
    output = None if error is not None else _json_text(result, "result")
    failure = _error_fields(error) if error is not None else None
    history = engine.load(run_id)
    if history.run.terminal:
        raise InvalidState(f"run {run_id} has already finished; it waits for nothing")
    named = [
        s
        for p, s in sorted(history.steps.items(), key=lambda item: position_key(item[0]))
        if s.kind == StepKind.CALLBACK and s.name == name
    ]
    if not named:
        raise CallbackNotFound(
            f"run {run_id} has no callback named {name!r}; `durable show {run_id}` lists its waits"
        )
    rec = _the_wait(run_id, name, named, position)
    now = format_time(engine.clock.now())
    if rec.status != StepStatus.WAITING or (rec.expires_at is not None and rec.expires_at <= now):
        _refuse(rec, now)
    output = _answer_text(engine, rec, result, output, failure)
    answered = _answered(rec, output, failure, now)
    answered.detail = {**(rec.detail or {}), "completed_by": requested_by or "operator"}
    _deliver(engine, answered, rec.token_hash, now)
    return answered


def _the_wait(run_id: str, name: str, named: list[StepRecord], position: str | None) -> StepRecord:
    """The callback an answer by name is for (see ``complete_wait``)."""
    if position is not None:
        for rec in named:
            if rec.position == position:
                return rec
        raise CallbackNotFound(
            f"run {run_id} has no callback named {name!r} at {position}; its callbacks of "
            f"that name are at {', '.join(r.position for r in named)}"
        )
    waiting = [rec for rec in named if rec.status == StepStatus.WAITING]
    if len(waiting) > 1:
        at = [rec.position for rec in waiting]
        raise AmbiguousWait(
            f"run {run_id} has {len(at)} callbacks named {name!r} waiting, at "
            f'{", ".join(at)}: answer one by its position ("position" in the request, '
            f"`durable approve {run_id} {name} --position {at[0]}`)",
            at,
        )
    # One waiting, or none: a loop may wait on the same name again, and the latest is
    # the live one (or says why none is: answered, expired).
    return waiting[0] if waiting else named[-1]


def signal_key_hash(key: str) -> str:
    """What the ledger keeps of a signal's key: 128 bits of its SHA-256, never the key
    (a caller may use a secret, such as an upstream message id, as its key)."""
    return serde.sha256_hex(key)[:32]


@dataclass(frozen=True, slots=True)
class SignalDelivery:
    """The stored signal, and whether this call repeated an earlier one (same key)."""

    signal: SignalRecord
    duplicate: bool


def _add_signal(engine: EngineParts, run: RunRecord, signal: SignalRecord, now: str) -> None:
    """Store ``signal``; a keyed one found under its key from an earlier run of the same
    id (expired, not yet purged) is a leftover, not a repeat: purge, then store."""
    try:
        engine.ledger.add_signal(signal, now=now)
    except SignalExists as e:
        cutoff = leftover_cutoff(run)
        if e.existing.received_at >= cutoff:
            raise
        engine.ledger.purge_leftovers(run.run_id, before=cutoff)
        engine.ledger.add_signal(signal, now=now)


def send_signal(
    engine: EngineParts,
    run_id: str,
    name: str,
    payload: Any = None,
    key: str | None = None,
    sent_by: str | None = None,
) -> SignalDelivery:
    """Store a signal and wake the run; with ``key``, a repeat returns the stored one.

    A run that continued as new takes no more signals; one sent to it goes to the run
    that carries its chain now (``durable.engine.lineage``), as every handle to a run
    follows its chain. A keyed one is looked for under the addressed run first: a repeat
    of a signal that run took is answered with that signal."""
    try:
        check_wait_name(name, "signal")
    except ValueError as e:
        raise InvalidInput(str(e), field="name") from e
    key_hash = signal_key_hash(check_idempotency_key(key, "key")) if key is not None else None
    text = _json_text(payload, "payload")
    # The stored JSON, key-sorted: a retry that serialized the same object in another order
    # matches (read back from the text, whose object keys are all strings by now).
    payload_hash = serde.sha256_hex(serde.canonical_json(json.loads(text))) if key_hash else None
    run = engine.ledger.get_run(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}; list runs to find its id")
    # A keyed send walks the chain one link at a time: the signal it may repeat is stored
    # in whichever link it reached first (and in the links it was handed on to), and a
    # link that consumed it handed nothing on, so the end of the chain alone would take
    # the repeat as a new signal.
    keyed = key_hash is not None
    for _ in range(FORWARDS + (MAX_HOPS if keyed else 0)):
        if run.terminal and not keyed:
            run = _forwarded(engine, run, run_id)
        try:
            return _send(engine, run, name, text, key_hash, payload_hash, sent_by)
        except RunFinished as e:
            # It ended (a keyed send to an ended link gets here too, after the ledger
            # found no repeat there): go on along its chain, or refuse as before.
            current = engine.ledger.get_run(run.run_id) or run
            if not current.terminal:
                raise InvalidState(
                    f"run {run.run_id} has finished; it takes no more signals"
                ) from e
            run = _forwarded(engine, current, run_id, one_link=keyed)
    raise InvalidState(f"run {run_id} keeps continuing as new; send the signal again")


# Times one send follows a chain that moves on while it sends (each link continued as new
# between the read and the write): never more than a couple in practice.
FORWARDS = 5


def _forwarded(
    engine: EngineParts, run: RunRecord, addressed: str, *, one_link: bool = False
) -> RunRecord:
    """The run a signal for the ended ``run`` goes to: the going end of its chain (with
    ``one_link``, ``run``'s successor, ended or not: a keyed send looks for its repeat in
    each link); else the refusal an ended run's send always got."""
    if one_link:
        nxt = successor(engine.ledger.get_run, run)
        if nxt is not None:
            return nxt
    end = run if one_link else chain_end(engine.ledger.get_run, run)
    if end is None or end.run_id == run.run_id or end.terminal:
        where = (
            "" if end is None or end.run_id == addressed else f" (its chain ended in {end.run_id})"
        )
        raise InvalidState(
            f"run {addressed} is {run.status.value}{where}; it takes no more signals"
        )
    return end  # ``_send`` puts what it inherits in place first, if it has not started


def _send(
    engine: EngineParts,
    run: RunRecord,
    name: str,
    text: str,
    key_hash: str | None,
    payload_hash: str | None,
    sent_by: str | None,
) -> SignalDelivery:
    """One signal to ``run``: stored (or its repeat found), then a worker. ``RunFinished``
    when the run ended before the write."""
    run_id = run.run_id
    if run.continued_from is not None and run.status == RunStatus.PENDING:
        # Not replayed yet: what its predecessor left may not all be here (that worker
        # died before handing it over): in place first, so this one comes after it.
        ensure_inherited(engine, run)
    now = engine.clock.now()
    signal = SignalRecord(
        run_id,
        name,
        new_ulid(now),
        text,
        format_time(now),
        key_hash=key_hash,
        payload_hash=payload_hash,
        sent_by=sent_by,
        purge_at=run.items_purge_at,  # ``durable.core.lifetime``
    )
    try:
        _add_signal(engine, run, signal, format_time(now))
    except SignalExists as e:
        stored = e.existing
        if stored.payload_hash != payload_hash:
            raise IdempotencyConflict(
                f"the idempotency key was already used for signal {name!r} of run {run_id} "
                f"(signal {stored.signal_id}) with a different payload; use a new key for a "
                "new signal"
            ) from e
        # Nothing is written and the inbox is not bumped again. The worker is invoked
        # again only while the wake-up the first send set (due_at = its arrival) is still
        # pending: that send may have died between its write and its invoke, and the
        # claim makes a spare invocation harmless. Once a worker took the run (due_at
        # moved on), a repeat wakes nothing.
        if not run.terminal and run.due_at is not None and run.due_at <= format_time(now):
            engine.invoke_worker(run_id, "signal")
        return SignalDelivery(stored, duplicate=True)
    engine.invoke_worker(run_id, "signal")
    return SignalDelivery(signal, duplicate=False)


# --- signals a run leaves when it continues as new ----------------------------------------


def unconsumed_signals(
    signals: list[SignalRecord], steps: Mapping[str, StepRecord]
) -> list[SignalRecord]:
    """The signals a run holds that no wait of it consumed, in arrival order."""
    consumed = {
        (s.detail or {}).get("signal_id")
        for s in steps.values()
        if s.kind == StepKind.SIGNAL and s.status == StepStatus.DONE
    }
    return sorted(
        (s for s in signals if s.consumed_by is None and s.signal_id not in consumed),
        key=signal_order,
    )


def carried_by(predecessor_id: str) -> str:
    """The ``sent_by`` of a signal a run handed to its successor: that run sent it on."""
    return f"run {predecessor_id}"


def hand_over_signals(
    engine: EngineParts,
    predecessor_id: str,
    signals: list[SignalRecord],
    successor_id: str,
    purge_at: int | None,
) -> int:
    """Copy ``signals`` (a run's unconsumed ones, in arrival order) to its successor, in
    order; returns how many were stored now. Each copy is keyed (the original's key, or
    one made of the original's id), so copying again, by a second worker or after a
    crash, stores nothing twice; a copy is stored only after the one before it exists,
    so the order holds whoever copies. Every copy says which run sent it on, and carries
    the successor's TTL (``purge_at``: its ``items_purge_at``)."""
    stored = 0
    for signal in signals:
        now = format_time(engine.clock.now())
        copy = SignalRecord(
            successor_id,
            signal.name,
            signal.signal_id,
            signal.payload,
            now,
            key_hash=signal.key_hash or signal_key_hash(f"continued/{signal.signal_id}"),
            payload_hash=signal.payload_hash
            or serde.sha256_hex(serde.canonical_json(json.loads(signal.payload))),
            sent_by=carried_by(predecessor_id),
            purge_at=purge_at,
        )
        try:
            engine.ledger.add_signal(copy, now=now)
        except SignalExists:
            continue  # copied already
        except RunFinished:
            # The successor ended before it got them (canceled at once): they end with it,
            # as any run's unconsumed signals do.
            log.warning(
                "run %s ended before the signals of run %s reached it",
                successor_id,
                predecessor_id,
            )
            return stored
        stored += 1
    return stored


def ensure_inherited(
    engine: EngineParts, run: RunRecord, held: list[SignalRecord] | None = None
) -> bool:
    """Make sure ``run`` holds the signals its predecessor handed over (the count its
    marker gives); copy the missing ones from the predecessor when not. ``held``: the
    signals of ``run`` when the caller has them (else they are read). Whether any copy
    was stored now. Cheap when nothing is owed: one read of the predecessor's run item."""
    if run.continued_from is None:
        return False
    predecessor = engine.ledger.get_run(run.continued_from)
    if predecessor is None or named_successor(predecessor) != run.run_id:
        return False
    owed = carried_signals(predecessor)
    if owed == 0:
        return False
    if held is None:
        loaded = visible_history(engine.ledger.load(run.run_id))
        held = loaded.signals if loaded is not None else []
    sender = carried_by(predecessor.run_id)
    if sum(1 for s in held if s.sent_by == sender) >= owed:
        return False
    before = visible_history(engine.ledger.load(predecessor.run_id))
    if before is None:
        return False
    left = unconsumed_signals(before.signals, before.steps)
    return hand_over_signals(engine, predecessor.run_id, left, run.run_id, run.items_purge_at) > 0
