"""The determinism guard: workflow code must not read the clock, randomness or the network.

Replay only works when workflow code outside steps makes the same calls every time, so
everything nondeterministic belongs in a step or in ``ctx.now()/uuid()/random()``. The
engine brackets workflow code and step bodies with a ``Guard``; production uses
``NoGuard`` (zero cost), ``durable.testing.LocalRunner`` uses ``DeterminismGuard``, and
``durable dev`` uses ``WarningGuard``: the same checks, each one a warning line (once per
run and call site) instead of a failure, so ``datetime.now()`` in a workflow is seen where
a developer tries it, without failing a run the deployed code would have run.

The guard is best effort by construction (C code can read the clock directly): it
patches the module-level entry points (``time.time``, ``random.random``, ``uuid.uuid4``,
...), swaps ``datetime`` names in the workflow's own module for guarded stand-ins, and
watches the network through an audit hook.
"""

from __future__ import annotations

import datetime as _dt
import os
import random
import re
import sys
import sysconfig
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from durable.errors import TerminalError


class NonDeterministicCall(TerminalError):
    """Workflow code called something nondeterministic outside a step."""


class Guard(Protocol):
    def workflow_code(self, fn: Callable[..., Any]) -> AbstractContextManager[None]: ...

    def step_code(self) -> AbstractContextManager[None]: ...


class NoGuard:
    @contextmanager
    def workflow_code(self, fn: Callable[..., Any]) -> Iterator[None]:
        yield

    @contextmanager
    def step_code(self) -> Iterator[None]:
        yield


