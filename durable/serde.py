"""Encoding of inputs, step results and checkpoints as JSON text.

Values are encoded with the callable's return annotation through a cached pydantic
``TypeAdapter`` and decoded straight back, so the first execution hands the workflow the
same value a replay will. Without an annotation a value must already be plain JSON.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from durable.errors import InvalidInput

NO_ANNOTATION: Any = inspect.Signature.empty


@lru_cache(maxsize=1024)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def adapter_for(annotation: Any) -> TypeAdapter[Any] | None:
    """A cached adapter, or None when values are plain JSON (no or ``Any`` annotation)."""
    if annotation is NO_ANNOTATION or annotation is Any or annotation is None.__class__:
        return None
    try:
        return _adapter(annotation)
    except TypeError:  # unhashable annotation objects: build one uncached
        return TypeAdapter(annotation)


def dumps_plain(value: Any) -> str:
    """Strict JSON: no NaN, no fallback for unknown types (fails loudly, not lossy)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(value: Any, annotation: Any = NO_ANNOTATION) -> str:
    adapter = adapter_for(annotation)
    if adapter is None:
        try:
            return dumps_plain(value)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"result of type {type(value).__name__} is not plain JSON ({e}); annotate the "
                "function's return type (for example a pydantic model) so it can be encoded"
            ) from e
    # By alias, as a sender writes the model; decoding accepts aliases and field names, so
    # a model round-trips whatever its alias settings (it must decode on every replay).
    return adapter.dump_json(value, by_alias=True).decode()


def decode(text: str | None, annotation: Any = NO_ANNOTATION) -> Any:
    if text is None:
        return None
    adapter = adapter_for(annotation)
    if adapter is None:
        return json.loads(text)
    return adapter.validate_json(text, by_alias=True, by_name=True)


def canonical_json(value: Any) -> str:
    """Key-sorted compact JSON: equal inputs hash equal (idempotent start).

    NaN and infinities (``1e999`` parses to inf) are refused: they are not JSON and would
    be stored as something else than what was sent.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def validate_input(value: Any, annotation: Any, workflow: str) -> str:
    """Validate a start input against the workflow's parameter; return its JSON text."""
    adapter = adapter_for(annotation)
    if adapter is None:
        try:
            return canonical_json(value)
        except (TypeError, ValueError) as e:
            raise InvalidInput(f"input of workflow {workflow!r} is not JSON: {e}") from e
    try:
        validated = adapter.validate_python(value)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        raise InvalidInput(
            f"invalid input for workflow {workflow!r}: field {where!r}: {first['msg']} "
            f"({e.error_count()} error(s)); send an input matching the workflow's parameter type",
            field=where,
        ) from e
    try:
        return canonical_json(json.loads(adapter.dump_json(validated, by_alias=True)))
    except ValueError as e:  # an infinity or NaN that validation let through
        raise InvalidInput(
            f"input of workflow {workflow!r} holds a number JSON cannot carry "
            "(NaN or infinity, e.g. 1e999)",
            field="input",
        ) from e
