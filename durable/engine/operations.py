"""Operator decisions after a failure (seed 000): cancel, retry from the failed step (on
the same or a newer version), fork from a step. Each is recorded on the run (who, when,
why) and decided before anything is written."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from durable.core.ids import new_ulid
from durable.core.lifetime import items_purge_at, lifetime_end
from durable.core.model import (
    TERMINAL_RUN_STATUSES,
    RunError,
    RunHistory,
    RunRecord,
    RunStatus,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    position_key,
    position_path,
    top_index,
)
from durable.core.ports import ConditionFailed
from durable.engine import lineage
from durable.errors import (
    InvalidInput,
    InvalidState,
    NonDeterminismError,
    RunNotFound,
)

if TYPE_CHECKING:
    from durable.engine.engine_parts import EngineParts

ACTIVE = tuple(s.value for s in RunStatus if s.value not in TERMINAL_RUN_STATUSES)
# Unleased in these, a run runs no code until a worker claims it: a cancel can end it at once.
_STOPPED = (RunStatus.PENDING.value, RunStatus.WAITING.value, RunStatus.RUNNING.value)


def _operation(
    engine: EngineParts, action: str, by: str | None, reason: str | None, **detail: Any
) -> dict[str, str]:
    op = {"action": action, "at": format_time(engine.clock.now())}
    if by:
        op["by"] = by
    if reason:
        op["reason"] = reason
    if detail:
        op["detail"] = ", ".join(f"{k}={v}" for k, v in detail.items())
    return op


# Failures a plain retry replays as they were: a divergence from the recorded steps, and a
# parallel or map whose completion rule failed (its decision is a record of the run).
_REPLAYS_THE_SAME = ("NonDeterminismError", "BatchFailed")


def available_decisions(run: RunRecord) -> list[str]:
    """What an operator can do with the run now (shown by the API and the CLI)."""
    if run.status == RunStatus.FAILED and run.compensated:
        return ["fork"]  # its steps were undone: nothing to retry from
    if run.status == RunStatus.FAILED:
        decisions = ["retry", "fork"]
        if run.error is not None and run.error.type.startswith(_REPLAYS_THE_SAME):
            # The same code replays the same failure: a new version, or a fork that runs
            # it again (a failed batch from its own step: `durable fork --from-step`).
            decisions = ["retry --upgrade-to <version>", "fork"]
        return decisions
    if run.terminal:
        return ["fork"]
    return ["cancel", "cancel --compensate", "signal"]


# --- cancel -----------------------------------------------------------------------


def cancel(
    engine: EngineParts, run_id: str, reason: str, compensate: bool, requested_by: str | None
) -> RunRecord:
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 1000:
        raise InvalidInput("reason must be a non-empty string (<= 1000 chars)", field="reason")
    run = engine.ledger.get_run(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}; list runs to find its id")
    for _ in range(_FOLLOWS):
        try:
            return _cancel_one(
                engine, _going(engine, run, run_id), reason, compensate, requested_by
            )
        except _ContinuedMeanwhile as moved:
            run = moved.run
    raise InvalidState(f"run {run_id} keeps continuing as new; cancel it again")


# Times one cancel follows a chain that moves on while it cancels (each link continued as
# new between the read and the write): never more than a couple in practice.
_FOLLOWS = 5


class _ContinuedMeanwhile(Exception):
    """The run continued as new between the cancel's read and its write."""

    def __init__(self, run: RunRecord) -> None:
        super().__init__(run.run_id)
        self.run = run


def _going(engine: EngineParts, run: RunRecord, addressed: str) -> RunRecord:
    """The run a cancel of ``run`` is for: ``run`` itself unless it ended; a run that
    continued as new is its chain's going end (a handle means the work, not a link of it:
    ``durable.engine.lineage``), so a cancel that lost the race with a continuation still
    stops the work. An ended chain has nothing to cancel."""
    if not run.terminal:
        return run
    reached = lineage.follow(engine.ledger.get_run, run)
    for _ in range(_FOLLOWS):  # a chain longer than one walk: on from where it stopped
        if reached.whole:
            break
        reached = lineage.follow(engine.ledger.get_run, reached.run)
    end = reached.run
    if reached.whole and end.run_id != run.run_id and not end.terminal:
        return end
    where = "" if end.run_id == addressed else f"; its chain ended in {end.run_id}"
    raise InvalidState(
        f"run {addressed} already finished ({run.status.value}{where}); there is nothing to cancel"
    )


