"""Every DynamoDB request a client sends crosses the stored-bytes rule first.

``install`` registers a handler on a botocore DynamoDB client's ``before-parameter-build``
event: it runs on every request of that client, before the request is serialized, whoever
built it (the ledger's codec, the effect and nonce stores, Powertools' idempotency layer,
a method added later). The rule is ``durable.core.stored_bytes``'s; here it is applied to
DynamoDB's request shapes:

* every ``AttributeValue`` of an ``Item``, of ``ExpressionAttributeValues``, of the legacy
  ``AttributeUpdates`` and of the
  items nested in ``TransactItems`` and ``RequestItems`` is walked (``S``, ``SS``, ``M``,
  ``L``, ``B``, ``BS``; numbers and booleans hold no text): a token in a string is
  redacted in place, so the request leaves clean; a token in bytes is refused
  (``TokenInObject``);
* a token in a ``Key``, in an item's key attributes (the tables' keys and the attributes
  their indexes are keyed by: ``KEY_ATTRIBUTES``), in a value an update expression
  assigns to one of them, in an attribute's name (``ExpressionAttributeNames``, an item's
  top-level names) is refused (``TokenInKey``): the handler raises, nothing is sent;
* PartiQL (``ExecuteStatement``, ``BatchExecuteStatement``, ``ExecuteTransaction``):
  which parameter is a key cannot be told without parsing the statement, so a token in a
  statement or any of its parameters is refused.

Reads (``GetItem``, ``Query``, ...) store nothing and pass untouched; any operation not
known to be a read is walked (fail safe: an operation added to the API later is checked).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from durable.adapters.ledger_layout import LEDGER_INDEXES
from durable.core.stored_bytes import (
    TokenInKey,
    TokenInObject,
    bytes_hold_token,
    check_key,
    holds_token,
)
from durable.core.token_shape import scrub_text

# The key attributes of every table this library writes: the ledger's (``pk``/``sk``) and
# its indexes' (``ledger_layout``), the idempotency table's (``id``, Powertools' schema).
# One set for every table: a client does not know which table a name is, and an
# attribute of one of these names that is not a key elsewhere holds no token anyway.
KEY_ATTRIBUTES: frozenset[str] = frozenset(
    {"pk", "sk", "id"}
    | {key["AttributeName"] for index in LEDGER_INDEXES for key in index["KeySchema"]}
)

# Operations that store nothing; every other one is walked.
_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
_READ_PREFIXES = ("Describe", "List", "Get")

_HANDLER_ID = "durable-stored-bytes"
# AttributeValue types that hold no text.
_NO_TEXT = frozenset({"N", "NS", "BOOL", "NULL"})

Client = TypeVar("Client")


def install(client: Client) -> Client:
    """Register the rule on ``client`` (once: a second install is a no-op) and return it.

    A ``LazyClient`` (``durable.adapters.aws_services``) is not made for it: the rule is
    installed when it is made. A client without botocore's events (a test's fake) is
    returned as it is."""
    # Looked up on the type: a botocore client answers an unknown attribute with an event.
    when_made: Callable[[Any, Callable[[Any], Any]], None] | None = getattr(
        type(client), "when_made", None
    )
    if when_made is not None:
        when_made(client, install)
        return client
    meta = getattr(client, "meta", None)
    if meta is None:
        return client
    meta.events.register("before-parameter-build.dynamodb", _before_send, unique_id=_HANDLER_ID)
    return client


def _before_send(params: dict[str, Any], model: Any, **_: Any) -> None:
    name = getattr(model, "name", "")
    if name in _READS or name.startswith(_READ_PREFIXES):
        return
    check_request(params)


def check_request(params: dict[str, Any], table: str | None = None) -> None:
    """Apply the rule to a write request's parameters (in place), whatever its operation:
    every part of the request shapes above that is present is walked."""
    store = f"DynamoDB table {params.get('TableName') or table or '?'}"
    _names(params.get("ExpressionAttributeNames"), store)
    keyed = _assigned_keys(params)
    values = params.get("ExpressionAttributeValues")
    if isinstance(values, dict):
        for placeholder, value in values.items():
            if placeholder in keyed:
                _key_value(store, keyed[placeholder], value)
            else:
                _value(value, store, placeholder)
    if isinstance(params.get("Key"), dict):
        _key(params["Key"], store)
    if isinstance(params.get("Item"), dict):
        _item(params["Item"], store)
    # UpdateItem's legacy form: {name: {"Action": ..., "Value": AttributeValue}}; a value
    # given to a key attribute (an index's) is refused as an item's is.
    for name, update in (params.get("AttributeUpdates") or {}).items():
        if "." in name:
            check_key(store, "an attribute name of the update", name)
        if isinstance(update, dict) and "Value" in update:
            if name in KEY_ATTRIBUTES:
                _key_value(store, f"key attribute {name}", update["Value"])
            else:
                _value(update["Value"], store, name)
    # (``Expected``, the legacy condition, stores nothing: its values are only compared.)
    for entry in params.get("TransactItems") or ():
        for body in entry.values() if isinstance(entry, dict) else ():
            if isinstance(body, dict):
                check_request(body)
    for name, requests in (params.get("RequestItems") or {}).items():
        for request in requests if isinstance(requests, list) else ():
            for body in request.values() if isinstance(request, dict) else ():
                if isinstance(body, dict):
                    check_request(body, name)
    _statement(params, store)
    for batch in ("Statements", "TransactStatements"):
        for statement in params.get(batch) or ():
            if isinstance(statement, dict):
                _statement(statement, store)


def _names(names: Any, store: str) -> None:
    for placeholder, name in (names or {}).items():
        check_key(store, f"attribute name {placeholder}", name)


def _key(key: dict[str, Any], store: str) -> None:
    for name, value in key.items():
        check_key(store, "an attribute name of the key", name)
        _key_value(store, f"key attribute {name}", value)


def _item(item: dict[str, Any], store: str) -> None:
    for name, value in item.items():
        if "." in name:  # a name without a dot holds no token (the common case, no call)
            check_key(store, "an attribute name of the item", name)
        if name in KEY_ATTRIBUTES:
            _key_value(store, f"key attribute {name}", value)
        else:
            _value(value, store, name)


def _key_value(store: str, attribute: str, value: Any) -> None:
    """Refuse a token anywhere in ``value`` (an AttributeValue of a key)."""
    if not isinstance(value, dict):
        return
    for kind, raw in value.items():
        if kind in ("S", "B"):
            check_key(store, attribute, raw)
        elif kind in ("SS", "BS", "L") and isinstance(raw, list):
            for item in raw:
                _key_value(store, attribute, item if kind == "L" else {kind[0]: item})
        elif kind == "M" and isinstance(raw, dict):
            for name, item in raw.items():
                check_key(store, attribute, name)
                _key_value(store, attribute, item)


def _value(value: Any, store: str, attribute: str) -> None:
    """Redact every token in the strings of ``value`` (an AttributeValue), in place."""
    if not isinstance(value, dict):
        return
    for kind, raw in value.items():
        if kind == "S" and isinstance(raw, str):
            if "." in raw:  # a text without a dot holds no token: no call (most of them)
                clean = scrub_text(raw)
                if clean is not raw:
                    value["S"] = clean
        elif kind in _NO_TEXT:
            continue
        elif kind == "M" and isinstance(raw, dict):
            for name in [n for n in raw if "." in n and holds_token(n)]:
                raw[scrub_text(name)] = raw.pop(name)
            for item in raw.values():
                _value(item, store, attribute)
        elif kind == "L" and isinstance(raw, list):
            for item in raw:
                _value(item, store, attribute)
        elif kind == "SS" and isinstance(raw, list):
            clean_set = [scrub_text(text) for text in raw]
            if any(new is not old for new, old in zip(clean_set, raw, strict=True)):
                # Two texts may now be equal: a set with duplicates is refused by DynamoDB.
                raw[:] = list(dict.fromkeys(clean_set))
        elif kind == "B":
            _bytes(raw, store, attribute)
        elif kind == "BS" and isinstance(raw, list):
            for item in raw:
                _bytes(item, store, attribute)


def _bytes(raw: Any, store: str, attribute: str) -> None:
    # botocore takes a blob as bytes or as a text it encodes: both are checked.
    held = holds_token(raw) if isinstance(raw, str) else bytes_hold_token(raw)
    if held:
        raise TokenInObject(store, f"binary attribute {attribute}")


def _statement(params: dict[str, Any], store: str) -> None:
    statement = params.get("Statement")
    if isinstance(statement, str) and holds_token(statement):
        raise TokenInKey(store, "a PartiQL statement")
    for parameter in params.get("Parameters") or ():
        _key_value(store, "a PartiQL parameter", parameter)


# An update expression's clauses: the keyword, then its actions up to the next keyword.
_CLAUSE = re.compile(r"(?<![#:\w])(SET|REMOVE|ADD|DELETE)(?![\w])", re.IGNORECASE)
_PLACEHOLDER = re.compile(r":[A-Za-z0-9_]+")


def _assigned_keys(params: dict[str, Any]) -> dict[str, str]:
    """The value placeholders an update expression assigns to a key attribute (an index's
    key: ``SET list_sk = :v``), each with the attribute's name."""
    expression = params.get("UpdateExpression")
    if not isinstance(expression, str):
        return {}
    names = params.get("ExpressionAttributeNames") or {}
    out: dict[str, str] = {}
    parts = _CLAUSE.split(expression)
    for keyword, body in zip(parts[1::2], parts[2::2], strict=True):
        if keyword.upper() not in ("SET", "ADD"):
            continue
        for action in _top_level(body):
            split = "=" if keyword.upper() == "SET" else " "
            target, _, source = action.strip().partition(split)
            attribute = names.get(target.strip(), target.strip())
            if attribute in KEY_ATTRIBUTES:
                for placeholder in _PLACEHOLDER.findall(source):
                    out[placeholder] = f"key attribute {attribute}"
    return out


def _top_level(body: str) -> list[str]:
    """``body`` split at its commas outside parentheses (``if_not_exists(a, :b)``)."""
    actions, depth, start = [], 0, 0
    for i, char in enumerate(body):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            actions.append(body[start:i])
            start = i + 1
    actions.append(body[start:])
    return actions
