"""What the engine needs to know of a declared callable, below the engine and the
authoring API: its ledger name (``callable_name``), its return annotation
(``return_annotation``), a step's ``Semantics`` and resolved options
(``StepOptionsResolved``), and a registered workflow (``WorkflowDef``).
``durable.engine.registry`` re-exports them; its ``StepFunction`` is a ``StepDeclaration``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, get_type_hints

from durable.core.flow import Concurrency, RateLimit
from durable.core.serde import NO_ANNOTATION
from durable.errors import RegistrationError

if TYPE_CHECKING:
    from durable.core.retry import RetryPolicy
    from durable.hooks import HookSpec

Semantics = Literal["at_least_once", "at_most_once_per_attempt"]


@dataclass(frozen=True, slots=True)
class WorkflowDef:
    name: str
    version: int
    fn: Callable[..., Any]
    takes_input: bool
    input_annotation: Any
    return_annotation: Any
    # How ``POST /hooks/<name>`` authenticates deliveries for it (None: our own scheme).
    hook: HookSpec | None = None
    # Flow control (``durable.core.flow``): runs active at once, and starts per period.
    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None
    # Its runs' lifetime, when it declares one: every item of its runs then carries a TTL
    # from its first write (``durable.core.lifetime``); None keeps the purge.
    max_lifetime: timedelta | None = None


@dataclass(slots=True)
class StepOptionsResolved:
    retry: RetryPolicy
    budget: timedelta
    semantics: Semantics
    explicit_budget: bool = False  # timeout= was given, not the default guess
    version: int = 1


class StepDeclaration:
    """A step declared with ``@app.step`` (``durable.engine.registry.StepFunction``): its ledger
    name and its return annotation, resolved once at the declaration."""

    name: str
    return_annotation: Any


def callable_name(fn: Callable[..., Any], explicit: str | None) -> str:
    """The ledger name of a callable: explicit, else ``__qualname__``.

    Lambdas and partials have no readable name, so they must be given one.
    """
    if explicit is not None:
        if not explicit or not explicit.strip():
            raise RegistrationError("name= must be a non-empty string")
        return explicit
    if isinstance(fn, StepDeclaration):
        return fn.name
    if isinstance(fn, functools.partial):
        raise RegistrationError(
            "a functools.partial has no readable name: pass name='...' so the ledger says what ran"
        )
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str) or "<lambda>" in qualname:
        raise RegistrationError(
            "a lambda has no readable name: pass name='...' (for example "
            "ctx.step(lambda: ..., name='fetch-price'))"
        )
    return qualname


def resolve_annotation(fn: Callable[..., Any], name: str) -> Any:
    """One parameter's (or ``"return"``'s) annotation, resolved without needing the others.

    ``get_type_hints`` fails when *any* annotation names a type it cannot see (a local
    import of ``Context``, say); resolving just the one we need avoids that trap.
    """
    try:
        return get_type_hints(fn).get(name, NO_ANNOTATION)
    except Exception:
        raw = getattr(fn, "__annotations__", {}).get(name, NO_ANNOTATION)
        if not isinstance(raw, str):
            return raw
        namespace = dict(getattr(fn, "__globals__", {}))
        return eval(raw, namespace)


def return_annotation(fn: Callable[..., Any]) -> Any:
    target = fn.func if isinstance(fn, functools.partial) else fn
    if isinstance(target, StepDeclaration):
        return target.return_annotation
    try:
        return _cached_return_annotation(target)
    except TypeError:  # an unhashable callable object
        return _return_annotation(target)


def _return_annotation(target: Callable[..., Any]) -> Any:
    try:
        return resolve_annotation(target, "return")
    except Exception:  # builtins without annotations, or a type defined in a function
        return NO_ANNOTATION


# Resolving string annotations compiles code: once per callable, not once per step.
_cached_return_annotation = functools.lru_cache(maxsize=4096)(_return_annotation)
