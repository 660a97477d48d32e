"""Helpers shared by the DynamoDB adapters: error translation, expressions, cursors."""

from __future__ import annotations

import base64
import json
from typing import Any, NoReturn

from durable.core.model import FINAL_STEP_STATUSES, StepRecord, StepStatus
from durable.core.ports import RunGuard
from durable.core.retry import classify
from durable.core.stored_bytes import TokenRefused
from durable.errors import InvalidCursor, StorageError


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def storage_error(error: Exception, what: str) -> NoReturn:
    """Translate a botocore error into ``StorageError`` (retryable by the taxonomy)."""
    if isinstance(error, TokenRefused):  # the stored-bytes rule's refusal: its own message
        raise error
    raise StorageError(
        f"{what} failed: {error}", retryable=classify(error) == "retryable"
    ) from error


class Expr:
    """Builds expression attribute names/values with stable placeholders."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attr: str) -> str:
        key = f"#{attr}"
        self.names[key] = attr
        return key

    def value(self, raw: dict[str, Any], hint: str) -> str:
        key = f":v{len(self.values)}_{hint}"
        self.values[key] = raw
        return key

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = self.names
        if self.values:
            out["ExpressionAttributeValues"] = self.values
        return out


def s(text: str) -> dict[str, Any]:
    return {"S": text}


def n(number: int) -> dict[str, Any]:
    return {"N": str(number)}


def cursor_text(data: Any) -> str:
    """A cursor's form on the wire: compact JSON in URL-safe base64 (a query string's)."""
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def cursor_data(cursor: str) -> Any:
    """What ``cursor_text`` wrote; ``InvalidCursor`` for text it cannot have written."""
    try:
        return json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidCursor(BAD_CURSOR) from e


def encode_cursor(key: dict[str, Any] | None) -> str | None:
    return cursor_text(key) if key else None


BAD_CURSOR = "cursor is not one this listing returned; start again without it"


def decode_cursor(
    cursor: str | None, keys: tuple[str, ...], expect: dict[str, str]
) -> dict[str, Any] | None:
    """The start key a cursor encodes, checked to be one a query of this index and
    partition could have returned (``keys`` its key attributes, all strings; ``expect``
    the values it must hold): a crafted cursor is ``InvalidCursor``, never a request
    DynamoDB refuses."""
    if not cursor:
        return None
    data = cursor_data(cursor)
    if not isinstance(data, dict) or set(data) != set(keys):
        raise InvalidCursor(BAD_CURSOR)
    for name, value in data.items():
        text = value.get("S") if isinstance(value, dict) and len(value) == 1 else None
        if not isinstance(text, str) or not 0 < len(text) <= 1024:
            raise InvalidCursor(BAD_CURSOR)
        if name in expect and text != expect[name]:
            raise InvalidCursor(BAD_CURSOR)
    return data


def guard_condition(e: Expr, guard: RunGuard) -> str:
    """``durable.core.leases.guard_holds`` as a condition on the run item."""
    parts = [
        f"{e.name('fence')} = {e.value(n(guard.fence), 'gf')}",
        f"{e.name('lease_owner')} = {e.value(s(guard.owner), 'go')}",
    ]
    if guard.inbox is not None:
        parts.append(f"{e.name('inbox')} = {e.value(n(guard.inbox), 'gi')}")
    if guard.statuses:
        values = ", ".join(e.value(s(v), "gs") for v in guard.statuses)
        parts.append(f"{e.name('status')} IN ({values})")
    if guard.alive_at is not None:
        parts.append(f"{e.name('lease_until')} >= {e.value(s(guard.alive_at), 'ga')}")
    if guard.no_cancel:
        cr = e.name("cancel_requested")
        parts.append(f"(attribute_not_exists({cr}) OR {cr} = {e.value({'BOOL': False}, 'gc')})")
    return " AND ".join(parts)


def step_condition(e: Expr, step: StepRecord) -> str:
    """``durable.core.leases.step_replaceable`` as a condition on the stored item."""
    st, fence = e.name("status"), e.name("fence")
    finals = ", ".join(e.value(s(v), "fin") for v in FINAL_STEP_STATUSES)
    mine = e.value(n(step.fence), "sf")
    moved_on = ""
    if step.status == StepStatus.TIMED_OUT and step.expires_at is not None:
        # A timeout only of the expiry the writer saw (a heartbeat may have moved it on).
        exp = e.name("expires_at")
        moved_on = (
            f" AND (attribute_not_exists({exp}) OR {exp} <= {e.value(s(step.expires_at), 'exp')})"
        )
    return (
        f"attribute_not_exists(sk) OR (NOT ({st} IN ({finals})) AND "
        f"(attribute_not_exists({fence}) OR {fence} <= {mine}){moved_on})"
    )
