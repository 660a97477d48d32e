"""One step's execution across its attempts: the body, retries, checkpoints, effects."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Generator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from durable.aio import Scoped, run_coroutine
from durable.core import serde
from durable.core.callables import StepOptionsResolved
from durable.core.leases import apply_changes, lease_changes
from durable.core.model import (
    Attempt,
    RunRecord,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    parse_time,
)
from durable.core.ports import ConditionFailed
from durable.core.retention import incarnation
from durable.core.retry import classify, error_type_name
from durable.engine.active import bind_context, bind_step, reset_context, reset_step
from durable.engine.interrupts import WorkerInterrupted, summarize
from durable.engine.step_context import StepContext
from durable.errors import (
    InvalidInput,
    LeaseLost,
    PayloadTooLarge,
    RunCanceled,
    StepFailed,
    StorageError,
    TerminalError,
)

if TYPE_CHECKING:
    from durable.engine.execution_parts import ExecutionParts

# after_failure's answer when the retry was served in-process: loop to the next attempt.
_RETRY_NOW: Any = object()
# What the attempt loop yields where the body runs (``StepRun.attempt_loop``).
_BODY: Any = object()


class ResultMismatch(TerminalError):
    """A value a body returned (a step's result, a condition check's value) that its
    return annotation refuses: it cannot be encoded by the annotation, or its JSON does
    not decode back to it. Terminal: the body did its work and returned, so running it
    again (a charge made twice) cannot mend the value; fix the annotation or the body."""


def recorded_form(x: ExecutionParts, value: Any, annotation: Any, what: str) -> tuple[str, Any]:
    """``value`` as the ledger records it (encoded by ``annotation`` or its codec, live
    callback tokens taken out) and the value that text decodes to: what the workflow gets
    on the first execution, as every replay will.

    A value the annotation rejects raises ``ResultMismatch`` naming ``what``; a codec's
    failure (``SerdesError``), a missing key service (``SecretsNeedKeys``) and a ledger
    failure raise as they are, each already saying what it is."""
    try:
        encoded = x.redact(x.encode(value, annotation))
        return encoded, x.decode(encoded, annotation)
    except (TerminalError, StorageError):
        raise
    except Exception as e:
        expected = "plain JSON (no annotation)" if annotation is serde.NO_ANNOTATION else annotation
        raise ResultMismatch(
            f"{what}: its result (a {type(value).__name__}) did not match its return "
            f"annotation {expected!r}, so it cannot be recorded: {type(e).__name__}: {e}"
        ) from e


def step_key(run: RunRecord, position: str, name: str) -> str:
    """``<run id>.<incarnation>:<position>:<name>``: the same across attempts and
    invocations of a step, and never the same for two runs. A keyed start derives its run
    id from the key, so a run started with that key after the first one expired has the
    same id; the incarnation (the run's creation time, ten base-32 characters) keeps its
    effects from being taken for the first run's."""
    return f"{run.run_id}.{incarnation(run)}:{position}:{name}"


class StepRun:
    """One step's execution across its attempts within this invocation."""

    def __init__(
        self,
        execution: ExecutionParts,
        position: str,
        name: str,
        previous: StepRecord | None,
        opts: StepOptionsResolved,
        kind: StepKind = StepKind.STEP,
    ) -> None:
        self.x = execution
        self.position = position
        self.name = name
        self.previous = previous
        self.opts = opts
        self.kind = kind
        self.run_id = execution.run.run_id
        self.idempotency_key = step_key(execution.run, position, name)
        self.attempt = (previous.attempt if previous else 0) + 1
        self.attempts: list[Attempt] = list(previous.attempts) if previous else []
        self.checkpoint_payload: dict[str, Any] | None = previous.checkpoint if previous else None
        self.refs: list[dict[str, str]] = list(previous.refs) if previous else []
        # An operator's retry reopens a failed step with its attempt count as the base, so
        # the retry policy starts afresh while the attempt history stays whole.
        self.detail: dict[str, Any] = {
            k: v for k, v in ((previous.detail or {}) if previous else {}).items() if k != "reason"
        }
        self.attempt_base = int(self.detail.get("attempt_base", 0))
        self.effect_actions: set[str] = set()
        # The error an effect raised after it had happened (its reference refused): the
        # body raising it fails the step for good (``effect``).
        self.refused: BaseException | None = None

    # --- record building -------------------------------------------------------------

    def record(self, status: StepStatus, **fields: Any) -> StepRecord:
        if fields.get("error_summary"):
            fields["error_summary"] = self.x.redact(fields["error_summary"])
        return self.x.new_record(
            self.position,
            self.name,
            self.kind,
            status,
            step_version=self.opts.version,
            attempt=self.attempt,
            attempts=list(self.attempts),
            checkpoint=self.checkpoint_payload,
            idempotency_key=self.idempotency_key,
            refs=list(self.refs),
            **{"detail": dict(self.detail) or None, **fields},
        )

    def adopt(self, stored: StepRecord, annotation: Any) -> Any:
        return self.x.replay_result(stored, annotation)

    # --- the attempt loop ----------------------------------------------------------

    def execute(self, body: Callable[[], Any], annotation: Any) -> Any:
        """Run the attempts on this thread: the body, and a backoff served in-process."""
        attempts = self.attempt_loop(annotation)
        try:
            request = next(attempts)
            while True:
                if request is _BODY:
                    try:
                        value = self.run_body(body)
                    except Exception as error:  # the attempt loop's to judge
                        request = attempts.throw(error)
                    else:
                        request = attempts.send(value)
                else:
                    self.x.idle(request)
                    request = attempts.send(None)
        except StopIteration as done:
            return done.value

    async def execute_async(
        self,
        body: Callable[[], Coroutine[Any, Any, Any]],
        annotation: Any,
        idle: Callable[[float], Coroutine[Any, Any, None]],
    ) -> Any:
        """The attempts of an awaited ``async def`` step (``durable.engine.async_workflow``): the
        same loop as ``execute``, awaiting the body and ``idle`` (a backoff served
        in-process), so the loop's other tasks (other steps' bodies) run meanwhile."""
        attempts = self.attempt_loop(annotation)
        try:
            request = next(attempts)
            while True:
                if request is _BODY:
                    try:
                        value = await self.run_body_async(body)
                    except Exception as error:  # the attempt loop's to judge
                        request = attempts.throw(error)
                    else:
                        request = attempts.send(value)
                else:
                    await idle(request)
                    request = attempts.send(None)
        except StopIteration as done:
            return done.value

    def attempt_loop(self, annotation: Any) -> Generator[Any, Any, Any]:
        """The attempt loop, as a generator: it yields ``_BODY`` where the body runs (and
        is sent its value, or thrown its error) and the seconds of a backoff served
        in-process; its return value is the step's. A generator, so a plain and an
        awaited step share one loop, each running bodies and waits its own way."""
        prev = self.previous
        waiting = prev is not None and prev.status == StepStatus.WAITING and prev.wake_at
        if waiting and parse_time(prev.wake_at) > self.x.clock.now():  # type: ignore[union-attr,arg-type]
            # woken before the backoff ended (another event, or an early timer)
            raise self.x.suspend(prev.wake_at, self.position, replayed=True)  # type: ignore[union-attr]
        if prev is not None and prev.status == StepStatus.RUNNING:
            interrupted = self.interrupted(prev)
            if interrupted is not None:
                outcome = yield from self.after_failure(interrupted, annotation)
                if outcome is not _RETRY_NOW:
                    return outcome
        if self.opts.explicit_budget and self.opts.budget > self.x.config.max_run_lifetime:
            # Refused before it is added to a date (timeout=timedelta.max would overflow).
            return self.fail_for_good(
                InvalidInput(
                    f"step {self.name!r}: timeout ({self.opts.budget}) is longer than the "
                    f"run's max_run_lifetime ({self.x.config.max_run_lifetime}); a step's "
                    "time budget is what one attempt may take",
                    field="timeout",
                ),
                annotation,
            )
        while True:
            if self.x.poisoned:
                self.x.poison_failed = True
                return self.fail_for_good(
                    WorkerInterrupted(
                        f"the worker died {self.x.config.max_takeovers} times running this "
                        "step (timeout, out of memory or crash); fix it and retry the run"
                    ),
                    annotation,
                )
            try:
                self.x.check_budget(self.opts.budget, explicit=self.opts.explicit_budget)
            except TerminalError as e:
                return self.fail_for_good(e, annotation)
            self.x.ensure_lease(self.opts.budget)
            started = self.x.now_text()
            attempt = Attempt(
                n=self.attempt,
                started_at=started,
                request_id=self.x.invocation.request_id,
                log_stream=self.x.invocation.log_stream,
            )
            self.attempts.append(attempt)
            if self.opts.semantics == "at_most_once_per_attempt":
                adopted = self.mark_running()
                if adopted is not None:
                    return self.adopt(adopted, annotation)
            self.x.count_body()
            self.effect_actions.clear()  # an action names one effect per attempt
            self.refused = None
            try:
                value = yield _BODY
            except StorageError as error:
                if error.retryable:
                    # The ledger or effect store is unavailable (a checkpoint, an effect
                    # record): not the step's fault. End the invocation; the lease expires
                    # and the next one replays, like any other transient storage failure.
                    raise
                attempt.finished_at = self.x.now_text()
                attempt.error_class = "terminal"
                attempt.error = self.x.redact(summarize(error, 500))
                return self.fail_for_good(error, annotation)
            except Exception as error:  # control-flow signals are BaseException
                attempt.finished_at = self.x.now_text()
                attempt.error_class = classify(error)
                attempt.error = self.x.redact(summarize(error, 500))
                if error is self.refused:  # an effect that happened: never called again
                    attempt.error_class = "terminal"
                    return self.fail_for_good(error, annotation)
                outcome = yield from self.after_failure(error, annotation)
                if outcome is _RETRY_NOW:
                    continue
                return outcome
            return self.record_result(value, attempt, annotation)

    def record_result(self, value: Any, attempt: Attempt, annotation: Any) -> Any:
        """Record what the body returned (DONE) and return it as a replay will decode it.

        The body has returned: whatever goes wrong from here is not its fault, and no
        retry policy may run it again (a charge that went through is not repeated). A
        value its annotation rejects (``ResultMismatch``), a codec's ``SerdesError`` and a
        value too large fail the step for good; only an unavailable ledger ends the
        invocation for the next one to replay."""
        try:
            encoded, decoded = recorded_form(
                self.x, value, annotation, f"step {self.name!r} at position {self.position}"
            )
        except StorageError as error:
            if error.retryable:  # the ledger (a run's data key), as for the body
                raise
            return self.fail_for_good(error, annotation)
        except Exception as error:
            return self.fail_for_good(error, annotation)
        attempt.finished_at = finished = self.x.now_text()
        try:
            stored = self.x.write_result(
                self.record(StepStatus.DONE, output=encoded, updated_at=finished)
            )
        except PayloadTooLarge as error:
            attempt.error_class = "terminal"
            attempt.error = summarize(error, 500)
            return self.fail_for_good(error, annotation)
        if stored.output != encoded or stored.status != StepStatus.DONE:
            return self.adopt(stored, annotation)
        return decoded

    def mark_running(self) -> StepRecord | None:
        """Write the RUNNING mark an at-most-once body starts after; a final record
        found there instead is returned, to adopt."""
        sent = self.x.clock.now()
        stored = self.x.write_fenced(self.record(StepStatus.RUNNING), starts_body=True)
        if stored.status.final:
            return stored
        # The mark is written; if this worker stalled while writing it past the end of its
        # lease, the body must not start now (a takeover or a cancel may have come
        # meanwhile): the next owner finds the attempt interrupted.
        self.x.check_lease_alive()
        # Within its lease, the mark's answer may still come back too late to vouch for
        # "no cancel" when the body starts: then look at the run again.
        self.x.vouched(sent, self.opts.budget)
        return None

    def run_body(self, body: Callable[[], Any]) -> Any:
        step_ctx = StepContext(self)
        step_token = bind_step(step_ctx)
        ctx_token = bind_context(None)  # a decorated step called inside a step is plain
        try:
            with self.x.engine.guard.step_code(), self.x.off_turn():
                value = body()
                if inspect.iscoroutine(value):  # an ``async def`` body: run it to its end
                    value = run_coroutine(value)
                return value
        finally:
            reset_context(ctx_token)
            reset_step(step_token)

    async def run_body_async(self, body: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """An ``async def`` body awaited on the workflow's loop. The context variables
        are the awaiting task's own; the determinism guard's state is the thread's, so it
        is switched off around each of the body's steps (``Scoped``), not around the await,
        during which other tasks run workflow code. Each step goes on only on a view of
        the run a start could rest on (``vouch_for_slice``)."""
        step_token = bind_step(StepContext(self))
        ctx_token = bind_context(None)  # a decorated step called inside a step is plain
        try:
            return await Scoped(body(), self.x.engine.guard.step_code, self.vouch_for_slice)
        finally:
            reset_context(ctx_token)
            reset_step(step_token)

    def vouch_for_slice(self) -> None:
        """Before an awaited body goes on after an ``await``: the loop is shared, so
        another body may have held it there for any time (a slow call of its own, a paused
        worker), and the view of the run its start rested on may be old by now. Like a
        start, the body goes on only on a look younger than ``cancel_check_interval``
        (else the lease is renewed, one fenced write that reads the run again) showing no
        cancel; else ``RunCanceled`` (or ``LeaseLost``) stops it at that ``await``, as a
        heartbeat's would, and the run ends as at any durable call. A look still fresh
        costs nothing, so a body's slices cost a renewal at most once per interval of
        the worker's time (the promise of ``docs/architecture.md``: a renewal at least
        every ``cancel_check_interval`` of work)."""
        x = self.x
        # No budget to cover again (its start did): the renewal is only for its look,
        # or for a lease about to end.
        x.ensure_lease(timedelta(0))
        if x.run.cancel_requested and not x.compensating:
            # Seen by another task's look, however recent: a body seen to go on after
            # the cancel counts as one started after it.
            raise RunCanceled(x.run.cancel_reason or "canceled")

    def interrupted(self, prev: StepRecord) -> WorkerInterrupted | None:
        """A RUNNING record means an attempt started and never finished."""
        if self.opts.semantics != "at_most_once_per_attempt":
            return None  # at-least-once: the RUNNING record only carries a checkpoint
        self.attempt = prev.attempt  # the interrupted attempt is the one that failed
        error = WorkerInterrupted(
            f"attempt {prev.attempt} was interrupted (worker died, timed out or lost its "
            "lease); at_most_once_per_attempt does not re-run it blindly"
        )
        if self.attempts:
            last = self.attempts[-1]
            last.finished_at = self.x.now_text()
            last.error_class = "retryable"
            last.error = summarize(error, 500)
        return error

    def after_failure(self, error: BaseException, annotation: Any) -> Generator[Any, Any, Any]:
        delay = self.opts.retry.next_delay(self.attempt - self.attempt_base, error)
        if delay is None:
            return self.fail_for_good(error, annotation)
        # A policy's delay may be as long as a timedelta holds; a run lives no longer than
        # max_run_lifetime, so no retry waits longer (a date past it would overflow). A run
        # that wakes past its lifetime ends as every such run does (LifetimeExceeded).
        delay = min(delay, self.x.config.max_run_lifetime)
        summary = summarize(error)
        if self.x.can_wait_in_process(delay, self.opts.budget):
            stored = self.x.write_fenced(
                self.record(
                    StepStatus.RETRYABLE_FAILED,
                    error_type=error_type_name(error),
                    error_class="retryable",
                    error_summary=summary,
                )
            )
            if stored.status.final:
                return self.adopt(stored, annotation)
            yield delay.total_seconds()  # the driver waits (``Execution.idle``)
            self.attempt += 1
            return _RETRY_NOW
        wake_at = format_time(self.x.clock.now() + delay)
        stored = self.x.write_fenced(
            self.record(
                StepStatus.WAITING,
                error_type=error_type_name(error),
                error_class="retryable",
                error_summary=summary,
                wake_at=wake_at,
                detail={**self.detail, "reason": "retry"},
            )
        )
        if stored.status.final:
            return self.adopt(stored, annotation)
        raise self.x.suspend(wake_at, self.position)

    def fail_for_good(self, error: BaseException, annotation: Any) -> Any:
        if self.attempts and self.attempts[-1].finished_at is None:
            last = self.attempts[-1]
            last.finished_at = self.x.now_text()
            last.error_class = "terminal"
            last.error = summarize(error, 500)
        stored = self.x.write_fenced(
            self.record(
                StepStatus.TERMINAL_FAILED,
                error_type=error_type_name(error),
                error_class="terminal",
                error_summary=summarize(error),
            )
        )
        if stored.status == StepStatus.DONE:
            return self.adopt(stored, annotation)
        raise StepFailed(
            stored.name,
            stored.position,
            stored.error_type or "Error",
            stored.error_summary or "",
            stored.attempt,
        ) from (error if isinstance(error, Exception) else None)

    # --- StepContext operations -------------------------------------------------------

    @property
    def checkpoint_state(self) -> Any:
        if not self.checkpoint_payload:
            return None
        return serde.decode(self.checkpoint_payload.get("state"))

    def checkpoint(self, state: Any, payload_version: int) -> None:
        turn = self.x.turn
        if turn is None:
            self._checkpoint(state, payload_version)
            return
        with turn.held():  # called from a body, which runs without the turn
            self._checkpoint(state, payload_version)

    def _checkpoint(self, state: Any, payload_version: int) -> None:
        try:
            text = serde.dumps_plain(state)
        except (TypeError, ValueError) as e:
            raise TypeError(f"checkpoint state must be plain JSON: {e}") from e
        self.checkpoint_payload = {"payload_version": payload_version, "state": self.x.redact(text)}
        now = self.x.clock.now()
        end = now + max(self.x.config.lease, self.opts.budget)
        remaining = self.x.remaining()
        if remaining is not None:  # never past the invocation's deadline
            end = min(end, now + timedelta(seconds=remaining) + self.x.config.deadline_overrun)
        changes = lease_changes(self.x.run, end, self.x.config.clock_skew)
        changes.update(self.x.progress_changes())  # rides in the run item's update
        try:
            written = self.x.ledger.write_step_fenced(
                self.record(StepStatus.RUNNING), self.x.guard(), changes
            )
        except ConditionFailed as e:
            raise LeaseLost() from e
        if not written:  # a final record exists: another worker finished this step
            raise LeaseLost()
        self.x.run = apply_changes(self.x.run, changes)

    def heartbeat(self) -> None:
        turn = self.x.turn
        if turn is None:
            self.x.ensure_lease(self.opts.budget)
            return
        with turn.held():  # called from a body, which runs without the turn
            self.x.ensure_lease(self.opts.budget)

    def record_ref(self, kind: str, value: str) -> None:
        if not kind or not isinstance(value, str):
            raise ValueError("record_ref(kind, value) needs a non-empty kind and a string value")
        ref = {"kind": kind, "value": value}
        if ref not in self.refs:
            self.refs.append(ref)

    def effect(
        self,
        action: str,
        call: Callable[[str], Any],
        reconcile: Callable[[str], Any] | None,
    ) -> Any:
        # The call (or the lookup that found it) returned: the effect has happened, so a
        # failure to store its reference (one that is not plain JSON) is not worth
        # another attempt, which would call the effect again. The attempt loop fails the
        # step for good when the body raises this error.
        returned = False

        def called(key: str) -> Any:
            nonlocal returned
            reference = call(key)
            returned = True
            return reference

        lookup: Callable[[str], Any] | None = None
        if reconcile is not None:
            find = reconcile

            def looked_up(key: str) -> Any:
                nonlocal returned
                found = find(key)
                returned = found is not None
                return found

            lookup = looked_up
        try:
            return self.x.engine.effects.perform(self, action, called, lookup)
        except StorageError:
            raise  # the effect store's own failure: judged as any other
        except Exception as error:
            if returned:
                self.refused = error
            raise
