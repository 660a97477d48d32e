"""Waits on the outside world: callbacks (approvals), signals and polled conditions.

Each is a position in the ledger like a step. The wait is recorded WAITING (with its
expiry) before anything can complete it; completions arrive through the engine's event
operations, which bump the run's inbox so a worker that is running sees them.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, NoReturn

# typing_extensions for a TypeVar default (PEP 696; typing has it from Python 3.13): a bare
# ``Callback`` annotation stays valid under mypy --strict and means ``Callback[Any]``.
# Installed with pydantic, which needs it.
from typing_extensions import TypeVar

from durable.aio import run_coroutine
from durable.core import serde, tokens
from durable.core.backoff import capped_delay
from durable.core.callables import callable_name, return_annotation
from durable.core.codecs import Serdes, coded
from durable.core.ids import has_control_characters
from durable.core.model import (
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    parse_time,
    signal_order,
)
from durable.core.ports import ConditionFailed
from durable.core.retry import error_type_name, jitter_share
from durable.core.values import NO_STATE
from durable.engine.active import bind_context, reset_context
from durable.engine.steps import recorded_form
from durable.errors import (
    CallbackFailed,
    CallbackTimeout,
    InvalidInput,
    LeaseLost,
    StepFailed,
    StorageError,
    TerminalError,
)

log = logging.getLogger("durable.waits")

if TYPE_CHECKING:
    from durable.engine.execution_parts import ExecutionParts

T = TypeVar("T", default=Any)

# Step names of waits and signals: readable in the ledger, safe in schedule names.
_MAX_NAME = 128


def check_wait_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
        raise ValueError(f"{what} name must be a non-empty string of at most {_MAX_NAME} chars")
    if has_control_characters(name):
        raise ValueError(f"{what} name must not contain control characters")
    tokens.refuse_token(name, "name", f"{what} name")  # InvalidInput: a name is stored in clear
    return name


def _check_timeout(timeout: timedelta | None) -> None:
    if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
        raise ValueError("timeout must be a positive datetime.timedelta (or None: wait forever)")


def _settled(
    rec: StepRecord,
    what: str,
    annotation: Any = serde.NO_ANNOTATION,
    x: ExecutionParts | None = None,
) -> Any:
    """The outcome of a finished wait: its value (decoded with ``annotation``, on the first
    execution as on a replay), or the error it ended with."""
    if rec.status == StepStatus.DONE:
        if x is not None:
            return x.decode(rec.output, annotation)
        return serde.decode(rec.output, annotation)
    if rec.status == StepStatus.TIMED_OUT:
        if (rec.error_summary or "").startswith("not met after"):  # out of max_attempts
            raise CallbackTimeout(f"{what} {rec.name!r} at {rec.position} {rec.error_summary}")
        raise CallbackTimeout(
            f"{what} {rec.name!r} at {rec.position} timed out at {rec.expires_at}"
        )
    raise CallbackFailed(rec.error_type or "Rejected", rec.error_summary or "")


@dataclass(frozen=True, slots=True)
class Callback(Generic[T]):
    """A pending callback: hand ``url`` (or ``token``) to whoever must answer.

    ``Callback[Decision]`` is one created with ``result_type=Decision``: ``result()``
    returns a ``Decision``. A bare ``Callback`` is ``Callback[Any]`` (any JSON answer).

    The token is a credential: it never appears in a repr, and the engine takes it out of
    everything the run stores (a step's result, an error, an effect's reference)."""

    token: str = field(repr=False)
    url: str = field(repr=False)
    name: str
    position: str
    _execution: ExecutionParts = field(repr=False)
    # What the answer must be (a pydantic model, say): the API refuses an answer that
    # does not fit (422), and ``result()`` returns it decoded. None: any JSON.
    result_type: Any = field(default=None, repr=False)
    # Or the codec that decodes the answer's JSON text (``serdes=``).
    _serdes: Serdes[Any] | None = field(default=None, repr=False)

    def result(self) -> T:
        """Wait for the answer: its result (decoded to ``result_type``, or by the codec
        given as ``serdes``), or ``CallbackFailed`` / ``CallbackTimeout``."""
        annotation: Any = serde.NO_ANNOTATION if self.result_type is None else self.result_type
        codec = coded(self._serdes, f"callback {self.name!r} at position {self.position}")
        value: T = _await(self._execution, self.position, "callback", codec or annotation)
        return value


def create_callback(
    x: ExecutionParts,
    name: str,
    timeout: timedelta | None,
    result_type: Any = None,
    heartbeat_timeout: timedelta | None = None,
    serdes: Serdes[Any] | None = None,
) -> Callback[Any]:
    check_wait_name(name, "callback")
    _check_timeout(timeout)
    _check_heartbeat(heartbeat_timeout, timeout)
    if serdes is not None:
        if result_type is not None:
            # The API checks an answer against result_type before it is stored; a codec
            # decodes the stored text in the worker: one says how, not both.
            raise InvalidInput(
                f"callback {name!r}: pass result_type= (an answer the API validates) or "
                "serdes= (a codec that decodes it), not both",
                field="serdes",
            )
        coded(serdes, f"callback {name!r}")  # refused before any token exists
    if x.dry_run:  # a deploy check: it sends nothing, so needs no token (nor its key)
        position = x.next_position()
        x.recorded(position, name, StepKind.CALLBACK)  # the frontier ends the check here
        return Callback("", "", name, position, x, result_type, serdes)
    secret = tokens.check_secret(x.config.callback_secret)
    position = x.next_position()
    rec = x.recorded(position, name, StepKind.CALLBACK)
    token: str | None = None
    if rec is None:
        if heartbeat_timeout is not None:  # with no timeout, it alone sets the expiry
            _within_lifetime(x, heartbeat_timeout, "heartbeat_timeout")
        deadline = _expiry(x, timeout, "callback")
        expires = heartbeat_expiry(x.clock.now(), heartbeat_timeout, deadline)
        nonce = tokens.new_nonce()
        token = tokens.make_token(secret, x.run.run_id, position, nonce)
        # The API validates answers against the type, when it can import it by name.
        reference = serde.type_reference(result_type) if result_type is not None else None
        detail: dict[str, Any] | None = {"result_type": reference} if reference else None
        if result_type is not None and serde.has_secrets(result_type):
            if reference is None:
                # The API seals an answer by the type's fields: a type it cannot import
                # would be stored in clear. Said before any token exists.
                raise TerminalError(
                    f"callback {name!r}: result_type {result_type!r} has secret-typed fields, "
                    "so the API must import it to seal them: define it at module level "
                    "(a class, not a generic alias) in a module the API's code has"
                )
            detail = {"result_type": reference, "sealed": True}
        if heartbeat_timeout is not None:
            # Each heartbeat moves expires_at to now + this, never past the deadline.
            detail = {
                **(detail or {}),
                "heartbeat": heartbeat_timeout.total_seconds(),
                "deadline": deadline,
            }
        # Written WAITING (with its expiry) before the token leaves this function.
        rec = x.write_fenced(
            x.new_record(
                position,
                name,
                StepKind.CALLBACK,
                StepStatus.WAITING,
                token_nonce=nonce,
                token_hash=tokens.token_hash(token),
                expires_at=expires,
                detail=detail,
            )
        )
        if rec.token_nonce != nonce:  # another writer's record was adopted: not ours
            token = None
    if token is None:  # a replay: the token the record was sent with
        keys = (secret, *x.config.callback_verify_only_secrets)
        nonce = rec.token_nonce or ""
        token = tokens.rebuild_token(keys, x.run.run_id, position, nonce, rec.token_hash or "")
    if token is None:
        if not rec.status.final:
            # A pending callback whose key was dropped from the secret: its URL cannot be
            # rebuilt and answers to the one sent are refused. Say so where operators look.
            log.warning(
                "callback %r of run %s was signed with a key no longer in the callback "
                "secret; put that key back (verify-only) or answers to it will be refused",
                name,
                x.run.run_id,
            )
        token = tokens.make_token(secret, x.run.run_id, position, rec.token_nonce or "")
    x.tokens.add(token)
    base = x.config.callback_base_url.rstrip("/")
    return Callback(token, f"{base}/callbacks/{token}", name, position, x, result_type, serdes)


def _await(
    x: ExecutionParts, position: str, what: str, annotation: Any = serde.NO_ANNOTATION
) -> Any:
    """Return a settled wait's outcome, time it out, or suspend until it settles.

    A recorded answer is returned even after a cancel request: the replay goes on to
    where new work begins, so the compensations registered after the wait are known."""
    rec = x.steps[position]
    if rec.status.final:
        return _settled(rec, what, annotation, x)
    x.check_cancel()
    now = x.clock.now()
    if rec.expires_at is not None and parse_time(rec.expires_at) <= now:
        # Under the same "still WAITING" condition a completion needs: exactly one wins.
        timed_out = StepRecord(
            **{**_fields(rec), "status": StepStatus.TIMED_OUT, "updated_at": format_time(now)}
        )
        # Refused if the stored wait's expiry moved on since this view (a heartbeat):
        # then the stored wait is the truth, and the run parks until its new expiry.
        stored = x.write_fenced(timed_out, adopt_pending=True)
        if not stored.status.final:
            raise x.suspend(stored.expires_at, position, replayed=True)
        return _settled(stored, what)
    raise x.suspend(rec.expires_at, position, replayed=True)


def _check_heartbeat(heartbeat: timedelta | None, timeout: timedelta | None) -> None:
    if heartbeat is None:
        return
    if not isinstance(heartbeat, timedelta) or heartbeat < timedelta(seconds=1):
        raise ValueError("heartbeat_timeout must be a datetime.timedelta of at least 1 second")
    if timeout is not None and heartbeat > timeout:
        raise ValueError(
            f"heartbeat_timeout ({heartbeat}) is longer than the timeout ({timeout}): the "
            "wait would end before a heartbeat is ever missed; make it shorter, or drop it"
        )


def heartbeat_expiry(
    now: datetime, heartbeat: timedelta | None, deadline: str | None
) -> str | None:
    """When a callback with a heartbeat times out if nothing more is heard: ``heartbeat``
    from ``now``, never past its ``deadline`` (the wait's own timeout, if any)."""
    if heartbeat is None:
        return deadline
    due = format_time(now + heartbeat)
    return min(due, deadline) if deadline is not None else due


def _expiry(x: ExecutionParts, timeout: timedelta | None, what: str) -> str | None:
    """When a new wait times out, refused past the run's lifetime."""
    if timeout is None:
        return None
    try:
        until = x.clock.now() + timeout
    except OverflowError:  # past any date (timedelta.max): refused as too long, not a crash
        _within_lifetime(x, timeout, f"the {what}'s timeout")
        raise
    x.check_lifetime(until, f"{what}'s timeout")
    return format_time(until)


def _within_lifetime(x: ExecutionParts, duration: timedelta, what: str) -> None:
    """Refuse a duration longer than a run may live, before it is added to a date (a
    ``timedelta.max`` would overflow the date): the ledger keeps what stops a side effect
    from repeating for that long and no longer."""
    lifetime = x.config.max_run_lifetime
    if duration > lifetime:
        raise ValueError(
            f"{what} ({duration}) is longer than the run's max_run_lifetime ({lifetime}): "
            "wait less, or continue long-lived work as a new run (ctx.continue_as_new)"
        )


def _fields(rec: StepRecord) -> dict[str, Any]:
    return {f: getattr(rec, f) for f in rec.__dataclass_fields__}


def wait_for_callback(
    x: ExecutionParts,
    name: str,
    timeout: timedelta | None,
    submit: Callable[[Callback[Any]], Any] | None,
    result_type: Any = None,
    heartbeat_timeout: timedelta | None = None,
    serdes: Serdes[Any] | None = None,
) -> Any:
    callback = create_callback(x, name, timeout, result_type, heartbeat_timeout, serdes)
    if submit is not None:
        x.call_step(
            submit,
            (callback,),
            {},
            name=f"{name}.submit",
            retry=None,
            timeout=None,
            semantics=None,
            compensate=None,
        )
    return callback.result()


# --- signals ------------------------------------------------------------------------


def wait_for_signal(x: ExecutionParts, name: str, timeout: timedelta | None) -> Any:
    check_wait_name(name, "signal")
    _check_timeout(timeout)
    position = x.next_position()
    rec = x.recorded(position, name, StepKind.SIGNAL)
    if rec is not None and rec.status.final:
        return _settled(rec, "signal")
    consumed = {
        (s.detail or {}).get("signal_id")
        for s in x.steps.values()
        if s.kind == StepKind.SIGNAL and s.status == StepStatus.DONE
    }
    pending = sorted(
        (
            s
            for s in x.signals
            if s.name == name and s.signal_id not in consumed and s.consumed_by in (None, position)
        ),
        key=signal_order,
    )
    if pending:
        signal = pending[0]
        done = x.new_record(
            position,
            name,
            StepKind.SIGNAL,
            StepStatus.DONE,
            output=signal.payload,
            detail={"signal_id": signal.signal_id, "received_at": signal.received_at},
        )
        done.fence = x.run.fence
        try:
            stored = x.ledger.consume_signal(done, signal, x.guard())
        except ConditionFailed as e:
            raise LeaseLost() from e
        return _settled(x.kept(done, stored), "signal")
    if rec is None:
        expires = _expiry(x, timeout, "signal wait")
        x.write_fenced(
            x.new_record(position, name, StepKind.SIGNAL, StepStatus.WAITING, expires_at=expires)
        )
    return _await(x, position, "signal")


# --- conditions ---------------------------------------------------------------------


def _check_condition(
    interval: timedelta,
    timeout: timedelta | None,
    backoff: float,
    max_attempts: int | None = None,
    jitter: str = "none",
    max_interval: timedelta | None = None,
) -> None:
    if not isinstance(interval, timedelta) or interval <= timedelta(0):
        raise ValueError("interval must be a positive datetime.timedelta")
    if max_interval is not None and (
        not isinstance(max_interval, timedelta) or max_interval <= timedelta(0)
    ):
        raise ValueError(
            "max_interval must be a positive datetime.timedelta (or None: ten intervals)"
        )
    _check_timeout(timeout)
    if (
        isinstance(backoff, bool)
        or not isinstance(backoff, int | float)
        or not math.isfinite(backoff)
    ):
        raise ValueError(f"backoff must be a finite number >= 1.0, not {backoff!r}")
    if backoff < 1.0:
        raise ValueError(
            f"backoff must be >= 1.0, not {backoff}: below 1 each wait would be shorter than "
            "the last; backoff=1.0 polls every interval"
        )
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise ValueError(
            f"max_attempts must be a positive int (checks in all), not {max_attempts!r}"
        )
    if jitter not in ("none", "full"):
        raise ValueError(f"jitter must be 'none' or 'full', not {jitter!r}")


def wait_for_condition(
    x: ExecutionParts,
    check: Callable[..., Any],
    interval: timedelta,
    timeout: timedelta | None,
    *,
    name: str | None,
    backoff: float,
    max_interval: timedelta | None,
    initial_state: Any = NO_STATE,
    until: Callable[[Any], object] | None = None,
    max_attempts: int | None = None,
    jitter: str = "none",
    serdes: Serdes[Any] | None = None,
) -> Any:
    _check_condition(interval, timeout, backoff, max_attempts, jitter, max_interval)
    stateful = initial_state is not NO_STATE
    if until is not None and not stateful:
        raise ValueError("until= decides on a state: pass initial_state= with it")
    step_name = callable_name(check, name)
    tokens.refuse_token(step_name, "name", "condition name", "the condition's initial_state")
    policy = x.resolve_options(check, None, None, None).retry
    position = x.next_position()
    # The result and the state are encoded by the codec when one is given.
    codec = coded(serdes, f"condition {step_name!r} at position {position}")
    annotation = return_annotation(check) if codec is None else codec
    rec = x.recorded(position, step_name, StepKind.CONDITION)
    if rec is not None and rec.status.final:
        if rec.status == StepStatus.TERMINAL_FAILED:
            raise StepFailed(
                rec.name, position, rec.error_type or "Error", rec.error_summary or "", rec.attempt
            )
        return _settled(rec, "condition", annotation, x)
    now = x.clock.now()
    if rec is not None and rec.wake_at and parse_time(rec.wake_at) > now:
        raise x.suspend(rec.wake_at, position, replayed=True)
    cap = _poll_cap(x, interval, max_interval)
    attempt = rec.attempt if rec is not None else 0
    # Consecutive failed checks: the step's retry policy decides how many it takes, so a
    # check that keeps raising fails the wait instead of polling until the timeout (or,
    # without one, forever). A check that answers "not yet" resets the count.
    errors = int((rec.detail or {}).get("errors", 0)) if rec is not None else 0
    expires = rec.expires_at if rec is not None else _expiry(x, timeout, "condition")
    # The state the last poll left (recorded with it): a resumed run goes on from there.
    state = _last_state(x, rec, annotation, initial_state)
    state_text: str | None = None  # the state as recorded, once a check has returned one
    base = x.new_record(
        position, step_name, StepKind.CONDITION, StepStatus.WAITING, expires_at=expires
    )
    while True:
        now = x.clock.now()
        if expires is not None and parse_time(expires) <= now:
            base.status, base.attempt = StepStatus.TIMED_OUT, attempt
            base.updated_at = format_time(now)
            return _settled(x.write_fenced(base), "condition", annotation, x)
        x.ensure_lease(x.config.default_step_budget)
        attempt += 1
        value, error = _poll(x, check, state if stateful else NO_STATE)
        base.attempt, base.updated_at = attempt, x.now_text()
        errors = errors + 1 if error is not None else 0
        if error is not None and policy.next_delay(errors, error) is None:
            _fail_condition(x, base, error)
        if error is None and stateful:
            # The state is what its record decodes to (by the annotation, or the codec),
            # in memory as after a park: ``until`` and the next check see one state
            # whether the run parked between checks or not (an int-keyed dict is keyed
            # by text once it was JSON, so it is from the start).
            state_text, state = _recorded(x, base, value, annotation)
        met = error is None and (_met(x, base, until, state) if stateful else bool(value))
        if met or (max_attempts is not None and attempt >= max_attempts):
            result, text = (state, state_text) if stateful else (value, None)
            return _end_condition(x, base, annotation, met, result, text)
        # Capped before it grows: polled every second for an hour with backoff=2.0, the
        # formula alone would pass what a timedelta holds after some 80 checks.
        wake = _next_poll(x, capped_delay(interval, backoff, attempt - 1, cap), jitter, expires)
        if x.can_wait_in_process(wake - x.clock.now(), x.config.default_step_budget):
            x.idle(max(0.0, (wake - x.clock.now()).total_seconds()))
            continue
        if stateful and state_text is None:  # no check returned a state yet (each raised)
            state_text = _recorded(x, base, state, annotation)[0]
        raise _park(x, base, wake, error, errors, state_text if stateful else None)


def _park(
    x: ExecutionParts,
    base: StepRecord,
    wake: datetime,
    error: Exception | None,
    errors: int,
    state_text: str | None,
) -> BaseException:
    """Record the wait with its next check's time (and the last check's error, the count
    of failed checks in a row, the state as recorded), and return the suspension that ends
    the invocation until then."""
    base.wake_at = format_time(wake)
    base.error_summary = f"{error_type_name(error)}: {error}"[:1000] if error else None
    base.detail = {"errors": errors} if errors else None
    if state_text is not None:
        base.checkpoint = {"payload_version": 1, "state": state_text}
    x.write_fenced(base)
    return x.suspend(base.wake_at, base.position)


def _end_condition(
    x: ExecutionParts,
    base: StepRecord,
    annotation: Any,
    met: bool,
    result: Any,
    text: str | None = None,
) -> Any:
    """Met (its result recorded and returned), or out of checks (``max_attempts``): then
    the wait ends as a timeout would, ``CallbackTimeout``, saying why. ``text`` is the
    result as recorded already (a state), else it is encoded here."""
    base.status = StepStatus.DONE if met else StepStatus.TIMED_OUT
    if met:
        base.output = text if text is not None else _recorded(x, base, result, annotation)[0]
    else:
        base.error_summary = f"not met after {base.attempt} checks (max_attempts)"
    return _settled(x.write_fenced(base), "condition", annotation, x)


def _recorded(x: ExecutionParts, base: StepRecord, value: Any, annotation: Any) -> tuple[str, Any]:
    """A condition's result or state as stored, and the value that text decodes to. A
    value its annotation rejects (``ResultMismatch``) or its codec cannot encode
    (``SerdesError``) fails the wait, recorded (``StepFailed``), as a check that fails for
    good does: a replay reads the failure instead of polling the outside again."""
    try:
        return recorded_form(x, value, annotation, f"condition {base.name!r} at {base.position}")
    except StorageError as e:
        if e.retryable:  # the ledger, not the value: the next invocation polls again
            raise
        _fail_condition(x, base, e)
    except Exception as e:
        _fail_condition(x, base, e)


def _poll_cap(x: ExecutionParts, interval: timedelta, max_interval: timedelta | None) -> timedelta:
    """The longest wait between two checks: ``max_interval``, by default ten intervals,
    never more than the run's lifetime (a later check could not run anyway), so the next
    check's time is always a date the ledger can hold."""
    _within_lifetime(x, interval, "the condition's interval")
    lifetime = x.config.max_run_lifetime
    if max_interval is not None:
        return min(max_interval, lifetime)
    return min(interval * 10, lifetime)


def _next_poll(x: ExecutionParts, delay: timedelta, jitter: str, expires: str | None) -> datetime:
    """When the next check runs: after ``delay`` (a random share of it with full jitter,
    recorded in ``wake_at`` so a replay reads it and never draws again), at the latest when
    the wait expires."""
    if jitter == "full":
        delay = delay * jitter_share()
    wake = x.clock.now() + delay
    return min(wake, parse_time(expires)) if expires is not None else wake


def _last_state(x: ExecutionParts, rec: StepRecord | None, annotation: Any, initial: Any) -> Any:
    """The state a stateful condition goes on from: the one its last poll recorded, else
    ``initial`` (``NO_STATE`` for a condition without state)."""
    if initial is NO_STATE or rec is None or rec.checkpoint is None:
        return initial
    return x.decode(rec.checkpoint["state"], annotation)


def _fail_condition(x: ExecutionParts, base: StepRecord, error: Exception) -> NoReturn:
    """A check that failed for good (terminal, or out of its retry policy's attempts)."""
    base.status = StepStatus.TERMINAL_FAILED
    base.error_type, base.error_class = error_type_name(error), "terminal"
    base.error_summary = f"{error_type_name(error)}: {error}"[:1000]
    stored = x.write_fenced(base)
    raise StepFailed(
        stored.name,
        base.position,
        stored.error_type or "Error",
        stored.error_summary or "",
        base.attempt,
    ) from error


def _met(
    x: ExecutionParts, base: StepRecord, until: Callable[[Any], object] | None, state: Any
) -> bool:
    """Whether a condition's state is the one waited for: the user's predicate (workflow
    code: it decides on the recorded state alone, so a replay decides the same), or the
    state's truth. A predicate that raises fails the wait, recorded, so no later replay
    polls again."""
    try:
        return bool(until(state)) if until is not None else bool(state)
    except Exception as failed:
        _fail_condition(x, base, failed)


def _poll(x: ExecutionParts, check: Callable[..., Any], state: Any) -> tuple[Any, Exception | None]:
    """Run one check like a step body: outside workflow code, errors captured; given the
    previous state when the condition carries one."""
    token = bind_context(None)
    try:
        with x.engine.guard.step_code(), x.off_turn():
            value = check() if state is NO_STATE else check(state)
            if inspect.iscoroutine(value):  # an ``async def`` check, run like a body
                value = run_coroutine(value)
            return value, None
    except TerminalError as e:
        return None, e
    except Exception as e:
        return None, e
    finally:
        reset_context(token)