def _cancel_one(
    engine: EngineParts, run: RunRecord, reason: str, compensate: bool, requested_by: str | None
) -> RunRecord:
    run_id = run.run_id
    if run.cancel_requested:
        return run  # canceling twice is harmless
    if run.status == RunStatus.COMPENSATING:
        raise InvalidState(
            f"run {run_id} is undoing its completed steps after a failure (COMPENSATING): a "
            "cancel would stop the undo half way, leaving what it books or charges in place, "
            "so it is refused. The run ends FAILED with its error once the undo is done "
            "(`durable show` follows it); an undo that cannot succeed fails the run for "
            "your attention"
        )
    now = format_time(engine.clock.now())
    try:
        run = engine.ledger.operate(
            run_id,
            statuses=ACTIVE,
            changes={
                "cancel_requested": True,
                "cancel_reason": reason,
                "cancel_compensate": compensate,
                "due_at": now,
            },
            operation=_operation(engine, "cancel", requested_by, reason, compensate=compensate),
            bump_inbox=True,
        )
    except ConditionFailed as e:
        if e.current is not None and lineage.named_successor(e.current) is not None:
            raise _ContinuedMeanwhile(e.current) from e
        if e.current is not None and e.current.terminal:
            raise InvalidState(f"run {run_id} finished meanwhile ({e.current.status.value})") from e
        raise RunNotFound(f"no run {run_id!r}") from e
    alone = run.parent is None and not run.children
    if run.lease_owner is None and not compensate and alone and run.status in _STOPPED:
        # Nobody holds it and nothing is left to run for it: cancel it now, with one
        # conditional write (no lease taken, no workflow code run in this request). A
        # running owner sees the request at its next lease check or durable call; a
        # COMPENSATING run finishes its compensations in a worker first. A child's end
        # is reported to its parent, and a parent's cancel reaches its children, in a
        # worker's final write (``durable.engine.children``): those go to a worker too.
        with contextlib.suppress(ConditionFailed):  # claimed meanwhile: the worker cancels
            canceled = engine.ledger.operate(
                run_id,
                statuses=_STOPPED,
                unleased=True,
                changes=engine.endings.final_changes(
                    run,
                    {
                        "status": RunStatus.CANCELED.value,
                        "error": RunError("Canceled", reason),
                    },
                ),
            )
            engine.cancel_timers(run_id)
            engine.leave_gate(canceled)  # its slot, or its place in line
            return canceled
    engine.invoke_worker(run_id, "cancel")
    return run


# --- retry ------------------------------------------------------------------------


def _check_upgrade(engine: EngineParts, history: RunHistory, version: int) -> None:
    """Replay the recorded steps on ``version`` without writing; refuse on divergence."""
    from durable.engine.deploy_check import dry_replay

    workflow = engine.app.get_workflow(history.run.workflow, version)
    stopped = dry_replay(engine, workflow, history)
    if isinstance(stopped, NonDeterminismError):
        raise InvalidState(
            f"version {version} cannot continue this run: at position {stopped.position} "
            f"the ledger has {stopped.recorded} but version {version} calls "
            f"{stopped.called}; fork the run instead"
        ) from stopped
    if stopped is not None:
        raise InvalidState(
            f"version {version} cannot continue this run: replaying its recorded steps "
            f"raises {type(stopped).__name__}: {str(stopped)[:300]}; fix that version, or "
            "fork the run instead"
        ) from stopped


def retry(
    engine: EngineParts, run_id: str, upgrade_to: int | None, requested_by: str | None
) -> RunRecord:
    history = engine.load(run_id)
    run = history.run
    if run.status != RunStatus.FAILED:
        raise InvalidState(f"run {run_id} is {run.status.value}; only FAILED runs can be retried")
    if engine.clock.now() > lifetime_end(
        run, engine.config.max_run_lifetime, engine.config.retention
    ):
        raise InvalidState(
            f"run {run_id} is past its max_run_lifetime "
            f"({engine.config.max_run_lifetime.days} days): the records that keep its side "
            "effects from repeating may be gone, so it cannot go on; fork it instead"
        )
    if run.compensated or any(s.kind == StepKind.COMPENSATION for s in history.steps.values()):
        raise InvalidState(
            f"run {run_id} was compensated; its earlier steps were undone, so retrying would "
            "continue from a state that no longer exists: fork it from a step instead"
        )
    if upgrade_to is None and run.error is not None and run.error.type == "BatchFailed":
        batch = _failed_batch(history)
        step = str(int(batch.split(".")[0])) if batch else "N"
        raise InvalidState(
            f"run {run_id} failed because a parallel or map failed its completion rule; that "
            "decision is recorded, so a retry would replay it and fail the same way: fork "
            f"the run to run the batch again (`durable fork {run_id} --from-step {step}`), "
            "or retry --upgrade-to a version that handles BatchFailed"
        )
    version = run.version
    if upgrade_to is not None:
        if upgrade_to <= run.version:
            raise InvalidInput(
                f"upgrade_to must be newer than the run's version {run.version}",
                field="upgrade_to",
            )
        _check_upgrade(engine, history, upgrade_to)
        version = upgrade_to
    else:
        engine.app.get_workflow(run.workflow, run.version)  # still deployed?
    # Out of its gate before it reopens (its failed invocation may not have left yet): the
    # reopened run enters again with a write of its own, which a late leave cannot undo.
    engine.leave_gate(run)
    now = format_time(engine.clock.now())
    try:
        reopened = engine.ledger.operate(
            run_id,
            statuses=(RunStatus.FAILED.value,),
            unleased=True,
            changes={
                "status": RunStatus.PENDING.value,
                "updated_at": now,
                "version": version,
                "error": None,
                "needs_attention": False,
                "output": None,
                "purge_at": None,
                "takeovers": 0,
                "takeover_mark": 0,
                "due_at": now,
            },
            reopen=_failed_step(history),
            operation=_operation(
                engine,
                "retry",
                requested_by,
                None,
                version=version,
                **({"upgraded_from": run.version} if upgrade_to else {}),
            ),
        )
    except ConditionFailed as e:
        raise InvalidState(f"run {run_id} changed meanwhile; look at it again") from e
    engine.invoke_worker(run_id, "retry")
    return reopened


