"""Before a deploy: would the new code continue every run in flight? (``durable check-deploy``)

A run replays its ledger on every invocation, so code that calls its steps in another
order, under other names, or drops the version a run is pinned to breaks the runs that
started on the old code. The engine parks such a run loudly when it meets it; this module
finds them before the deploy: each unfinished run's recorded steps are replayed against the
*new* app, with no step body run and nothing written (the dry replay ``retry
--upgrade-to`` also uses), and the run gets a verdict with what to do about it.

The ledger given is wrapped so that any write raises: a check that could change a run is a
bug, not a risk to take.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from durable.core.flow import GateState
from durable.core.ledger_forward import ForwardReads
from durable.core.model import RunHistory, RunRecord, RunStatus, SignalRecord, StepRecord
from durable.core.ports import (
    ChildReport,
    Claim,
    EffectRecord,
    EffectStore,
    Invocation,
    Invoker,
    Ledger,
    RunGuard,
)
from durable.core.retention import visible_history
from durable.core.secrets import SecretsNeedKeys
from durable.engine.interrupts import DryRunComplete
from durable.errors import NonDeterminismError, StorageError, WorkflowNotFound

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.engine.engine_parts import EngineParts

Verdict = Literal["ok", "nondeterministic", "fails", "unregistered", "unchecked"]
# What would break a run: the gate and the CLI fail on these (and on unchecked runs).
BREAKS = ("nondeterministic", "fails", "unregistered")
# Runs that will run code again; a failed run meets new code only through a retry, which
# checks its upgrade itself.
UNFINISHED = (
    RunStatus.PENDING.value,
    RunStatus.RUNNING.value,
    RunStatus.WAITING.value,
    RunStatus.COMPENSATING.value,
)


class CheckWrote(RuntimeError):
    """The check tried to write to the ledger (a bug: it must only read)."""


def _refused(port: str, name: str, verb: str = "write") -> NoReturn:
    raise CheckWrote(f"check-deploy must not {verb}, but called {port}.{name}")


class ReadOnlyLedger(ForwardReads, Ledger):
    """A ledger whose every write raises ``CheckWrote``; reads pass through.

    Each write of the port is refused by a method of its own: mypy refuses to build a
    ``ReadOnlyLedger`` until a write added to the port later is refused here too."""

    def create_run(self, run: RunRecord) -> RunRecord:
        _refused("ledger", "create_run")

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        _refused("ledger", "delete_run")

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        _refused("ledger", "purge_leftovers")

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
        _refused("ledger", "claim")

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        _refused("ledger", "update_run")

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        _refused("ledger", "continue_run")

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
        _refused("ledger", "operate")

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        _refused("ledger", "start_child")

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        _refused("ledger", "start_children")

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        _refused("ledger", "finish_child")

    def write_gate(self, name: str, state: GateState) -> bool:
        _refused("ledger", "write_gate")

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        _refused("ledger", "write_step")

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        _refused("ledger", "write_step_fenced")

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        _refused("ledger", "complete_waiting")

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        _refused("ledger", "extend_wait")

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        _refused("ledger", "add_signal")

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        _refused("ledger", "consume_signal")

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        _refused("ledger", "claim_trigger")


class Refusing(Invoker, EffectStore):
    """The invoker or effect store (``port`` names which) the check must never use: it
    runs no step body, so it has no effect to record and no run to invoke. Every method
    of both ports raises ``CheckWrote``, each written out, so mypy sees both implemented."""

    def __init__(self, port: str) -> None:
        self._port = port

    def invoke(self, run_id: str, reason: str, hop: int = 0) -> None:
        _refused(self._port, "invoke", "act")

    def begin(self, key: str, expiration: int, *, now: int) -> EffectRecord | None:
        _refused(self._port, "begin", "act")

    def complete(self, key: str, reference: str, expiration: int) -> None:
        _refused(self._port, "complete", "act")


@dataclass
class DryReplay:
    """How a dry replay went: what stopped it (None: the code agreed with every record),
    and the position of the last durable call the code made (where it stopped, when a
    record was missing or not a success; None before any call)."""

    stopped: Exception | None
    position: str | None


def dry_replay(engine: EngineParts, workflow: WorkflowDef, history: RunHistory) -> Exception | None:
    """Replay ``history``'s recorded steps on ``workflow`` without running a body or
    writing: None when the code agrees with every record, else what stops it there.

    A ``NonDeterminismError`` is a divergence (the code calls something else at a
    position). Any other exception is a replay the new code cannot get through: a stored
    input or result that no longer validates against the new annotations, the workflow
    code raising, a sealed value with no key to open it (``SecretsNeedKeys``). A replay
    raises no recorded failure on the way: it stops (``DryRunComplete``) at the first
    record that is not a success, before the workflow could see it."""
    return dry_replay_at(engine, workflow, history).stopped


def dry_replay_at(engine: EngineParts, workflow: WorkflowDef, history: RunHistory) -> DryReplay:
    """``dry_replay``, and where the code was when it stopped (``durable replay`` says
    how far a recorded run's history carried the code)."""
    from durable.engine.execution import Execution

    probe = Execution(engine, workflow, history, owner="dry-run", invocation=Invocation())
    probe.dry_run = True
    stopped: Exception | None = None
    try:
        probe.run_workflow()
    except DryRunComplete:
        pass
    except Exception as e:
        stopped = e
    except BaseException:  # a wait or a cancel: the replay got past every record
        pass
    return DryReplay(stopped, probe.position)


@dataclass
class RunVerdict:
    run_id: str
    workflow: str
    version: int
    status: str
    verdict: Verdict
    position: str | None = None
    recorded: str | None = None
    called: str | None = None
    advice: str = ""


@dataclass(frozen=True)
class Resume:
    """Where a check stopped for time goes on: a workflow, a status, a listing cursor."""

    workflow: str
    status: str
    cursor: str | None = None

    @classmethod
    def of(cls, data: Any) -> Resume | None:
        if data is None:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("workflow"), str):
            raise ValueError("resume: pass the 'resume' object a previous check returned")
        return cls(str(data["workflow"]), str(data.get("status")), data.get("cursor"))