_STATE = threading.local()
_STDLIB = os.path.normcase(sysconfig.get_paths()["stdlib"])
# The ``durable`` package itself (this file is durable/engine/determinism.py).
_DURABLE_DIR = os.path.normcase(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_THIRD_PARTY_DIRS = frozenset({"site-packages", "dist-packages"})
_HINT = "move it into a step, or use ctx.now() / ctx.uuid() / ctx.random()"


def _guard_active() -> bool:
    return bool(getattr(_STATE, "active", False))


@contextmanager
def observer_code() -> Iterator[None]:
    """Code that watches the engine (a tracer, a console) rather than being workflow code:
    the guard does not apply to it, even when a workflow's call led to it (an OpenTelemetry
    SDK draws span ids from ``random``; the workflow's replay does not depend on them)."""
    previous = getattr(_STATE, "active", False)
    _STATE.active = False
    try:
        yield
    finally:
        _STATE.active = previous


# Packages whose guarded calls are made for their own purposes, never the workflow's: the
# ``durable`` package (the engine's clock, its ledger's HTTP client) and the standard
# ``logging`` (a record's time stamp, read when ``ctx.logger`` writes; no replay sees it).
_OWN_PACKAGES = ("durable", "logging")


def _is_durable(frame: types.FrameType) -> bool:
    # By module name first: a Lambda bundle puts durable, its dependencies and the user's
    # code side by side in one folder, so the path alone cannot tell them apart.
    name = frame.f_globals.get("__name__")
    if isinstance(name, str) and any(
        name == package or name.startswith(package + ".") for package in _OWN_PACKAGES
    ):
        return True
    return os.path.normcase(frame.f_code.co_filename).startswith(_DURABLE_DIR + os.sep)


def _is_library(frame: types.FrameType) -> bool:
    """The standard library or an installed third-party package: code a workflow may call
    into, but never the code to blame."""
    filename = frame.f_code.co_filename
    if filename.startswith("<frozen "):
        return True
    path = os.path.normcase(filename)
    if path.startswith(_STDLIB):
        return True
    return not _THIRD_PARTY_DIRS.isdisjoint(re.split(r"[\\/]", path))


def _workflow_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """The user's frame to blame for a guarded call, walking up from its caller, or None
    when the call is none of the user's doing.

    Library frames are passed over: a workflow that calls ``requests`` is blamed for the
    network at its own line. The first frame that is neither library nor ``durable``
    is the user's, and the call its violation. A ``durable`` frame met first means the
    engine made the call for its own purposes (its clock, its ledger's HTTP client, a local
    Lambda context's deadline), even if workflow code further up led to it.
    """
    while frame is not None:
        if _is_durable(frame):  # or logging's
            return None
        if not _is_library(frame):
            return frame
        frame = frame.f_back
    return None


def _violated(what: str, frame: types.FrameType) -> None:
    """A guarded call was made by workflow code at ``frame``: raise (``DeterminismGuard``),
    or under ``WarningGuard`` log it once per run and call site and let the call go on."""
    error = NonDeterministicCall(f"workflow code called {what} outside a step: {_HINT}")
    warned: set[tuple[Any, ...]] | None = getattr(_STATE, "warned", None)
    if warned is None:
        recorder: list[NonDeterministicCall] | None = getattr(_STATE, "violations", None)
        if recorder is not None:
            recorder.append(error)
        raise error
    from durable.engine.run_logging import WORKFLOW_LOGGER, current_keys

    keys = current_keys()
    site = (keys.get("run_id"), what, frame.f_code.co_filename, frame.f_lineno)
    if site not in warned:
        warned.add(site)
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        WORKFLOW_LOGGER.warning(
            "%s (%s): deployed, a replay would see another value", error, where, extra=keys
        )


def _check(what: str, caller: types.FrameType | None) -> None:
    """Called by a guarded entry point with the frame that called it."""
    if _guard_active():
        frame = _workflow_frame(caller)
        if frame is not None:
            _violated(what, frame)


def _wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check(name, sys._getframe(1))
        return original(*args, **kwargs)

    guarded.__wrapped__ = original  # type: ignore[attr-defined]
    return guarded


_PATCHES: list[tuple[Any, str]] = [
    (time, "time"),
    (time, "time_ns"),
    (time, "monotonic"),
    (random, "random"),
    (random, "randint"),
    (random, "randrange"),
    (random, "choice"),
    (random, "choices"),
    (random, "uniform"),
    (random, "shuffle"),
    (random, "sample"),
    (random, "getrandbits"),
    (uuid, "uuid1"),
    (uuid, "uuid4"),
]


class _StandIn(type):
    """The stand-ins' metaclass: ``isinstance(x, datetime)`` in guarded workflow code is
    True for every real datetime (``ctx.now()`` returns one), as it is deployed, where
    the name is the real class."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.__mro__[1])

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls.__mro__[1])


class _GuardedDatetime(_dt.datetime, metaclass=_StandIn):
    # While the guard is on, a module's ``datetime`` name is this class, so a dataclass
    # of that module whose string annotations pydantic resolves then (``from __future__
    # import annotations``) meets it as a field type: it is a datetime to pydantic.
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler.generate_schema(_dt.datetime)

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> _GuardedDatetime:
        _check("datetime.now()", sys._getframe(1))
        return super().now(tz)

    @classmethod
    def utcnow(cls) -> _GuardedDatetime:
        _check("datetime.utcnow()", sys._getframe(1))
        return super().now(_dt.UTC).replace(tzinfo=None)

    @classmethod
    def today(cls) -> _GuardedDatetime:
        _check("datetime.today()", sys._getframe(1))
        return super().today()


class _GuardedDate(_dt.date, metaclass=_StandIn):
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler.generate_schema(_dt.date)

    @classmethod
    def today(cls) -> _GuardedDate:
        _check("date.today()", sys._getframe(1))
        return super().today()


def _datetime_module_proxy() -> types.ModuleType:
    proxy = types.ModuleType("datetime")
    proxy.__dict__.update(_dt.__dict__)
    proxy.datetime = _GuardedDatetime  # type: ignore[attr-defined]
    proxy.date = _GuardedDate  # type: ignore[attr-defined]
    return proxy


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in ("socket.connect", "socket.getaddrinfo") and _guard_active():
        # Hooks run from C: the frame calling this one made the socket call.
        _check(f"the network ({event})", sys._getframe(1))


_install_lock = threading.Lock()
_installed: list[bool] = []


def _install() -> None:
    """Patch once per process; patched functions are inert unless a guard is active."""
    with _install_lock:
        if _installed:
            return
        for module, name in _PATCHES:
            setattr(module, name, _wrap(f"{module.__name__}.{name}()", getattr(module, name)))
        sys.addaudithook(_audit)
        _installed.append(True)


class DeterminismGuard:
    """Fails workflow code that reads the clock, randomness or the network outside a step."""

    def __init__(self) -> None:
        _install()
        self.violations: list[NonDeterministicCall] = []
        self._proxy = _datetime_module_proxy()

    def _swap_globals(self, namespace: dict[str, Any]) -> dict[str, Any]:
        saved: dict[str, Any] = {}
        for key, value in list(namespace.items()):
            replacement: Any = None
            if value is _dt:
                replacement = self._proxy
            elif value is _dt.datetime:
                replacement = _GuardedDatetime
            elif value is _dt.date:
                replacement = _GuardedDate
            if replacement is not None:
                saved[key] = value
                namespace[key] = replacement
        return saved

    @contextmanager
    def workflow_code(self, fn: Callable[..., Any]) -> Iterator[None]:
        namespace: dict[str, Any] = getattr(fn, "__globals__", {})
        saved = self._swap_globals(namespace)
        previous = getattr(_STATE, "active", False)
        previous_recorder = getattr(_STATE, "violations", None)
        previous_warned = getattr(_STATE, "warned", None)
        _STATE.active = True
        _STATE.violations = self.violations
        _STATE.warned = self.warned
        try:
            yield
        finally:
            _STATE.active = previous
            _STATE.violations = previous_recorder
            _STATE.warned = previous_warned
            namespace.update(saved)

    def step_code(self) -> AbstractContextManager[None]:
        return observer_code()  # a step body may read the clock: the guard is off

    # Fail (None), or warn once per (run, call, call site) in this set.
    warned: set[tuple[Any, ...]] | None = None


class WarningGuard(DeterminismGuard):
    """``durable dev``'s guard: each nondeterministic call in workflow code is a warning
    on the console (``ctx.logger``'s logger, with the run's keys), once per run and call
    site, and the call goes on as it would deployed."""

    def __init__(self) -> None:
        super().__init__()
        self.warned = set()


def carried() -> Callable[[], AbstractContextManager[None]]:
    """This thread's guard state, to apply in a thread that runs branch code for it: the
    globals are already swapped by the workflow's ``workflow_code``; the guard is on or
    off per thread."""
    active = getattr(_STATE, "active", False)
    violations = getattr(_STATE, "violations", None)
    warned = getattr(_STATE, "warned", None)

    @contextmanager
    def apply() -> Iterator[None]:
        previous = (
            getattr(_STATE, "active", False),
            getattr(_STATE, "violations", None),
            getattr(_STATE, "warned", None),
        )
        _STATE.active, _STATE.violations, _STATE.warned = active, violations, warned
        try:
            yield
        finally:
            _STATE.active, _STATE.violations, _STATE.warned = previous

    return apply
