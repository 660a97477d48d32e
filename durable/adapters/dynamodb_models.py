"""The ledger's item layout, declared as pynamodb models.

These models are the layout's declaration: attribute names and types, as the DynamoDB
console shows them. The engine does not use them at run time: the hand-written codec in
``durable.adapters.dynamodb_items`` is about ten times faster and keeps pynamodb out of
the Lambda package (docs/architecture.md, "What a deployed function imports"), and
tests/contract/test_item_layout.py holds every item it writes equal to these models'
round trip. Import them to read the ledger with pynamodb in your own tools
(``pip install 'durable-lambda[pynamodb]'``). The adapter sends its own requests with the
low-level client, because pynamodb cannot pass ``ReturnValuesOnConditionCheckFailure``
(first-writer-wins adoption needs it).
"""

from __future__ import annotations

from typing import Any

from pynamodb.attributes import (
    BooleanAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.models import Model


class ErrorMap(MapAttribute[str, Any]):
    type = UnicodeAttribute()
    message = UnicodeAttribute()
    retryable = BooleanAttribute(default=False)
    position = UnicodeAttribute(null=True)


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


class OperationMap(MapAttribute[str, Any]):
    action = UnicodeAttribute()
    at = UnicodeAttribute()
    by = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)
    detail = UnicodeAttribute(null=True)


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
    # A large input is in an item of its own (InputItem), named by input_item.
    input = UnicodeAttribute(null=True)
    input_item = UnicodeAttribute(null=True)
    input_hash = UnicodeAttribute()
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    output = UnicodeAttribute(null=True)
    error = ErrorMap(null=True)
    requested_by = UnicodeAttribute(null=True)
    idempotency_key = UnicodeAttribute(null=True)
    needs_attention = BooleanAttribute(default=False)
    waiting_for = UnicodeAttribute(null=True)
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
    # The TTL its other items carry (a declared lifetime, durable.core.lifetime).
    items_purge_at = NumberAttribute(null=True)
    continued_from = UnicodeAttribute(null=True)
    forked_from = UnicodeAttribute(null=True)
    parent = UnicodeAttribute(null=True)
    children = NumberAttribute(null=True)
    deferrals = NumberAttribute(null=True)
    compensated = BooleanAttribute(null=True)
    data_key = UnicodeAttribute(null=True)
    operations = ListAttribute(of=OperationMap, null=True)
    usage = MapAttribute(null=True)  # type: ignore[var-annotated]  # name -> number
    gate = UnicodeAttribute(null=True)
    queued_at = UnicodeAttribute(null=True)
    start_at = UnicodeAttribute(null=True)
    # Open sleeps (durable.core.sleeps): position -> {name, wake_at, at, fence}.
    sleeps = MapAttribute(null=True)  # type: ignore[var-annotated]
    woke_at = UnicodeAttribute(null=True)  # the latest claim's time (durable.core.sleeps)
    # ctx.set_progress's last value (durable.core.progress): {done, total?, note?, at}.
    progress = MapAttribute(null=True)  # type: ignore[var-annotated]
    # Index keys, derived from the fields above by this adapter.
    due_shard = UnicodeAttribute(null=True)
    listing_pk = UnicodeAttribute(null=True)
    list_sk = UnicodeAttribute(null=True)
    # The first listing index's partition (``WF#<workflow>``), on items written before
    # the sharded ``listing-index``: ``durable.adapters.listing_migration`` moves them.
    list_pk = UnicodeAttribute(null=True)
    attention_pk = UnicodeAttribute(null=True)


class InputItem(_Base):
    """A run's large input (sort key ``INPUT#<created_at>``), written once before its run
    item (``durable.adapters.dynamodb_items.input_apart``)."""

    run_id = UnicodeAttribute()
    input = UnicodeAttribute()
    input_hash = UnicodeAttribute()
    updated_at = UnicodeAttribute()  # the run's creation: the purge's clock
    purge_at = NumberAttribute(null=True)  # TTL of a declared lifetime (durable.core.lifetime)


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
    fence = NumberAttribute(default=0)
    purge_at = NumberAttribute(null=True)  # TTL of a declared lifetime (durable.core.lifetime)


class SignalItem(_Base):
    run_id = UnicodeAttribute()
    name = UnicodeAttribute()
    signal_id = UnicodeAttribute()
    payload = UnicodeAttribute()
    received_at = UnicodeAttribute()
    consumed_by = UnicodeAttribute(null=True)
    # Keyed signals only: never the key itself (it may be a secret), only hashes of it
    # (also in the sort key) and of the payload (tells a retry from a reused key).
    key_hash = UnicodeAttribute(null=True)
    payload_hash = UnicodeAttribute(null=True)
    seq = NumberAttribute(default=0)
    sent_by = UnicodeAttribute(null=True)
    purge_at = NumberAttribute(null=True)  # TTL of a declared lifetime (durable.core.lifetime)
