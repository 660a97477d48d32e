"""A recorded run in a file, and the current code replayed over it (``durable export`` /
``durable replay``, ``LocalRunner.replay``).

``export_run`` reads a run's records from a ledger (a deployed stack's table, ``durable
dev``'s, a ``LocalRunner``'s memory) into one JSON document; ``replay`` loads such a
document and runs the app's code for that workflow over the records with the deploy
gate's dry replay (``durable.engine.deploy_check``): no step body runs, each step returns
what it recorded, nothing is written, and the replay stops at the first position the
history has no settled record for. It is plain Python in this process, so a
``breakpoint()`` in the workflow code stops there, with the recorded values in hand.

What the document holds, and why:

* the run's record (input, status, output, error), every step record in position order
  and every signal, as the ledger holds them; values kept aside in the payload store are
  fetched and put in their place when the store is reachable (else the reference stays,
  listed under ``unresolved``, and a replay that needs it says so);
* no secret in clear: a sealed value (``SecretStr`` and kin) is written ``"***"``, as the
  console shows it, and the run's wrapped data key is left out, so even a holder of the
  KMS key can open nothing from the file. A replay hands the workflow ``"***"`` where a
  secret was (a ``SecretStr("***")``); a ``Secret[int]`` cannot be ``"***"``, so such a
  run replays only up to where that value is read;
* no callback token: the ledger never holds one (the write boundary redacts them), and
  the nonce and hash a token is checked against are left out too;
* ``format``: the document's layout version. A reader refuses a format it does not know
  rather than guess.

A run that continued as new is a chain of runs, each with its own history. The export
holds the run asked for; with ``chain=True`` it holds that run and every later link
(``runs`` in order), and a replay replays each one and reports the first that does not
replay cleanly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durable.core.claim_check import ClaimCheck
from durable.core.clock import SystemClock
from durable.core.config import EngineConfig
from durable.core.model import (
    Attempt,
    RunError,
    RunHistory,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    position_key,
)
from durable.core.ports import Ledger
from durable.core.retention import visible_history
from durable.core.secrets import MASK, SEALED, masked
from durable.engine.deploy_check import (
    ReadOnlyLedger,
    Refusing,
    RunVerdict,
    dry_replay_at,
    judge,
    unregistered,
)
from durable.engine.lineage import MAX_HOPS, named_successor
from durable.errors import DurableError, NonDeterminismError, WorkflowNotFound

if TYPE_CHECKING:
    from durable.engine.registry import App

FORMAT = 1
# Fields a file never carries: the run's wrapped data key (with the KMS key it would open
# the sealed values, which the file masks anyway) and what a callback token is checked
# against. The lease fields say which worker held the run at the export: noise here.
_LEFT_OUT = {
    "data_key",
    "token_nonce",
    "token_hash",
    "lease_owner",
    "lease_until",
}


class ReplayFileError(DurableError):
    """A file that is not a run export this version can read."""


# --- export --------------------------------------------------------------------------------


def _masked_text(text: str) -> str:
    """A stored JSON text with every sealed value written ``"***"`` (the same text when it
    holds none: a codec's text stays byte for byte what the codec wrote)."""
    if SEALED not in text:
        return text
    try:
        return json.dumps(masked(json.loads(text)), separators=(",", ":"), ensure_ascii=False)
    except ValueError:  # not JSON (never expected): keep nothing that may be ciphertext
        return json.dumps(MASK)


def _plain(value: Any) -> Any:
    """A record field as JSON data, sealed values masked wherever they are."""
    if isinstance(value, str):
        return _masked_text(value)
    if isinstance(value, Attempt | RunError):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in masked(value).items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _record(record: RunRecord | StepRecord | SignalRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name in _LEFT_OUT or value is None:
            continue
        out[f.name] = _plain(value)
    return out


def _resolved(claims: ClaimCheck | None, record: Any, where: str, unresolved: list[str]) -> Any:
    """``record`` with its offloaded values fetched, or as it is (noted) when the payload
    store cannot be read from here."""
    if claims is None:
        return record
    try:
        return claims.resolve(record)
    except Exception as e:  # an unreachable bucket, no credentials, a purged object
        unresolved.append(f"{where}: {type(e).__name__}: {str(e)[:200]}")
        return record


def _history(ledger: Ledger, run_id: str) -> tuple[RunHistory, list[str]]:
    claims = ledger if isinstance(ledger, ClaimCheck) else None
    raw = (claims.unresolved() if claims is not None else ledger).load(run_id)
    history = visible_history(raw)
    if history is None:
        raise ReplayFileError(f"no run {run_id!r} in this ledger")
    unresolved: list[str] = []
    run = _resolved(claims, history.run, f"run {run_id} input/output", unresolved)
    steps = {
        p: _resolved(claims, s, f"run {run_id} step {s.name!r} at {p}", unresolved)
        for p, s in history.steps.items()
    }
    signals = [
        _resolved(claims, s, f"run {run_id} signal {s.name!r}", unresolved) for s in history.signals
    ]
    return RunHistory(run, steps, signals), unresolved


def export_run(ledger: Ledger, run_id: str, *, chain: bool = False) -> dict[str, Any]:
    """The run ``run_id`` of ``ledger`` as a replayable document (``FORMAT``).

    Pass the engine's claim check (``engine.claims``, or ``ClaimCheck(ledger, store)``)
    for values kept in a payload store to be fetched into the document. With ``chain``,
    the runs it continued as new into follow it, up to the chain's current end."""
    runs: list[dict[str, Any]] = []
    unresolved: list[str] = []
    current: str | None = run_id
    previous: str | None = None
    while current is not None and len(runs) <= MAX_HOPS:
        history, missing = _history(ledger, current)
        if previous is not None and history.run.continued_from != previous:
            break  # an output that only looks like a continuation: not a link
        unresolved += missing
        runs.append(
            {
                "run": _record(history.run),
                "steps": [
                    _record(history.steps[p]) for p in sorted(history.steps, key=position_key)
                ],
                "signals": [_record(s) for s in history.signals],
            }
        )
        previous, current = current, named_successor(history.run) if chain else None
    first = runs[0]["run"]
    document: dict[str, Any] = {
        "format": FORMAT,
        "exported_at": format_time(SystemClock().now()),
        "run_id": run_id,
        "workflow": first["workflow"],
        "version": first["version"],
        "runs": runs,
    }
    if unresolved:
        document["unresolved"] = unresolved
    return document


def dumps(document: Mapping[str, Any]) -> str:
    """The document as the file holds it (indented: a reviewer reads it in a diff)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# --- load ----------------------------------------------------------------------------------


def _build(cls: type[Any], data: Any, what: str) -> Any:
    if not isinstance(data, dict):
        raise ReplayFileError(f"{what} is not an object")
    known = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in known})
    except TypeError as e:
        raise ReplayFileError(f"{what} is incomplete ({e})") from e


def _run_of(data: Any) -> RunRecord:
    run: RunRecord = _build(RunRecord, data, "a run record")
    run.status = RunStatus(run.status)
    if isinstance(run.error, dict):
        run.error = RunError.from_dict(run.error)
    return run


def _step_of(data: Any) -> StepRecord:
    step: StepRecord = _build(StepRecord, data, "a step record")
    step.kind, step.status = StepKind(step.kind), StepStatus(step.status)
    attempts: list[Any] = step.attempts  # dicts, as the file holds them
    step.attempts = [Attempt.from_dict(a) for a in attempts]
    return step


def histories(document: Mapping[str, Any]) -> list[RunHistory]:
    """The run histories a document holds, in chain order."""
    version = document.get("format")
    if version != FORMAT:
        raise ReplayFileError(
            f"a run export of format {version!r}; this version of durable reads format "
            f"{FORMAT} (export the run again with it, or upgrade durable)"
        )
    runs = document.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ReplayFileError("a run export with no runs")
    out = []
    try:
        for entry in runs:
            run = _run_of(entry.get("run"))
            steps = [_step_of(s) for s in entry.get("steps") or []]
            signals = [_build(SignalRecord, s, "a signal") for s in entry.get("signals") or []]
            out.append(RunHistory(run, {s.position: s for s in steps}, signals))
    except (ValueError, AttributeError, KeyError) as e:
        raise ReplayFileError(f"a damaged run export: {e}") from e
    return out


def load(source: str | os.PathLike[str] | Mapping[str, Any]) -> Mapping[str, Any]:
    """A document: a path to a file ``durable export`` wrote, or the document itself."""
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ReplayFileError(f"no file {str(path)!r}") from e
    except ValueError as e:
        raise ReplayFileError(f"{str(path)!r} is not JSON ({e})") from e
    if not isinstance(data, dict):
        raise ReplayFileError(f"{str(path)!r} is not a run export (not a JSON object)")
    return data


# --- replay --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where the code parted from the record: the position, what the run recorded
    there and what the code calls now (e.g. ``step 'charge'`` / ``step 'charge_card'``)."""

    position: str
    recorded: str
    called: str

    def __str__(self) -> str:
        return f"at position {self.position}: recorded {self.recorded}, now {self.called}"


@dataclass
class RunReplay:
    """One run's replay: the deploy gate's verdict on it (``ok``, ``nondeterministic``,
    ``fails``, ``unregistered``, ``unchecked``) and where the code stopped."""

    verdict: RunVerdict
    # What stopped the code other than a divergence (a stored value the code no longer
    # validates, the code raising): the exception itself, traceback and all.
    error: Exception | None = None
    # The position of the last durable call the code made: where a record was missing
    # (new work), or the end of the code.
    stopped_at: str | None = None
    records: int = 0

    @property
    def ok(self) -> bool:
        return self.verdict.verdict == "ok"

    @property
    def divergence(self) -> Divergence | None:
        v = self.verdict
        if v.verdict != "nondeterministic" or v.position is None:
            return None
        return Divergence(v.position, v.recorded or "", v.called or "")


@dataclass
class ReplayResult:
    """What ``replay`` found. ``ok`` when every run replayed cleanly; else ``problem``
    is the first run that did not, with its ``divergence`` or ``error``."""

    runs: list[RunReplay] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    @property
    def problem(self) -> RunReplay | None:
        return next((r for r in self.runs if not r.ok), None)

    @property
    def diverged(self) -> bool:
        return self.divergence is not None

    @property
    def divergence(self) -> Divergence | None:
        problem = self.problem
        return None if problem is None else problem.divergence

    @property
    def verdict(self) -> str:
        problem = self.problem
        return "ok" if problem is None else problem.verdict.verdict

    @property
    def error(self) -> Exception | None:
        problem = self.problem
        return None if problem is None else problem.error

    def summary(self) -> str:
        """What a person reads: one line per run, and what to do about a problem."""
        lines = []
        for r in self.runs:
            v = r.verdict
            head = f"run {v.run_id} ({v.workflow} v{v.version}, {v.status}, {r.records} records)"
            if r.ok:
                where = f", up to position {r.stopped_at}" if r.stopped_at else ""
                lines.append(f"{head}: replays cleanly{where}")
            elif r.divergence is not None:
                lines.append(f"{head}: diverges {r.divergence}")
            else:
                lines.append(f"{head}: {v.verdict}: {v.called or v.advice}")
        problem = self.problem
        if problem is not None and problem.verdict.advice:
            lines.append(f"  -> {problem.verdict.advice}")
        lines += [f"not fetched from the payload store: {u}" for u in self.unresolved]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "divergence": asdict(self.divergence) if self.divergence else None,
            "runs": [
                {
                    **asdict(r.verdict),
                    "stopped_at": r.stopped_at,
                    "records": r.records,
                    "error": f"{type(r.error).__name__}: {r.error}" if r.error else None,
                }
                for r in self.runs
            ],
            "unresolved": self.unresolved,
        }


def _engine(app: App, config: EngineConfig | None, empty: Ledger) -> Any:
    """An engine that can only read: a ledger that refuses every write (the gate's) over
    ``empty`` (a fresh ledger the caller makes: the engine imports no adapter), no
    invoker nor effect store, no key service (the file's secrets are masked), no payload
    store (the file holds the values themselves), no determinism guard (a debugger in
    the workflow code is welcome)."""
    from durable.engine.engine import Engine

    return Engine(
        app,
        ReadOnlyLedger(empty),
        Refusing("invoker"),
        Refusing("effect store"),
        config=config,
    )


def replay(
    app: App,
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    empty: Ledger,
    config: EngineConfig | None = None,
) -> ReplayResult:
    """Replay the run(s) of ``source`` (a file ``durable export`` wrote, or its document)
    on ``app``'s code for their workflow and version, over ``empty`` (a fresh ledger:
    ``MemoryLedger()``); raises only for a file it cannot read (``ReplayFileError``),
    never for what the replay finds."""
    document = load(source)
    result = ReplayResult(unresolved=list(document.get("unresolved") or []))
    engine = _engine(app, config, empty)
    for recorded in histories(document):
        run = recorded.run
        records = len(recorded.steps)
        try:
            workflow = app.get_workflow(run.workflow, run.version)
        except WorkflowNotFound:
            result.runs.append(RunReplay(unregistered(run), records=records))
            break
        try:
            # A value the export could not fetch is still a reference: the claim check
            # (with no store here) refuses it by name rather than hand it to the code.
            history = engine.claims.resolve(recorded)
            done = dry_replay_at(engine, workflow, history)
        except Exception as e:  # the probe could not be set up from these records
            verdict = RunVerdict(
                run.run_id, run.workflow, run.version, run.status.value, "unchecked"
            )
            verdict.called = f"{type(e).__name__}: {e}"
            verdict.advice = (
                "the file lacks what the replay needs (a value left in the payload store: "
                "export again where the store can be read, e.g. with --payload-bucket)"
            )
            result.runs.append(RunReplay(verdict, e, records=records))
            break
        verdict = judge(run, done.stopped)
        if isinstance(done.stopped, NonDeterminismError):
            verdict.advice = (
                "the code calls something else than the run recorded: runs of version "
                f"{run.version} in flight would stop there; register the change as a new "
                "version, or keep the old call order (see `durable check-deploy`)"
            )
        elif verdict.verdict == "unchecked":
            verdict.advice = (
                "the replay needs a value the file does not hold (a value left in the "
                "payload store, or a secret, which the file masks)"
            )
        error = None if isinstance(done.stopped, NonDeterminismError) else done.stopped
        result.runs.append(RunReplay(verdict, error, done.position, records))
        if not result.runs[-1].ok:
            break
    return result


__all__ = [
    "FORMAT",
    "Divergence",
    "ReplayFileError",
    "ReplayResult",
    "RunReplay",
    "dumps",
    "export_run",
    "histories",
    "load",
    "replay",
]
