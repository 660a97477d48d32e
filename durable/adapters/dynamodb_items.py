"""The ledger's items: their keys, and their translation to and from records.

The item layout (attribute names and types, console-readable: strings, numbers, booleans,
maps) is declared by the pynamodb models in ``durable.adapters.dynamodb_models``; this
codec writes and reads it by hand, and a contract test holds the two equal. The deployed
functions import only this module: pynamodb is not in the Lambda package (see
docs/architecture.md, "What a deployed function imports").
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from durable.core.ids import due_shard
from durable.core.leases import (
    attention_partition,
    listing_key,
    listing_partition,
    wants_a_person,
)
from durable.core.model import (
    Attempt,
    RunError,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
)
from durable.core.progress import stored_progress

RUN_SK = "RUN"
STEP_PREFIX = "STEP#"
SIGNAL_PREFIX = "SIGNAL#"
INPUT_PREFIX = "INPUT#"
# The largest input (bytes of its JSON text) the run item holds itself.
INPUT_INLINE_MAX = 512


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def input_apart(run: RunRecord) -> bool:
    """Whether the run's input is kept in an item of its own (``new_input_sk``),
    written once before the run item, instead of in the run item.

    DynamoDB bills a write of an item by the whole item's size (one unit per started KB
    of the larger of before and after), and the run item is written on every
    transition: create, each claim, suspension, finish. An input inside it is paid for
    again by each of them (a 4 KB input made each of a run's five transitions cost 5
    units instead of 1). Kept apart, it is paid for once; the run's loads read it with
    the rest of the partition. A small input stays inline: an extra item would cost a
    unit of its own for a saving of none (the run item stays under 1 KB either way).
    """
    return len(run.input.encode()) > INPUT_INLINE_MAX


def new_input_sk(run: RunRecord) -> str:
    """``INPUT#<created_at>#<nonce>``, a new key for each write of an input item. The
    run's incarnation is in it, so a run id that comes back (a keyed start after the first
    run expired) never reads the input an expired incarnation left before the purge got
    there. The nonce makes each write's key its own: two starts of one id in the same
    millisecond (the loser refused by the run item's condition), a create tried again
    after a timeout, a child started by a zombie and by the lease's new owner never
    write one key, so a refused write can delete its own item (``_drop_input``) without
    ever deleting one that another write's run item names."""
    return f"{INPUT_PREFIX}{run.created_at}#{secrets.token_hex(_NONCE_BYTES)}"


# 64 random bits: two writes of one run's input share a key with a chance of 2**-64.
_NONCE_BYTES = 8
# A key of that shape, for pricing an item that names one (``dynamodb_units``).
SAMPLE_INPUT_SK = f"{INPUT_PREFIX}2026-01-01T00:00:00.000Z#{'0' * 2 * _NONCE_BYTES}"


# --- the codec ---------------------------------------------------------------------------
# Records are converted by hand rather than through pynamodb's Model instances: pynamodb
# costs ~100 us to serialize and ~280 us to deserialize a step item, which would dominate
# a step's CPU and a long run's wake-up. The models in dynamodb_models stay the declared
# layout, and tests/contract/test_item_layout.py checks every item this codec writes
# round-trips through them unchanged, so the two cannot drift.


def attribute_value(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": str(value)}
    if isinstance(value, dict):
        return {"M": {k: attribute_value(v) for k, v in value.items() if v is not None}}
    if isinstance(value, list | tuple):
        return {"L": [attribute_value(v) for v in value]}
    raise TypeError(f"cannot store {type(value).__name__} in the ledger")


def _py(av: dict[str, Any]) -> Any:
    ((kind, value),) = av.items()
    if kind == "S":
        return value
    if kind == "N":
        return float(value) if "." in value or "e" in value.lower() else int(value)
    if kind == "BOOL":
        return value
    if kind == "M":
        return {k: _py(v) for k, v in value.items()}
    if kind == "L":
        return [_py(v) for v in value]
    if kind == "NULL":
        return None
    raise TypeError(f"unexpected attribute type {kind}")


def _item(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: attribute_value(v) for k, v in fields.items() if v is not None}


def run_to_item(run: RunRecord, shards: int, *, input_item: str | None = None) -> dict[str, Any]:
    """The run item; with ``input_item`` (the key of the item that holds it: see
    ``input_to_item``), without its input."""
    apart = input_item is not None
    return _item(
        {
            "pk": run_pk(run.run_id),
            "sk": RUN_SK,
            "run_id": run.run_id,
            "workflow": run.workflow,
            "version": run.version,
            "status": run.status.value,
            "input": None if apart else run.input,
            "input_item": input_item,
            "input_hash": run.input_hash,
            "created_at": run.created_at,
            "updated_at": run.updated_at,
            "output": run.output,
            "error": run.error.to_dict() if run.error else None,
            "requested_by": run.requested_by,
            "idempotency_key": run.idempotency_key,
            "needs_attention": run.needs_attention,
            "waiting_for": run.waiting_for,
            "lease_owner": run.lease_owner,
            "lease_until": run.lease_until,
            "fence": run.fence,
            "takeovers": run.takeovers,
            "takeover_mark": run.takeover_mark,
            "inbox": run.inbox,
            "cancel_requested": run.cancel_requested,
            "cancel_reason": run.cancel_reason,
            "cancel_compensate": run.cancel_compensate,
            "due_at": run.due_at,
            "purge_at": run.purge_at,
            "items_purge_at": run.items_purge_at,
            "continued_from": run.continued_from,
            "forked_from": run.forked_from,
            "parent": run.parent,
            "children": run.children or None,
            "deferrals": run.deferrals or None,
            "compensated": run.compensated or None,
            "data_key": run.data_key,
            "operations": run.operations or None,
            "usage": run.usage or None,
            "gate": run.gate,
            "queued_at": run.queued_at,
            "start_at": run.start_at,
            "sleeps": run.sleeps or None,
            "woke_at": run.woke_at,
            "progress": run.progress or None,
            "due_shard": due_shard(run.run_id, shards) if run.due_at else None,
            "listing_pk": listing_partition(run.workflow, run.run_id),
            "list_sk": listing_key(run.run_id, run.status.value, run.created_at, run.updated_at),
            "attention_pk": (
                attention_partition(run.run_id)
                if wants_a_person(run.status, run.needs_attention, run.waiting_for)
                else None
            ),
        }
    )


def input_to_item(run: RunRecord, sk: str) -> dict[str, Any]:
    """The item holding a large input (``input_apart``) under ``sk`` (``new_input_sk``),
    written once, before the run item that names it (``input_item``). ``updated_at`` is
    the run's creation: the purge of an expired incarnation deletes it with that
    incarnation's steps."""
    return _item(
        {
            "pk": run_pk(run.run_id),
            "sk": sk,
            "run_id": run.run_id,
            "input": run.input,
            "input_hash": run.input_hash,
            "updated_at": run.created_at,
            "purge_at": run.items_purge_at,  # ``durable.core.lifetime``
        }
    )


def step_to_item(step: StepRecord) -> dict[str, Any]:
    return _item(
        {
            "pk": run_pk(step.run_id),
            "sk": STEP_PREFIX + step.position,
            "run_id": step.run_id,
            "position": step.position,
            "name": step.name,
            "kind": step.kind.value,
            "status": step.status.value,
            "updated_at": step.updated_at,
            "step_version": step.step_version,
            "attempt": step.attempt,
            "attempts": [a.to_dict() for a in step.attempts] or None,
            "output": step.output,
            "error_type": step.error_type,
            "error_class": step.error_class,
            "error_summary": step.error_summary,
            "checkpoint": step.checkpoint,
            "idempotency_key": step.idempotency_key,
            "refs": step.refs or None,
            "wake_at": step.wake_at,
            "expires_at": step.expires_at,
            "token_nonce": step.token_nonce,
            "token_hash": step.token_hash,
            "detail": json.dumps(step.detail, separators=(",", ":")) if step.detail else None,
            "fence": step.fence,
            "purge_at": step.purge_at,  # ``durable.core.lifetime``
        }
    )


def signal_sk(signal: SignalRecord) -> str:
    """``SIGNAL#<name>#<ulid>``, or ``SIGNAL#<name>#K#<key_hash>`` for a keyed signal.

    The keyed form depends on the key alone, not on the time of arrival, so a retried
    send lands on the same item and its conditional put is the dedupe. It cannot collide
    with an unkeyed one even though names may hold ``#``: the last segment is a 32-hex
    hash there and a 26-character ULID here. Consumption order comes from ``signal_id``
    (the arrival ULID, stored on both kinds), never from the sort key.
    """
    if signal.key_hash is not None:
        return f"{SIGNAL_PREFIX}{signal.name}#K#{signal.key_hash}"
    return f"{SIGNAL_PREFIX}{signal.name}#{signal.signal_id}"


def signal_to_item(signal: SignalRecord) -> dict[str, Any]:
    return _item(
        {
            "pk": run_pk(signal.run_id),
            "sk": signal_sk(signal),
            "run_id": signal.run_id,
            "name": signal.name,
            "signal_id": signal.signal_id,
            "payload": signal.payload,
            "received_at": signal.received_at,
            "consumed_by": signal.consumed_by,
            "key_hash": signal.key_hash,
            "payload_hash": signal.payload_hash,
            "seq": signal.seq,
            "sent_by": signal.sent_by,
            "purge_at": signal.purge_at,  # ``durable.core.lifetime``
        }
    )


def _plain(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: _py(v) for k, v in raw.items()}


def item_to_run(raw: dict[str, Any]) -> RunRecord:
    d = _plain(raw)
    error = d.get("error")
    return RunRecord(
        run_id=d["run_id"],
        workflow=d["workflow"],
        version=int(d["version"]),
        status=RunStatus(d["status"]),
        # A listing index projects neither (``durable.core.leases.LISTED_FIELDS``); a large
        # input is in its own item (``input_item``), filled in by the ledger.
        input=d.get("input", ""),
        input_hash=d.get("input_hash", ""),
        created_at=d["created_at"],
        updated_at=d["updated_at"],
        output=d.get("output"),
        error=RunError.from_dict(error) if error else None,
        requested_by=d.get("requested_by"),
        idempotency_key=d.get("idempotency_key"),
        needs_attention=bool(d.get("needs_attention", False)),
        waiting_for=d.get("waiting_for"),
        lease_owner=d.get("lease_owner"),
        lease_until=d.get("lease_until"),
        fence=int(d.get("fence", 0)),
        takeovers=int(d.get("takeovers", 0)),
        takeover_mark=int(d.get("takeover_mark", 0)),
        inbox=int(d.get("inbox", 0)),
        cancel_requested=bool(d.get("cancel_requested", False)),
        cancel_reason=d.get("cancel_reason"),
        cancel_compensate=bool(d.get("cancel_compensate", False)),
        due_at=d.get("due_at"),
        purge_at=int(d["purge_at"]) if d.get("purge_at") is not None else None,
        items_purge_at=_epoch(d.get("items_purge_at")),
        continued_from=d.get("continued_from"),
        forked_from=d.get("forked_from"),
        parent=d.get("parent"),
        children=int(d.get("children", 0)),
        deferrals=int(d.get("deferrals", 0)),
        compensated=bool(d.get("compensated", False)),
        data_key=d.get("data_key"),
        operations=[dict(o) for o in d.get("operations") or []],
        usage={k: float(v) for k, v in d["usage"].items()} if d.get("usage") else None,
        gate=d.get("gate"),
        queued_at=d.get("queued_at"),
        start_at=d.get("start_at"),
        sleeps=d.get("sleeps") or None,
        woke_at=d.get("woke_at"),
        progress=stored_progress(d.get("progress")),
    )


def item_to_step(raw: dict[str, Any]) -> StepRecord:
    d = _plain(raw)
    checkpoint = d.get("checkpoint")
    return StepRecord(
        run_id=d["run_id"],
        position=d["position"],
        name=d["name"],
        kind=StepKind(d["kind"]),
        status=StepStatus(d["status"]),
        updated_at=d["updated_at"],
        step_version=int(d.get("step_version", 1)),
        attempt=int(d.get("attempt", 0)),
        attempts=[Attempt.from_dict(a) for a in d.get("attempts") or []],
        output=d.get("output"),
        error_type=d.get("error_type"),
        error_class=d.get("error_class"),
        error_summary=d.get("error_summary"),
        checkpoint=(
            {"payload_version": int(checkpoint["payload_version"]), "state": checkpoint["state"]}
            if checkpoint
            else None
        ),
        idempotency_key=d.get("idempotency_key"),
        refs=[{"kind": r["kind"], "value": r["value"]} for r in d.get("refs") or []],
        wake_at=d.get("wake_at"),
        expires_at=d.get("expires_at"),
        token_nonce=d.get("token_nonce"),
        token_hash=d.get("token_hash"),
        detail=json.loads(d["detail"]) if d.get("detail") else None,
        fence=int(d.get("fence", 0)),
        purge_at=_epoch(d.get("purge_at")),
    )


def item_to_signal(raw: dict[str, Any]) -> SignalRecord:
    d = _plain(raw)
    return SignalRecord(
        run_id=d["run_id"],
        name=d["name"],
        signal_id=d["signal_id"],
        payload=d["payload"],
        received_at=d["received_at"],
        consumed_by=d.get("consumed_by"),
        key_hash=d.get("key_hash"),
        payload_hash=d.get("payload_hash"),
        seq=int(d.get("seq", 0)),
        sent_by=d.get("sent_by"),
        purge_at=_epoch(d.get("purge_at")),
    )


def _epoch(value: Any) -> int | None:
    return int(value) if value is not None else None


def run_attribute_value(name: str, value: Any) -> dict[str, Any]:
    """One run field as a low-level AttributeValue (for update expressions)."""
    if name not in RUN_ATTRIBUTES:
        raise ValueError(f"{name!r} is not an attribute of the run item")
    if isinstance(value, RunError):
        value = value.to_dict()
    elif isinstance(value, RunStatus):
        value = value.value
    return attribute_value(value)


# Every attribute of a run item (``RunItem``'s; a contract test keeps the two equal).
RUN_ATTRIBUTES = frozenset(
    {
        *("pk", "sk", "run_id", "workflow", "version", "status", "input", "input_hash"),
        *("created_at", "updated_at", "output", "error", "requested_by", "idempotency_key"),
        *("needs_attention", "lease_owner", "lease_until", "fence", "takeovers"),
        *("takeover_mark", "inbox", "cancel_requested", "cancel_reason", "cancel_compensate"),
        *("due_at", "purge_at", "continued_from", "forked_from", "parent", "children"),
        *("deferrals", "compensated", "data_key", "operations", "usage", "gate", "queued_at"),
        *("start_at", "due_shard", "list_pk", "list_sk", "attention_pk", "waiting_for"),
        *("input_item", "sleeps", "woke_at", "progress", "items_purge_at", "listing_pk"),
    }
)
