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
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from durable.core.model import RunHistory, RunStatus
from durable.core.ports import Invocation
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
_WRITES = frozenset(
    {
        "create_run",
        "purge_leftovers",
        "claim",
        "update_run",
        "continue_run",
        "operate",
        "write_step",
        "write_step_fenced",
        "complete_waiting",
        "add_signal",
        "consume_signal",
        "claim_trigger",
    }
)


class CheckWrote(RuntimeError):
    """The check tried to write to the ledger (a bug: it must only read)."""


class ReadOnlyLedger:
    """A ledger whose every write raises ``CheckWrote``; reads pass through."""

    def __init__(self, ledger: Any) -> None:
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        if name in _WRITES:
            raise CheckWrote(f"check-deploy must not write, but called ledger.{name}")
        return getattr(self._ledger, name)


class Refusing:
    """A port the check must never use (it runs no step body, so it has no effect to
    record and no run to invoke): any call raises ``CheckWrote``."""

    def __init__(self, port: str) -> None:
        self._port = port

    def __getattr__(self, name: str) -> Any:
        raise CheckWrote(f"check-deploy must not act, but called {self._port}.{name}")


def dry_replay(engine: EngineParts, workflow: WorkflowDef, history: RunHistory) -> Exception | None:
    """Replay ``history``'s recorded steps on ``workflow`` without running a body or
    writing: None when the code agrees with every record, else what stops it there.

    A ``NonDeterminismError`` is a divergence (the code calls something else at a
    position). Any other exception is a replay the new code cannot get through: a stored
    input or result that no longer validates against the new annotations, the workflow
    code raising, a sealed value with no key to open it (``SecretsNeedKeys``). A replay
    raises no recorded failure on the way: it stops (``DryRunComplete``) at the first
    record that is not a success, before the workflow could see it."""
    from durable.engine.execution import Execution

    probe = Execution(engine, workflow, history, owner="dry-run", invocation=Invocation())
    probe.dry_run = True
    try:
        probe.run_workflow()
    except DryRunComplete:
        return None
    except Exception as e:
        return e
    except BaseException:  # a wait or a cancel: the replay got past every record
        return None
    return None


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
    verdict = RunVerdict(run.run_id, run.workflow, run.version, run.status.value, "ok")
    try:
        workflow = engine.app.get_workflow(run.workflow, run.version)
    except WorkflowNotFound:
        verdict.verdict = "unregistered"
        verdict.advice = (
            f"keep version {run.version} of {run.workflow!r} registered beside the new one "
            "until its runs finish (runs stay pinned to the version they started on), or "
            f"move this run with `durable retry {run.run_id} --upgrade-to N` once it fails, "
            f"or `durable fork {run.run_id} --from-step P`"
        )
        return verdict
    try:
        stopped = dry_replay(engine, workflow, history)
    except Exception as e:  # the probe itself could not be set up (a damaged item)
        verdict.verdict = "unchecked"
        verdict.advice = f"could not replay: {type(e).__name__}: {e}"
        return verdict
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
