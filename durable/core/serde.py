"""Encoding of inputs, step results and checkpoints as JSON text.

Values are encoded with the callable's return annotation through a cached pydantic
``TypeAdapter`` and decoded straight back, so the first execution hands the workflow the
same value a replay will. Without an annotation a value must already be plain JSON.
A call given a custom codec (``serdes=``) passes a ``durable.core.codecs.Coded`` in the
annotation's place: its codec encodes and decodes the value, with no sealing.

Callback tokens: the text this module writes is scanned for them where it is stored
(``durable.core.write_boundary``), which reads every token plain JSON holds. A value a
function writes (a codec, a custom pydantic serializer) is scrubbed before it is written
(``durable.core.tokens.scrub_value``): such a function may write a token in a form no scan
can read.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from pydantic import Secret, SecretBytes, SecretStr, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError
from pydantic_core import to_json

from durable.core.codecs import Coded
from durable.core.secrets import KEY, SEALED, Sealer, SecretsNeedKeys, is_sealed, masked, transform
from durable.core.tokens import scrub_value
from durable.errors import InvalidInput

NO_ANNOTATION: Any = inspect.Signature.empty


@lru_cache(maxsize=1024)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def adapter_for(annotation: Any) -> TypeAdapter[Any] | None:
    """A cached adapter, or None when values are plain JSON (no or ``Any`` annotation) or
    a codec's (``Coded``)."""
    if annotation is NO_ANNOTATION or annotation is Any or annotation is None.__class__:
        return None
    if isinstance(annotation, Coded):
        return None
    try:
        try:
            return _adapter(annotation)
        except TypeError:  # unhashable annotation objects: build one uncached
            return TypeAdapter(annotation)
    except PydanticSchemaGenerationError as e:
        # A RuntimeError, which a step would retry (running its body again) to the same
        # end: a TypeError is the caller's mistake, terminal, and says what to do.
        raise TypeError(
            f"values of {annotation!r} cannot be encoded: pydantic has no schema for it; "
            "give the call a codec (serdes=, a durable.Serdes), or make the type a pydantic "
            "model or a dataclass"
        ) from e


@lru_cache(maxsize=1024)
def _has_secrets(annotation: Any) -> bool:
    # The core schema names pydantic's secret classes wherever they appear (nested
    # models, lists, unions): a text search, once per annotation.
    return "pydantic.types.Secret" in repr(_adapter(annotation).core_schema)


# A serializer of the user's (``field_serializer``, ``PlainSerializer``...) shows in the core
# schema as a function: it may write a text in a form no scan can read (base64, say). So
# may a bytes field (``ser_json_bytes="base64"`` or ``"hex"``, a common way to keep an
# HTTP body): its value is scrubbed as bytes before pydantic encodes it.
_SERIALIZER_FUNCTIONS = ("'function-plain'", "'function-wrap'", "'type': 'bytes'")


@lru_cache(maxsize=1024)
def _has_serializers(annotation: Any) -> bool:
    schema = repr(_adapter(annotation).core_schema)
    return any(kind in schema for kind in _SERIALIZER_FUNCTIONS)


def has_serializers(annotation: Any) -> bool:
    """Whether values of ``annotation`` may be written by a function (a custom serializer,
    or a secret type's), whose output a scan of the JSON text cannot be relied on to read."""
    if adapter_for(annotation) is None:
        return False
    try:
        return _has_serializers(annotation)
    except TypeError:  # unhashable annotation: look every time
        schema = repr(TypeAdapter(annotation).core_schema)
        return any(kind in schema for kind in _SERIALIZER_FUNCTIONS)


def has_secrets(annotation: Any) -> bool:
    """Whether values of ``annotation`` may hold secret-typed fields (sealed when stored)."""
    if adapter_for(annotation) is None:
        return False
    try:
        return _has_secrets(annotation)
    except TypeError:  # unhashable annotation: look every time
        return "pydantic.types.Secret" in repr(TypeAdapter(annotation).core_schema)