@dataclass
class Report:
    runs: list[RunVerdict] = field(default_factory=list)
    seconds: float = 0.0
    resume: Resume | None = None

    @property
    def broken(self) -> list[RunVerdict]:
        return [r for r in self.runs if r.verdict in BREAKS]

    @property
    def unchecked(self) -> list[RunVerdict]:
        return [r for r in self.runs if r.verdict == "unchecked"]

    def summary(self) -> dict[tuple[str, int], dict[str, int]]:
        """Per (workflow, version): how many runs got each verdict."""
        table: dict[tuple[str, int], dict[str, int]] = {}
        for r in self.runs:
            counts = table.setdefault((r.workflow, r.version), {})
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        return table

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": len(self.runs),
            "broken": len(self.broken),
            "seconds": round(self.seconds, 3),
            "runs": [asdict(r) for r in self.runs],
            "resume": asdict(self.resume) if self.resume else None,
        }


def check_run(engine: EngineParts, history: RunHistory) -> RunVerdict:
    run = history.run
    try:
        workflow = engine.app.get_workflow(run.workflow, run.version)
    except WorkflowNotFound:
        return unregistered(run)
    try:
        stopped = dry_replay(engine, workflow, history)
    except Exception as e:  # the probe itself could not be set up (a damaged item)
        verdict = RunVerdict(run.run_id, run.workflow, run.version, run.status.value, "unchecked")
        verdict.advice = f"could not replay: {type(e).__name__}: {e}"
        return verdict
    return judge(run, stopped)


