"""The one boundary every write to the ledger crosses: no live callback token is stored.

A callback token is a bearer credential: whoever holds it answers the wait. It must never
be stored where a reader of the table, its backups or the read API would find it. The
engine keeps tokens out of the values it knows carry them (a ``submit`` step's result, an
effect's reference), but workflow code can send a token anywhere: a child's input, an
exception's message, a signal's payload, a successor's input, a checkpoint. So instead of
listing places, the engine's ledger is wrapped in ``WriteBoundary``, and every value any
write method takes passes ``scrub``: a text with a token's shape (``<run id>.<position>.
<43-character MAC>``, the only shape the engine mints: ``durable.core.tokens``) has it replaced
by ``<callback token redacted>``, in a run's input and output, its error and cancel reason,
a step's output, error, attempts, checkpoint, references and detail, a signal's payload,
an operator's note. A secret-typed value is sealed before it gets here and holds no token
in clear, which is how a callback URL is handed to another run: type it as a secret
(``SecretStr``) in that run's input, and it is sealed under that run's own key.

Records are scrubbed in place (``StepRecord`` and ``RunRecord`` are mutable): the engine
tells its own write from an adopted one by identity, and a token-free record is the same
object after the boundary as before. The scan is a fast search for a token's tail over
texts that contain a dot, then the full pattern only where one is: a few microseconds for
a step's record (``benchmarks.write_boundary`` measures it against no boundary at all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from durable.core.flow import GateState
from durable.core.ledger_forward import ForwardReads
from durable.core.model import Attempt, RunError, RunRecord, SignalRecord, StepRecord
from durable.core.ports import ChildReport, Claim, Ledger, RunGuard
from durable.core.token_shape import REDACTED_TOKEN, TOKEN_TEXT, scrub_text

__all__ = ["REDACTED_TOKEN", "TOKEN_TEXT", "WriteBoundary", "scrub", "scrub_text"]


def scrub(value: Any) -> Any:
    """``value`` (JSON-like, or a record the ledger stores) with every token redacted;
    records are changed in place and returned."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):  # a key is text stored too (a checkpoint's, a detail's)
        return {scrub_text(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub(v) for v in value)
    if isinstance(value, RunError):
        value.message = scrub_text(value.message)
    elif isinstance(value, RunRecord):
        _scrub_run(value)
    elif isinstance(value, StepRecord):
        _scrub_step(value)
    elif isinstance(value, SignalRecord):
        value.payload = scrub_text(value.payload)
    return value


def _scrub_run(run: RunRecord) -> None:
    run.input = scrub_text(run.input)
    if run.output is not None:
        run.output = scrub_text(run.output)
    if run.error is not None:
        scrub(run.error)
    if run.cancel_reason is not None:
        run.cancel_reason = scrub_text(run.cancel_reason)
    if run.operations:
        run.operations = scrub(run.operations)


def _scrub_step(step: StepRecord) -> None:
    if step.output is not None:
        step.output = scrub_text(step.output)
    if step.error_summary is not None:
        step.error_summary = scrub_text(step.error_summary)
    for attempt in step.attempts:
        _scrub_attempt(attempt)
    if step.checkpoint is not None:
        step.checkpoint = scrub(step.checkpoint)
    if step.refs:
        step.refs = scrub(step.refs)
    if step.detail is not None:
        step.detail = scrub(step.detail)


def _scrub_attempt(attempt: Attempt) -> None:
    if attempt.error is not None:
        attempt.error = scrub_text(attempt.error)


def _changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    return {name: scrub(value) for name, value in changes.items()}


def _report(report: ChildReport) -> ChildReport:
    output = None if report.output is None else scrub_text(report.output)
    message = None if report.error_message is None else scrub_text(report.error_message)
    if (output, message) == (report.output, report.error_message):
        return report
    return replace(report, output=output, error_message=message)


class WriteBoundary(ForwardReads, Ledger):
    """``ledger`` with every value it is asked to write scrubbed first; reads pass.

    Every write of the port is written out here (``durable.core.ledger_forward``): a write
    added to the port later cannot reach storage around the boundary, since mypy refuses
    to build a ``WriteBoundary`` until it is implemented."""

    @property
    def inner(self) -> Ledger:
        return self._ledger

    def create_run(self, run: RunRecord) -> RunRecord:
        return self._ledger.create_run(scrub(run))

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        # Deletes an item; it stores no value.
        return self._ledger.delete_run(run_id, created_at=created_at)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        # Deletes items; it stores no value.
        return self._ledger.purge_leftovers(run_id, before=before, keep_expiring=keep_expiring)

    def claim(
        self,
        run_id: str,
        owner: str,
        *,
        now: str,
        lease_until: str,
        stale_before: str,
        due_at: str | None = None,
    ) -> Claim | None:
        # Stores the worker's lease and times, which the engine makes: no user value.
        return self._ledger.claim(
            run_id,
            owner,
            now=now,
            lease_until=lease_until,
            stale_before=stale_before,
            due_at=due_at,
        )

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        return self._ledger.update_run(run_id, guard, _changes(changes))

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        self._ledger.continue_run(run_id, guard, _changes(changes), scrub(successor))

    def operate(
        self,
        run_id: str,
        *,
        statuses: tuple[str, ...],
        changes: Mapping[str, Any],
        operation: Mapping[str, str] | None = None,
        bump_inbox: bool = False,
        unleased: bool = False,
        reopen: StepRecord | None = None,
    ) -> RunRecord:
        if operation is not None:
            operation = scrub(dict(operation))
        if reopen is not None:
            scrub(reopen)
        return self._ledger.operate(
            run_id,
            statuses=statuses,
            changes=_changes(changes),
            operation=operation,
            bump_inbox=bump_inbox,
            unleased=unleased,
            reopen=reopen,
        )

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        return self._ledger.start_child(scrub(step), guard, scrub(child))

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        for record in (*steps, *children):
            scrub(record)
        return self._ledger.start_children(steps, guard, children)

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        return self._ledger.finish_child(run_id, guard, _changes(changes), _report(report), now=now)

    def write_gate(self, name: str, state: GateState) -> bool:
        # A flow-control gate holds counts and the engine's run ids: no user value.
        return self._ledger.write_gate(name, state)

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        return self._ledger.write_step(scrub(step), guard)

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        return self._ledger.write_step_fenced(scrub(step), guard, _changes(run_changes))

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        self._ledger.complete_waiting(scrub(step), token_hash=token_hash, now=now)

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        self._ledger.extend_wait(
            scrub(step), token_hash=token_hash, now=now, waiting_for=waiting_for
        )

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        self._ledger.add_signal(scrub(signal), now=now)

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        # ``signal`` only names the stored signal (marked consumed): its payload, scrubbed
        # when it was added, is not written again.
        return self._ledger.consume_signal(scrub(step), signal, guard)

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        # Moves a due time the engine computed: no user value.
        return self._ledger.claim_trigger(
            run_id, due_at, new_due_at, stale_before=stale_before, skew=skew
        )