def _seal_node(sealer: Sealer | None) -> Any:
    def seal(node: Any) -> Any:
        if not isinstance(node, SecretStr | SecretBytes | Secret):
            return None
        if sealer is None:
            raise SecretsNeedKeys(
                "a value has secret-typed fields (SecretStr, SecretBytes, Secret[...]) but no "
                "key service is configured to seal them: set DURABLE_KMS_KEY_ID"
            )
        if isinstance(node, SecretStr):
            raw = b"s" + node.get_secret_value().encode()
        elif isinstance(node, SecretBytes):
            raw = b"b" + node.get_secret_value()
        else:
            raw = b"j" + to_json(node.get_secret_value())
        if sealer.record is not None:  # a key of its own: the node says which
            return {SEALED: sealer.seal(raw), KEY: sealer.record}
        return {SEALED: sealer.seal(raw)}

    return seal


def _open_node(sealer: Sealer | None, keyed: Callable[[str], Sealer] | None) -> Any:
    def open_(node: Any) -> Any:
        if not is_sealed(node):
            return None
        record = node.get(KEY)
        opener = sealer if record is None else keyed(record) if keyed is not None else None
        if opener is None:
            raise SecretsNeedKeys("a stored value is sealed but this run has no data key")
        raw = opener.open(node[SEALED])
        kind, body = raw[:1], raw[1:]
        if kind == b"s":
            return body.decode()
        if kind == b"b":
            return body
        return json.loads(body)

    return open_


def dumps_plain(value: Any) -> str:
    """Strict JSON: no NaN, no fallback for unknown types (fails loudly, not lossy)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(value: Any, annotation: Any = NO_ANNOTATION, sealer: Sealer | None = None) -> str:
    """``value`` as JSON text by ``annotation``; secret-typed fields sealed by ``sealer``
    (``SecretsNeedKeys`` when there are some and no sealer). A codec's value is its
    ``serialize`` text (``SerdesError`` when it fails or is not JSON)."""
    if isinstance(annotation, Coded):
        return annotation.encode(value)
    adapter = adapter_for(annotation)
    if adapter is None:
        try:
            return dumps_plain(value)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"result of type {type(value).__name__} is not plain JSON ({e}); annotate the "
                "function's return type (for example a pydantic model) so it can be encoded"
            ) from e
    if has_serializers(annotation):
        # A serializer may hide a token from the scan of the text that follows (the write
        # boundary's): its value is scrubbed first. Secret-typed fields are sealed below,
        # and a token in one is how a run hands its callback URL on: kept.
        value = scrub_value(value, secrets=False)
    # By alias, as a sender writes the model; decoding accepts aliases and field names, so
    # a model round-trips whatever its alias settings (it must decode on every replay).
    if has_secrets(annotation):
        data = adapter.dump_python(value, mode="python", by_alias=True)
        return to_json(transform(data, _seal_node(sealer))).decode()
    return adapter.dump_json(value, by_alias=True).decode()


def decode(
    text: str | None,
    annotation: Any = NO_ANNOTATION,
    sealer: Sealer | None = None,
    keyed: Callable[[str], Sealer] | None = None,
) -> Any:
    """The value ``text`` encodes, sealed secrets opened by ``sealer`` (the run's key) or,
    for a node that carries its own key's record, by ``keyed(record)``."""
    if text is None:
        return None
    if isinstance(annotation, Coded):  # stored as the codec wrote it: nothing sealed
        return annotation.decode(text)
    adapter = adapter_for(annotation)
    if adapter is None:
        return json.loads(text)
    if SEALED in text:
        data = transform(json.loads(text), _open_node(sealer, keyed))
        return adapter.validate_python(data, by_alias=True, by_name=True)
    return adapter.validate_json(text, by_alias=True, by_name=True)


def type_reference(annotation: Any) -> str | None:
    """``module:qualname`` of a class another process can import (the API validating a
    callback's answer), or None (a generic alias, a class defined inside a function)."""
    module, qualname = (
        getattr(annotation, "__module__", None),
        getattr(annotation, "__qualname__", None),
    )
    if not isinstance(annotation, type) or not module or not qualname or "<" in qualname:
        return None
    return f"{module}:{qualname}"


def resolve_reference(reference: str) -> Any | None:
    """The class a ``type_reference`` names, or None when this process cannot import it."""
    import importlib

    module_name, _, qualname = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError):
        return None
    return target if isinstance(target, type) else None


_PLACEHOLDERS = {
    "boolean": "<true|false>",
    "integer": "<integer>",
    "number": "<number>",
    "string": "<text>",
    "null": "null",
}