def unregistered(run: RunRecord) -> RunVerdict:
    """The verdict on a run whose workflow version the code does not define."""
    verdict = RunVerdict(run.run_id, run.workflow, run.version, run.status.value, "unregistered")
    verdict.advice = (
        f"keep version {run.version} of {run.workflow!r} registered beside the new one "
        "until its runs finish (runs stay pinned to the version they started on), or "
        f"move this run with `durable retry {run.run_id} --upgrade-to N` once it fails, "
        f"or `durable fork {run.run_id} --from-step P`"
    )
    return verdict


def judge(run: RunRecord, stopped: Exception | None) -> RunVerdict:
    """The verdict on ``run`` given what stopped its dry replay (``dry_replay``)."""
    verdict = RunVerdict(run.run_id, run.workflow, run.version, run.status.value, "ok")
    if stopped is None:
        return verdict
    if isinstance(stopped, NonDeterminismError):
        verdict.verdict = "nondeterministic"
        verdict.position = stopped.position
        verdict.recorded = stopped.recorded
        verdict.called = stopped.called
        verdict.advice = (
            f"register the changed code as a new version of {run.workflow!r} (new runs "
            f"take it; this run stays on version {run.version}), or keep the old call "
            "order for runs that recorded it"
        )
    elif isinstance(stopped, CheckWrote | SecretsNeedKeys | StorageError):
        # Not the code's verdict: the check could not see this run through.
        verdict.verdict = "unchecked"
        verdict.called = f"{type(stopped).__name__}: {stopped}"
        verdict.advice = (
            "run the check where it can read the run and open its sealed values "
            "(the worker's role, or DURABLE_KMS_KEY_ID)"
        )
    else:
        verdict.verdict = "fails"
        verdict.called = f"{type(stopped).__name__}: {str(stopped)[:300]}"
        verdict.advice = (
            "the new code raises while replaying what this run recorded (a stored input or "
            "result that no longer validates, or code that now raises): the run would fail "
            f"when it wakes; register the change as a new version of {run.workflow!r} and "
            f"keep version {run.version} for the runs that started on it"
        )
    return verdict


def check_deploy(
    engine: EngineParts,
    workflows: Iterable[str],
    *,
    page_size: int = 100,
    resume: Resume | None = None,
    stop: Callable[[], bool] | None = None,
) -> Report:
    """Check every unfinished run of ``workflows`` against ``engine``'s (new) app.

    ``engine`` must be built on a ``ReadOnlyLedger``. Listing goes through the listing
    index one workflow at a time (never a scan), so a workflow the new code no longer
    defines is checked only when named here.

    A check bounded in time (a Lambda invocation: the deploy hook's) passes ``stop``,
    asked between pages; when it says stop, the report's ``resume`` is where a next call
    (with the same ``workflows``) goes on. A finished check has ``resume`` None.
    """
    began = time.perf_counter()
    report = Report()
    positions = [(name, status) for name in dict.fromkeys(workflows) for status in UNFINISHED]
    start, cursor = 0, None
    if resume is not None:
        where = (resume.workflow, resume.status)
        if where not in positions:
            raise ValueError(
                f"resume names workflow {resume.workflow!r} and status {resume.status!r}, "
                "which this check does not list: pass the same workflows as the first call"
            )
        start, cursor = positions.index(where), resume.cursor
    for name, status in positions[start:]:
        while True:
            if stop is not None and stop():
                report.resume = Resume(name, status, cursor)
                report.seconds = time.perf_counter() - began
                return report
            page = engine.ledger.list_runs(
                workflow=name, status=status, limit=page_size, cursor=cursor
            )
            for listed in page.items:
                history = visible_history(engine.ledger.load(listed.run_id))
                if history is not None and history.run.status.value in UNFINISHED:
                    report.runs.append(check_run(engine, history))
            cursor = page.cursor
            if cursor is None:
                break
    report.seconds = time.perf_counter() - began
    return report
