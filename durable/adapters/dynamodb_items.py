"""pynamodb models of the ledger's items, and their translation to and from records.

pynamodb defines the item layout (attribute names and types, console-readable: strings,
numbers, booleans, maps). The ledger adapter serializes with these models but sends the
requests with the low-level client, because pynamodb cannot pass
``ReturnValuesOnConditionCheckFailure`` (first-writer-wins adoption needs it).
"""

from __future__ import annotations

import json
from typing import Any

from pynamodb.attributes import (
    BooleanAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.models import Model

from durable.ids import due_shard
from durable.model import (
    Attempt,
    RunError,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
)

RUN_SK = "RUN"
STEP_PREFIX = "STEP#"
SIGNAL_PREFIX = "SIGNAL#"
ATTENTION_PK = "ATTENTION"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def list_pk(workflow: str) -> str:
    return f"WF#{workflow}"


def list_sk(status: str, updated_at: str) -> str:
    return f"{status}#{updated_at}"


class ErrorMap(MapAttribute[str, Any]):
    type = UnicodeAttribute()
    message = UnicodeAttribute()
    retryable = BooleanAttribute(default=False)


class AttemptMap(MapAttribute[str, Any]):
    n = NumberAttribute()
    started_at = UnicodeAttribute()
    finished_at = UnicodeAttribute(null=True)
    error_class = UnicodeAttribute(null=True)
    error = UnicodeAttribute(null=True)
    request_id = UnicodeAttribute(null=True)
    log_stream = UnicodeAttribute(null=True)


class CheckpointMap(MapAttribute[str, Any]):
    payload_version = NumberAttribute()
    state = UnicodeAttribute()  # JSON text


class RefMap(MapAttribute[str, Any]):
    kind = UnicodeAttribute()
    value = UnicodeAttribute()


class _Base(Model):
    class Meta:
        table_name = "durable-ledger"  # never used for I/O: the adapter's client is

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class RunItem(_Base):
    run_id = UnicodeAttribute()
    workflow = UnicodeAttribute()
    version = NumberAttribute()
    status = UnicodeAttribute()
    input = UnicodeAttribute()
    input_hash = UnicodeAttribute()
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    output = UnicodeAttribute(null=True)
    error = ErrorMap(null=True)
    requested_by = UnicodeAttribute(null=True)
    idempotency_key = UnicodeAttribute(null=True)
    needs_attention = BooleanAttribute(default=False)
    lease_owner = UnicodeAttribute(null=True)
    lease_until = UnicodeAttribute(null=True)
    fence = NumberAttribute(default=0)
    takeovers = NumberAttribute(default=0)
    takeover_mark = NumberAttribute(default=0)
    inbox = NumberAttribute(default=0)
    cancel_requested = BooleanAttribute(default=False)
    cancel_reason = UnicodeAttribute(null=True)
    cancel_compensate = BooleanAttribute(default=False)
    due_at = UnicodeAttribute(null=True)
    purge_at = NumberAttribute(null=True)
    continued_from = UnicodeAttribute(null=True)
    # Index keys, derived from the fields above by this adapter.
    due_shard = UnicodeAttribute(null=True)
    list_pk = UnicodeAttribute(null=True)
    list_sk = UnicodeAttribute(null=True)
    attention_pk = UnicodeAttribute(null=True)


class StepItem(_Base):
    run_id = UnicodeAttribute()
    position = UnicodeAttribute()
    name = UnicodeAttribute()
    kind = UnicodeAttribute()
    status = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    step_version = NumberAttribute(default=1)
    attempt = NumberAttribute(default=0)
    attempts = ListAttribute(of=AttemptMap, null=True)
    output = UnicodeAttribute(null=True)
    error_type = UnicodeAttribute(null=True)
    error_class = UnicodeAttribute(null=True)
    error_summary = UnicodeAttribute(null=True)
    checkpoint = CheckpointMap(null=True)
    idempotency_key = UnicodeAttribute(null=True)
    refs = ListAttribute(of=RefMap, null=True)
    wake_at = UnicodeAttribute(null=True)
    expires_at = UnicodeAttribute(null=True)
    token_nonce = UnicodeAttribute(null=True)
    token_hash = UnicodeAttribute(null=True)
    detail = UnicodeAttribute(null=True)  # JSON text


class SignalItem(_Base):
    run_id = UnicodeAttribute()
    name = UnicodeAttribute()
    signal_id = UnicodeAttribute()
    payload = UnicodeAttribute()
    received_at = UnicodeAttribute()
    consumed_by = UnicodeAttribute(null=True)


RUN_ATTRIBUTES = RunItem.get_attributes()

# --- records -> items -------------------------------------------------------------------


def run_to_item(run: RunRecord, shards: int) -> dict[str, Any]:
    item = RunItem(
        pk=run_pk(run.run_id),
        sk=RUN_SK,
        run_id=run.run_id,
        workflow=run.workflow,
        version=run.version,
        status=run.status.value,
        input=run.input,
        input_hash=run.input_hash,
        created_at=run.created_at,
        updated_at=run.updated_at,
        output=run.output,
        error=ErrorMap(**run.error.to_dict()) if run.error else None,
        requested_by=run.requested_by,
        idempotency_key=run.idempotency_key,
        needs_attention=run.needs_attention,
        lease_owner=run.lease_owner,
        lease_until=run.lease_until,
        fence=run.fence,
        takeovers=run.takeovers,
        takeover_mark=run.takeover_mark,
        inbox=run.inbox,
        cancel_requested=run.cancel_requested,
        cancel_reason=run.cancel_reason,
        cancel_compensate=run.cancel_compensate,
        due_at=run.due_at,
        purge_at=run.purge_at,
        continued_from=run.continued_from,
        due_shard=due_shard(run.run_id, shards) if run.due_at else None,
        list_pk=list_pk(run.workflow),
        list_sk=list_sk(run.status.value, run.updated_at),
        attention_pk=ATTENTION_PK if run.needs_attention else None,
    )
    return item.serialize()


def step_to_item(step: StepRecord) -> dict[str, Any]:
    item = StepItem(
        pk=run_pk(step.run_id),
        sk=STEP_PREFIX + step.position,
        run_id=step.run_id,
        position=step.position,
        name=step.name,
        kind=step.kind.value,
        status=step.status.value,
        updated_at=step.updated_at,
        step_version=step.step_version,
        attempt=step.attempt,
        attempts=[AttemptMap(**a.to_dict()) for a in step.attempts] or None,
        output=step.output,
        error_type=step.error_type,
        error_class=step.error_class,
        error_summary=step.error_summary,
        checkpoint=CheckpointMap(**step.checkpoint) if step.checkpoint else None,
        idempotency_key=step.idempotency_key,
        refs=[RefMap(**r) for r in step.refs] or None,
        wake_at=step.wake_at,
        expires_at=step.expires_at,
        token_nonce=step.token_nonce,
        token_hash=step.token_hash,
        detail=json.dumps(step.detail, separators=(",", ":")) if step.detail else None,
    )
    return item.serialize()


def signal_to_item(signal: SignalRecord) -> dict[str, Any]:
    item = SignalItem(
        pk=run_pk(signal.run_id),
        sk=f"{SIGNAL_PREFIX}{signal.name}#{signal.signal_id}",
        run_id=signal.run_id,
        name=signal.name,
        signal_id=signal.signal_id,
        payload=signal.payload,
        received_at=signal.received_at,
        consumed_by=signal.consumed_by,
    )
    return item.serialize()


# --- items -> records -------------------------------------------------------------------


def item_to_run(raw: dict[str, Any]) -> RunRecord:
    m = RunItem.from_raw_data(raw)
    return RunRecord(
        run_id=m.run_id,
        workflow=m.workflow,
        version=int(m.version),
        status=RunStatus(m.status),
        input=m.input,
        input_hash=m.input_hash,
        created_at=m.created_at,
        updated_at=m.updated_at,
        output=m.output,
        error=RunError(m.error.type, m.error.message, bool(m.error.retryable)) if m.error else None,
        requested_by=m.requested_by,
        idempotency_key=m.idempotency_key,
        needs_attention=bool(m.needs_attention),
        lease_owner=m.lease_owner,
        lease_until=m.lease_until,
        fence=int(m.fence or 0),
        takeovers=int(m.takeovers or 0),
        takeover_mark=int(m.takeover_mark or 0),
        inbox=int(m.inbox or 0),
        cancel_requested=bool(m.cancel_requested),
        cancel_reason=m.cancel_reason,
        cancel_compensate=bool(m.cancel_compensate),
        due_at=m.due_at,
        purge_at=int(m.purge_at) if m.purge_at is not None else None,
        continued_from=m.continued_from,
    )


def item_to_step(raw: dict[str, Any]) -> StepRecord:
    m = StepItem.from_raw_data(raw)
    return StepRecord(
        run_id=m.run_id,
        position=m.position,
        name=m.name,
        kind=StepKind(m.kind),
        status=StepStatus(m.status),
        updated_at=m.updated_at,
        step_version=int(m.step_version or 1),
        attempt=int(m.attempt or 0),
        attempts=[Attempt.from_dict(a.as_dict()) for a in (m.attempts or [])],
        output=m.output,
        error_type=m.error_type,
        error_class=m.error_class,
        error_summary=m.error_summary,
        checkpoint=(
            {"payload_version": int(m.checkpoint.payload_version), "state": m.checkpoint.state}
            if m.checkpoint
            else None
        ),
        idempotency_key=m.idempotency_key,
        refs=[{"kind": r.kind, "value": r.value} for r in (m.refs or [])],
        wake_at=m.wake_at,
        expires_at=m.expires_at,
        token_nonce=m.token_nonce,
        token_hash=m.token_hash,
        detail=json.loads(m.detail) if m.detail else None,
    )


def item_to_signal(raw: dict[str, Any]) -> SignalRecord:
    m = SignalItem.from_raw_data(raw)
    return SignalRecord(
        run_id=m.run_id,
        name=m.name,
        signal_id=m.signal_id,
        payload=m.payload,
        received_at=m.received_at,
        consumed_by=m.consumed_by,
    )


def run_attribute_value(name: str, value: Any) -> dict[str, Any]:
    """One run field as a low-level AttributeValue, via the model's attribute type."""
    attr = RUN_ATTRIBUTES[name]
    if name == "error" and value is not None and not isinstance(value, ErrorMap):
        data = value.to_dict() if isinstance(value, RunError) else dict(value)
        value = ErrorMap(**data)
    if name == "status" and isinstance(value, RunStatus):
        value = value.value
    return {attr.attr_type: attr.serialize(value)}
