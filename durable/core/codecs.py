"""Custom codecs (``serdes=``): a user's encoding for a value pydantic does not cover.

A call that records a value (``ctx.step``, ``ctx.map``, ``ctx.parallel``, a child's
result, a callback's answer, a condition's state) encodes it by a type annotation through
``durable.core.serde``. With ``serdes=codec`` the codec encodes that call's value instead, and
``serde`` meets it in the annotation's place (a ``Coded``), so every path that encodes,
stores and decodes a value (the step's attempt loop, a batch's decision, a condition's
checkpoint, the replay of each) takes it without a second road through the engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from durable.core.tokens import scrub_value
from durable.errors import InvalidInput, SerdesError

T = TypeVar("T")


class Serdes(Protocol[T]):
    """How the values of one call are stored: ``serialize`` turns a value into the JSON
    text the ledger keeps, ``deserialize`` turns that text back into the value.

    Pass one as ``serdes=`` to ``ctx.step``, ``ctx.map``, ``ctx.parallel``,
    ``ctx.run_child``/``ctx.start_child`` (the child's result), ``ctx.create_callback``/
    ``ctx.wait_for_callback`` (the answer) or ``ctx.wait_for_condition`` (its result and
    state). It replaces the encoding by the return annotation for that call, so it fits
    types pydantic does not cover (a class of another library, a value with a number
    format of its own). Any object with these two methods is one: no base class needed.

    Text, not a JSON-able value: the codec decides exactly what is stored (a decimal
    written ``12.50``, a JSON number that no float would keep), as the AWS SDK's
    ``SerDes`` does. The text must be JSON (``json.dumps(...)``): the ledger stores JSON,
    and the console, ``durable show`` and the HTTP API show it as such; anything else is
    refused when the value is recorded.

    The first execution hands the workflow ``deserialize(serialize(value))``, exactly what
    every replay decodes from the ledger, so make the pair round-trip. A codec that raises
    fails the call for good (``SerdesError``, naming the call and the codec); on a step
    that is a ``StepFailed`` whose ``error_type`` is ``"SerdesError"``.

    The text is stored as the codec wrote it: secret-typed fields (``SecretStr``...) are
    not sealed in a value a codec encodes (encrypt them in the codec, or keep secrets out
    of it). Live callback tokens are taken out of the value *before* ``serialize`` sees
    it, since a codec may write a form no scan of its text can read (compressed, base64):
    each is replaced by ``<callback token redacted>`` in every ``str`` the value holds,
    in a ``dict`` (keys and values), ``list``, ``tuple``, ``set`` or ``frozenset``, a
    dataclass instance (``dataclasses.replace``), a pydantic model (``model_copy``) and
    a ``SecretStr``, at any depth. An object of any other class reaches ``serialize`` as
    it is, tokens included: a codec given one must keep tokens out of what it writes.
    The workflow gets the redacted value back, on the first execution as on replay.
    """

    def serialize(self, value: T, /) -> str:
        """``value`` as JSON text."""
        ...

    def deserialize(self, data: str, /) -> T:
        """The value ``data`` (text ``serialize`` wrote) stands for."""
        ...


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True, slots=True, eq=False)
class Coded:
    """What a value with a codec is encoded by, in place of its annotation: the codec and
    the call it belongs to (named in errors)."""

    serdes: Serdes[Any]
    what: str

    @property
    def codec(self) -> str:
        return type(self.serdes).__qualname__

    def encode(self, value: Any) -> str:
        """The codec's text for ``value``, which is scrubbed of callback tokens first (see
        ``Serdes``): the text holds no token the value's texts held."""
        try:
            text = self.serdes.serialize(scrub_value(value))
        except Exception as e:
            raise SerdesError(
                f"{self.what}: codec {self.codec} could not encode the value (a "
                f"{type(value).__name__}): {type(e).__name__}: {e}"
            ) from e
        if not isinstance(text, str):
            raise SerdesError(
                f"{self.what}: codec {self.codec}.serialize returned a "
                f"{type(text).__name__}, not JSON text: return json.dumps(...)"
            )
        try:  # refused here, at the call, rather than shown broken by every reader
            json.loads(text, parse_constant=_refuse_constant)
        except ValueError as e:
            raise SerdesError(
                f"{self.what}: codec {self.codec}.serialize returned text that is not JSON "
                f"({e}): the ledger stores JSON, return json.dumps(...)"
            ) from e
        return text

    def decode(self, text: str) -> Any:
        try:
            return self.serdes.deserialize(text)
        except Exception as e:
            raise SerdesError(
                f"{self.what}: codec {self.codec} could not decode the recorded value: "
                f"{type(e).__name__}: {e}"
            ) from e


def coded(serdes: Serdes[Any] | None, what: str) -> Coded | None:
    """The ``Coded`` for a call given ``serdes=`` (None without one); ``InvalidInput``
    for an object that is not a codec, at the call, before anything is recorded."""
    if serdes is None:
        return None
    if not (
        callable(getattr(serdes, "serialize", None))
        and callable(getattr(serdes, "deserialize", None))
    ):
        raise InvalidInput(
            f"{what}: serdes= takes a codec with serialize(value) -> str and "
            f"deserialize(text) -> value methods, not {type(serdes).__name__}",
            field="serdes",
        )
    return Coded(serdes, what)