def example_answer(annotation: Any) -> str:
    """The shape of a value of ``annotation``, each required field with a placeholder
    naming what goes there: ``{"approved": <true|false>, "note": <text>}``. What
    ``durable approve --result`` needs for a typed callback (the default answer ``true``
    is refused for a model), shown by the dev console's hint, a refused answer's 422 and
    the web console's Approve dialog. Deliberately not JSON: sent as it is, it is refused,
    so nobody approves with made-up values by pasting it. Any type: ``true``."""
    adapter = adapter_for(annotation)
    if adapter is None:
        return "true"
    try:
        schema = adapter.json_schema()
        return _shape(schema, schema.get("$defs", {}), frozenset())
    except Exception:  # a type with no JSON schema, or one this walk cannot follow
        return "<JSON>"


def _shape(schema: dict[str, Any], defs: dict[str, Any], seen: frozenset[str]) -> str:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:  # a model that holds itself: say so once, do not recurse
            return f"<{name}>"
        return _shape(defs.get(name, {}), defs, seen | {name})
    if schema.get("enum"):
        return "<" + "|".join(json.dumps(v) for v in schema["enum"]) + ">"
    if "const" in schema:
        return json.dumps(schema["const"])
    for choice in ("anyOf", "oneOf", "allOf"):
        options = schema.get(choice)
        if options:
            real = [o for o in options if o.get("type") != "null"] or options
            return _shape(real[0], defs, seen)
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return "{<key>: <value>}"
        fields = [
            f"{json.dumps(name)}: {_shape(properties[name], defs, seen)}"
            for name in schema.get("required", [])
            if name in properties
        ]
        return "{" + ", ".join(fields) + "}"
    if kind == "array":
        items = schema.get("items")
        return f"[{_shape(items, defs, seen)}, ...]" if isinstance(items, dict) else "[...]"
    if schema.get("format") == "password":  # a secret: a placeholder like any text
        return "<secret text>"
    return _PLACEHOLDERS.get(kind if isinstance(kind, str) else "", "<JSON>")


def check_value(value: Any, annotation: Any, what: str) -> Any:
    """``value`` validated as ``annotation``, or ``InvalidInput`` naming the first field it
    gets wrong."""
    adapter = adapter_for(annotation)
    if adapter is None:
        return value
    try:
        return adapter.validate_python(value, by_alias=True, by_name=True)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidInput(
            f"{what}: field {where!r}: {first['msg']} ({e.error_count()} error(s))", field=where
        ) from e


def canonical_json(value: Any) -> str:
    """Key-sorted compact JSON: equal inputs hash equal (idempotent start).

    NaN and infinities (``1e999`` parses to inf) are refused: they are not JSON and would
    be stored as something else than what was sent.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def masked_hash(value: Any, annotation: Any = NO_ANNOTATION) -> str:
    """The hash of an input as given, its secret-typed fields (by ``annotation``) masked
    first: what may be stored to tell a retry from a different request, with nothing a
    reader could guess a secret back from. Without secret fields, the hash of its
    canonical JSON."""
    if has_secrets(annotation):
        adapter = adapter_for(annotation)
        assert adapter is not None  # a type with secrets has an adapter
        try:
            # pydantic writes every secret type as "**********" in JSON.
            value = json.loads(adapter.dump_json(adapter.validate_python(value), by_alias=True))
        except ValidationError:  # the start refuses it, naming the field: hash no secret
            value = "an input its type refuses"
    return sha256_hex(canonical_json(value))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def identity_hash(text: str) -> str:
    """What tells two inputs apart for an idempotent start: the hash of the input with its
    sealed secrets masked (sealing is randomized, and a hash of a secret could be guessed
    back): two starts differing only in a secret are the same start."""
    if SEALED not in text:
        return sha256_hex(text)
    return sha256_hex(canonical_json(masked(json.loads(text))))


def validate_input(value: Any, annotation: Any, workflow: str, sealer: Sealer | None = None) -> str:
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
        return canonical_json(json.loads(encode(validated, annotation, sealer)))
    except SecretsNeedKeys as e:
        raise InvalidInput(str(e), field="input") from e
    except ValueError as e:  # an infinity or NaN that validation let through
        raise InvalidInput(
            f"input of workflow {workflow!r} holds a number JSON cannot carry "
            "(NaN or infinity, e.g. 1e999)",
            field="input",
        ) from e
