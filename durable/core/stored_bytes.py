"""The last check before bytes leave the process: no stored byte holds a live callback token.

``WriteBoundary`` scrubs the values of the ledger's records the engine knows about. This
is the rule one level lower, where an adapter hands bytes to a store: every attribute of
every item written to every table (the ledger, the effect and nonce records of the
idempotency table, Powertools' own records, any table added later) and every object put
in the payload store. It does not depend on anybody having listed a field, so a field, a
table or a write method added later is covered the day it is added. The stores apply it
at their own entry points: the DynamoDB client's request hook
(``durable.adapters.item_boundary``), the memory ledger and stores, the payload stores.

What a token found there gets depends on where it is:

* **In a value** (a string anywhere in an item's non-key attributes, nested maps and lists
  included): redacted to ``REDACTED_TOKEN``, as ``WriteBoundary`` does, and the write goes
  on. A reader of the table, a backup or an export finds nothing to answer a wait with.
* **In a key, a name or an id** (a table's key attributes and the attributes its indexes
  are keyed by, an effect's key, a nonce, an attribute's own name): refused with
  ``TokenInKey``, nothing written. Redacting it would write another item than the one
  asked for, and the caller would look for the old key on its next replay and not find
  it: a silent fork is worse than a clear error.
* **In bytes** (a payload object, a binary attribute): refused with ``TokenInObject``.
  Redacting bytes could corrupt them (a compressed or encrypted value), and an object is
  addressed by its SHA-256, which the engine checks when it reads it back. The values in
  an object were scrubbed before they were hashed, so a token here is a bug upstream, and
  storing it would be worse than failing the write.

Both errors are non-retryable ``StorageError``: the same request fails the same way
every time, so the engine fails the step or run for good with the message, which names
the store, the attribute and the way out.

The scan is the one ``scrub_text`` makes (a search for a token's tail, in texts that
contain a dot); bytes are searched for the same shape without being decoded. A token
inside an encoding (base64, a compressed blob) is not seen here: values are scrubbed
before a codec encodes them.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import Any

from durable.core.token_shape import (
    REDACTED_TOKEN,
    TOKEN_BYTES,
    bytes_hold_token,
    scrub_text,
)
from durable.errors import StorageError

__all__ = [
    "REDACTED_TOKEN",
    "TOKEN_BYTES",
    "TokenInKey",
    "TokenInObject",
    "TokenRefused",
    "bytes_hold_token",
    "check_key",
    "check_object",
    "holds_token",
    "kept",
]


_HOW = (
    "Keep callback tokens out of names, ids and keys: hand a callback URL to another run "
    "as a secret (SecretStr) in its input, and give names and keys values of your own."
)


class TokenRefused(StorageError):
    """A write was refused because it would store a live callback token that cannot be
    redacted where it is (not retryable: the same write fails the same way)."""

    def __init__(self, message: str, *, store: str, attribute: str) -> None:
        super().__init__(message, retryable=False)
        self.store = store
        self.attribute = attribute


class TokenInKey(TokenRefused):
    """A key, name or id of a stored item holds a live callback token."""

    def __init__(self, store: str, attribute: str) -> None:
        super().__init__(
            f"{store}: {attribute} holds a live callback token; it is a key (or a name) of "
            f"the stored item, so it is refused, not redacted (a redacted key would name "
            f"another item). {_HOW}",
            store=store,
            attribute=attribute,
        )


class TokenInObject(TokenRefused):
    """Bytes about to be stored (a payload object, a binary attribute) hold a live token."""

    def __init__(self, store: str, attribute: str) -> None:
        super().__init__(
            f"{store}: the bytes of {attribute} hold a live callback token; bytes are "
            "refused, not redacted (an object is checked against its SHA-256, a binary "
            "value may be compressed). Values are scrubbed before they are encoded, so "
            f"this is a bug in whatever built the bytes. {_HOW}",
            store=store,
            attribute=attribute,
        )


def holds_token(text: str) -> bool:
    """Whether ``text`` holds a token (anywhere in it)."""
    return scrub_text(text) is not text


def check_key(store: str, attribute: str, value: object) -> None:
    """Refuse (``TokenInKey``) a key, name or id that holds a token; anything else passes."""
    if isinstance(value, str):
        if holds_token(value):
            raise TokenInKey(store, attribute)
    elif isinstance(value, bytes | bytearray | memoryview):
        if bytes_hold_token(value):
            raise TokenInKey(store, attribute)
    elif kept(value, store=store) is not value:  # a composite key: any token in it
        raise TokenInKey(store, attribute)


def check_object(store: str, key: str, body: bytes | bytearray | memoryview) -> None:
    """Refuse an object whose key (``TokenInKey``) or bytes (``TokenInObject``) hold a token."""
    check_key(store, "the object's key", key)
    if bytes_hold_token(body):
        raise TokenInObject(store, f"object {key}")


# A dataclass's field names and a getter of all their values in one call, by type
# (``dataclasses.fields`` and a ``getattr`` per field cost more than the scan itself: the
# memory ledger walks every record it stores). None: not a dataclass.
_FieldsSpec = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]
_FIELDS: dict[type, _FieldsSpec | None] = {}
# Types whose values hold no text, passed over at a set lookup: these, and every type
# met that is none of the walked ones (an enum that is not a ``str``, a datetime).
_NO_TEXT: set[type] = {type(None), int, float, bool}
_SEQUENCES = (list, tuple)
_BYTES = (bytes, bytearray, memoryview)


def _fields(kind: type) -> _FieldsSpec | None:
    try:
        return _FIELDS[kind]
    except KeyError:
        pass
    spec: _FieldsSpec | None = None
    if dataclasses.is_dataclass(kind):
        names = tuple(f.name for f in dataclasses.fields(kind))
        if len(names) > 1:
            spec = (names, operator.attrgetter(*names))
        elif names:  # attrgetter of one name returns the value, not a tuple of one
            one = operator.attrgetter(names[0])
            spec = (names, lambda value: (one(value),))
    _FIELDS[kind] = spec
    return spec


def kept(value: Any, *, store: str, keys: frozenset[str] = frozenset()) -> Any:
    """``value`` as it may be stored: every token in a text redacted, wherever it is (a
    dataclass's fields, a dict's keys and values, a list's items, nested records), with
    ``TokenInKey`` for a token in one of the top-level fields named in ``keys`` and
    ``TokenInObject`` for one in bytes.

    Nothing is changed in place: a value without a token is returned itself (no copy, the
    common case), one with a token as a copy (a shallow copy of a record, the fields that
    held one replaced), so a caller's record keeps what it passed.
    """
    kind = type(value)
    if kind in _NO_TEXT:
        return value
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return _kept_dict(value, store) if value else value
    if isinstance(value, _SEQUENCES):
        return _kept_items(value, store) if value else value
    if isinstance(value, _BYTES):
        if bytes_hold_token(value):
            raise TokenInObject(store, "a binary value")
        return value
    spec = _fields(kind)
    if spec is None:  # an enum, a datetime, a set of numbers: no text of its own
        _NO_TEXT.add(kind)
        return value
    return _kept_fields(value, spec, store, keys)


def _kept_fields(value: Any, spec: _FieldsSpec, store: str, keys: frozenset[str]) -> Any:
    names, values = spec
    changed: dict[str, Any] | None = None
    for name, old in zip(names, values(value), strict=True):
        if type(old) in _NO_TEXT:
            continue
        if isinstance(old, str):
            if "." not in old:  # every token has two dots: most fields end here
                continue
            if name in keys:
                check_key(store, name, old)
                continue
            new = scrub_text(old)
        elif name in keys:
            check_key(store, name, old)
            continue
        elif not old:  # an empty list or dict
            continue
        else:
            new = kept(old, store=store)
        if new is not old:
            changed = changed or {}
            changed[name] = new
    if changed is None:
        return value
    # A shallow copy, then the new fields set past ``frozen`` and ``init=False`` alike.
    out = copy.copy(value)
    for name, new in changed.items():
        object.__setattr__(out, name, new)
    return out


def _kept_items(value: list[Any] | tuple[Any, ...], store: str) -> Any:
    out: list[Any] | None = None
    for position, item in enumerate(value):
        if type(item) is str and "." not in item:
            continue
        new = kept(item, store=store)
        if new is not item:
            out = list(value) if out is None else out
            out[position] = new
    return value if out is None else type(value)(out)


def _kept_dict(value: Mapping[Any, Any], store: str) -> Any:
    out: dict[Any, Any] | None = None
    for position, (key, item) in enumerate(value.items()):
        new_key = scrub_text(key) if isinstance(key, str) else key
        new_item = item if type(item) is str and "." not in item else kept(item, store=store)
        if out is None and (new_key is not key or new_item is not item):
            out = dict(list(value.items())[:position])
        if out is not None:
            out[new_key] = new_item
    return value if out is None else out