def _failed_batch(history: RunHistory) -> str | None:
    """The position of the last batch whose decision failed (``ok`` false), if any."""
    import json

    failed = [
        p
        for p, s in history.steps.items()
        if s.kind == StepKind.BATCH and s.output and not json.loads(s.output).get("ok", True)
    ]
    return max(failed, default=None)


def _failed_step(history: RunHistory) -> StepRecord | None:
    """The failed step to run again: the one whose failure ended the run, with a fresh
    retry budget (``attempt_base``). Step failures the workflow caught and moved past stay
    final (re-running them could change the path replay must follow); a run that failed
    in its own code, with no step at fault, replays as it is (the fix is ``upgrade_to``)."""
    error = history.run.error
    position = error.position if error else None
    if error is not None and position is None and error.type == "StepFailed":
        # Recorded before runs named the failed step: the last failure is the one that
        # escaped (a handled one would not have failed the run with StepFailed itself).
        failed = [p for p, s in history.steps.items() if s.status == StepStatus.TERMINAL_FAILED]
        position = max(failed, default=None)
    step = history.steps.get(position) if position else None
    if step is None or step.status != StepStatus.TERMINAL_FAILED:
        return None
    detail = {**(step.detail or {}), "attempt_base": step.attempt}
    return replace(step, status=StepStatus.RETRYABLE_FAILED, detail=detail)


# --- fork -------------------------------------------------------------------------


def _settled_prefix(history: RunHistory) -> int:
    """How many steps from the first are settled: final, not compensations, with no gap.
    A fork may keep those and no more: a step recorded after an unfinished one (the
    ``submit`` of a callback never answered) belongs to a path the fork must walk anew."""
    count = 0
    while True:
        step = history.steps.get(position_path(count + 1))
        if step is None or not step.status.final or step.kind == StepKind.COMPENSATION:
            return count
        count += 1


def _parse_position(from_step: int | str, settled: int) -> int:
    text = str(from_step).strip()
    if isinstance(from_step, bool) or "." in text or not text.lstrip("-").isdigit():
        raise InvalidInput(
            f"from_step must be a top-level step number like 3 or '0003', not {from_step!r}",
            field="from_step",
        )
    index = int(text)
    if not 1 <= index <= settled + 1:
        raise InvalidInput(
            f"from_step must be between 1 and {settled + 1}: steps 1-{settled} are settled "
            "(a fork keeps them and runs the rest again); a later step is not settled, or "
            "does not exist",
            field="from_step",
        )
    return index


def fork(
    engine: EngineParts, run_id: str, from_step: int | str, requested_by: str | None
) -> RunRecord:
    from durable.engine.schedules import not_the_schedule_s  # only a fork needs the schedules

    history = engine.load(run_id)
    source = history.run
    if not source.terminal:
        raise InvalidState(
            f"run {run_id} is {source.status.value}: fork a finished run (cancel this one "
            "first, or wait for it to end)"
        )
    index = _parse_position(from_step, _settled_prefix(history))
    position = position_path(index)
    wf = engine.app.get_workflow(source.workflow, source.version)
    now = engine.clock.now()
    stamp = format_time(now)
    new = RunRecord(
        run_id=new_ulid(now),
        workflow=source.workflow,
        version=source.version,
        status=RunStatus.PENDING,
        input=source.input,
        input_hash=source.input_hash,
        created_at=stamp,
        updated_at=stamp,
        requested_by=requested_by or not_the_schedule_s(source.requested_by, run_id),
        due_at=stamp,
        forked_from=f"{run_id}@{position}",
        gate=engine.admission.gate_for(wf, source.input),
        data_key=source.data_key,  # the copied values stay sealed under the source's key
        # A lifetime of its own, from its own start: the copied steps carry its TTL.
        items_purge_at=items_purge_at(stamp, wf.max_lifetime, engine.config.retention),
        operations=[
            _operation(engine, "fork", requested_by, None, source=run_id, from_step=position)
        ],
    )
    # The copied steps first, the run item last: until it exists nothing can claim the
    # run, so a crash in between leaves inert items under an id nobody will ever use,
    # never a fork that runs without the steps it was meant to keep. Fences restart with
    # the new run's leases.
    # A batch's branch records go with its decision (their top-level index is the
    # batch's): its replay re-runs compensating branches from them.
    kept = sorted((p for p in history.steps if top_index(p) < index), key=position_key)
    for p in kept:
        engine.ledger.write_step(
            replace(history.steps[p], run_id=new.run_id, fence=0, purge_at=new.items_purge_at)
        )
    engine.ledger.create_run(new)
    engine.invoke_worker(new.run_id, "fork")
    return new
