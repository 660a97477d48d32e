"""The simulated world and its actors: workers, the sweeper, the outside world.

``World`` builds the engine the way ``durable.testing.LocalRunner`` does (memory adapters,
a fake clock, no in-process waits, no sweep grace, a callback secret) but with every port
wrapped in a ``SimPort``, and drives the actors itself: a worker takes an invocation from
the pool (what the engine's invoker queued plus what timers fired) and calls
``engine.resume``; the sweeper calls ``engine.sweep``; the outside world starts runs,
answers callbacks, sends signals and makes operator decisions. Each job runs as one
``Task`` of the scheduler. Errors the engine must never let out are recorded as
violations where they happen.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger, MemoryTimers
from durable.adapters.payload_stores import MemoryPayloads
from durable.core.claim_check import ClaimCheck
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.history_cache import CachingLedger
from durable.core.lifetime import lifetime_end
from durable.core.model import (
    RunHistory,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
)
from durable.core.ports import ChildReport, ConditionFailed, Invocation, RunGuard
from durable.core.retention import incarnation, visible_history
from durable.core.tokens import token_hash
from durable.engine.children import LOOK_REASON, child_of
from durable.engine.engine import Engine
from durable.engine.engine_parts import Reuse
from durable.engine.sweeper import SweepReport
from durable.errors import (
    AmbiguousWait,
    CallbackAlreadyCompleted,
    CallbackExpired,
    CallbackNotFound,
    IdempotencyConflict,
    InvalidInput,
    InvalidState,
    RunNotFound,
    StorageError,
    WorkflowNotFound,
)
from durable.testing import SimulatedCrash
from tests.simulation.async_programs import ASYNC
from tests.simulation.invariants import (
    FinishedRunMonitor,
    ProgressMonitor,
    StuckMonitor,
    WindowMonitor,
    skip_chains_going,
)
from tests.simulation.journal import Event, Journal
from tests.simulation.programs import (
    ALLOWED,
    APP,
    APP_V2,
    BUFFERED,
    CHAIN_SIGNAL,
    GATED,
    LIVED,
    RATED,
    SCHEDULE,
    WORKFLOW,
    Hooks,
    Op,
)
from tests.simulation.scheduler import LOSE_WAKE, Scheduler, SimPort, Task

WORKERS = ("w1", "w2", "w3")
SWEEPER, OUTSIDE = "sweeper", "outside"
# What the API answers a caller with (404, 409, 410, ...): fine. Anything else is a bug.
EXPECTED_API_ERRORS = (
    AmbiguousWait,  # an answer by name when several callbacks of that name wait
    InvalidInput,  # an operator's fork from a step that is not settled
    InvalidState,
    RunNotFound,
    CallbackNotFound,
    CallbackExpired,
    CallbackAlreadyCompleted,
    IdempotencyConflict,
    StorageError,  # retryable only (a 503): a fire another delivery is deciding
    WorkflowNotFound,  # a retry upgrading to a version the workflow does not have
)
SECRET = b"simulation-callback-secret-0123456789"


# How often each kind of decision is drawn, relative to the others (per seed, see
# ``explore.settings_for``: some seeds leave some kinds out, "swarm testing").
WEIGHTS = {
    "step": 10.0,  # per blocked actor
    "invoke": 6.0,
    "sweep": 1.5,
    "event": 3.0,
    "timer": 2.0,
    "clock": 1.5,
    "stall": 0.4,
    "drop": 0.2,
    "dup": 0.2,
    "ttl": 0.2,
}


@dataclass(frozen=True)
class Settings:
    decisions: int = 200  # decisions of the chaotic phase
    workers: int = 3
    crash_rate: float = 0.03  # per step decision
    max_crashes: int = 4
    max_starts: int = 5
    steps_per_invocation: int = 1000
    weights: tuple[tuple[str, float], ...] = tuple(WEIGHTS.items())
    # The features this schedule leans towards (``coverage.focus_for``): each pair of
    # ``coverage.FEATURES`` is some seed's focus, so pairs meet within the budget.
    focus: frozenset[str] = frozenset()
    tour: str = ""  # the rare operations this schedule carries out (``scripts.TOURS``)
    # Lambda's retries of an invocation whose worker died, as Lambda retries an async
    # event (twice at most). ``settings_for`` turns them on; SIM_LAMBDA_RETRIES=0 leaves
    # them out, to tell a failure they bring about from one they do not.
    lambda_retries: bool = False

    def weight(self, kind: str) -> float:
        return dict(self.weights)[kind]


def expire_runs(ledger: Any, now: Any) -> list[str]:
    """DynamoDB's TTL: delete run items whose ``purge_at`` passed (memory: its helper)."""
    if isinstance(ledger, MemoryLedger):
        return ledger.expire(now)
    expire: Callable[[Any], list[str]] = ledger.expire  # the DynamoDB replay's TTL stand-in
    return expire(now)


class World:
    """One schedule's system. All randomness comes from ``seed``."""

    def __init__(self, seed: int, ledger: Any, settings: Settings) -> None:
        self.seed = seed
        self.settings = settings
        self.sched = Scheduler()
        self.values = random.Random(f"values-{seed}")
        self.clock = FakeClock()
        self.journal = Journal()
        self.hooks = Hooks(self.journal, self.values, self.clock, self.sched, ledger)
        self.raw = ledger
        self.timers = MemoryTimers()
        self.invoker = MemoryInvoker()
        self.within = {"finish_child": self.end_without_report}
        self.monitor = FinishedRunMonitor(ledger, self.journal, self.hooks.stamp)
        self.stuck = StuckMonitor(ledger, self.journal, self.armed, self.hooks.stamp)
        self.window = WindowMonitor(ledger, self.journal, self.hooks.stamp)
        self.progress = ProgressMonitor(ledger, self.journal, self.hooks.stamp)
        # Large values (``durable.core.claim_check``): most schedules move every value longer
        # than a few bytes to the payload store, so each interleaving also runs through
        # the references (a put before the write that names it, a read on every load);
        # the rest keep the default and never touch the store.
        self.payloads = MemoryPayloads(self.clock)
        self.reader = ClaimCheck(ledger, self.payloads)  # reads as the engine's resolve
        offload = random.Random(f"payloads-{seed}").choice([16, 64, 64 * 1024])
        if "offloaded value" in settings.focus or settings.tour == "mechanics":
            offload = 16
        self.config = EngineConfig(
            inprocess_wait_threshold=timedelta(0),
            sweep_grace=timedelta(0),
            callback_secret=SECRET,
            retention=timedelta(hours=2),
            steps_per_invocation=settings.steps_per_invocation,
            payload_offload_bytes=offload,
        )
        self.engine = Engine(
            APP,
            SimPort("ledger", ledger, self.sched, self.observe, self.within),
            SimPort("invoker", self.invoker, self.sched),
            SimPort("effects", MemoryEffectStore(), self.sched),
            clock=self.clock,
            config=self.config,
            timers=SimPort("timers", self.timers, self.sched),
            payloads=SimPort("payloads", self.payloads, self.sched),
        )
        # Worker w1 is a warm container: it keeps the histories it loaded and wrote
        # between its invocations (``durable.core.history_cache``), and every view it uses
        # instead of a load is compared with a real one.
        self.at_claim: dict[str, RunHistory | None] = {}  # what a load right after w1's claim saw
        self.cache = CachingLedger(
            SimPort(
                "ledger",
                _Snapshots(ledger, self.at_claim),
                self.sched,
                self.observe,
                self.within,
            ),
            check=self.check_view,
        )
        self.engines = {
            "w1": Engine(
                APP,
                self.cache,
                SimPort("invoker", self.invoker, self.sched),
                SimPort("effects", self.engine.effects.store, self.sched),
                clock=self.clock,
                config=self.config,
                timers=SimPort("timers", self.timers, self.sched),
                payloads=SimPort("payloads", self.payloads, self.sched),
            )
        }
        self.pool: list[tuple[str, str, int]] = []  # (run id, reason, hop) not yet taken
        self.runs: list[str] = []  # run ids the outside world knows, in order
        self.keys: dict[str, list[Op]] = {}  # start idempotency key -> its program
        self.fired_at: dict[str, list[datetime]] = {}  # per schedule: times delivered
        self.expired: list[str] = []  # run ids TTL deleted, for the purge
        self.ever_expired: set[str] = set()  # every run id TTL deleted so far
        self.shown: list[str] = []  # keys senders' runs show (``<scope>/<key>``)
        # A script's runs (``scripts.py``), by the tag its start gave them: its later
        # events name the run by tag, so that a shrunk replay still finds it.
        self.tagged: dict[str, str] = {}
        self.scripted = False  # the outside world is carrying out a script's event
        self.requests = 0
        self.crashes = 0
        self.raised: dict[str, int] = {}  # run id -> errors that escaped resume
        self.retried: dict[tuple[str, str, int], int] = {}  # event -> Lambda's retries of it

    # --- bookkeeping -------------------------------------------------------------------

    def observe(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        """Every ledger call that returned, seen by the runtime checks."""
        if method == "ledger.start_children" and result:
            self._child_starts(args[0])
        elif method == "ledger.start_child" and result.updated_at == args[0].updated_at:
            self._child_starts([args[0]])  # (not a replay's start, refused for the record there)
        elif (
            method in ("ledger.write_step", "ledger.write_step_fenced")
            and result
            and args[0].kind == StepKind.CHILD
        ):
            # A record reopened, settled by a look, or adopted settled (with no start).
            self._child_starts([args[0]])
        self.monitor.observe(method, args, result)
        self.stuck.observe(method, args, result)
        self.window.observe(method, args, result)
        self.progress.observe(method, args, result)

    def _child_starts(self, steps: list[StepRecord]) -> None:
        """Which run each record is about: the one under the child's id when the parent
        writes the record waiting (its start, or an operator's retry reopening it) or
        settled from that run (a keyed run adopted finished, a reopened record settled
        from the run now under the id, a look at its own child). A ``ChildGone`` keeps
        what the record was about: the look found the run it named gone, or a later run
        under the id."""
        for step in steps:
            parent = self.raw.get_run(step.run_id)  # the raw ledger: no port call, no turn
            if parent is None:
                continue
            child = self.raw.get_run(child_of(step))
            key = (step.run_id, parent.created_at, step.position, child_of(step))
            about = (step.updated_at, child.created_at if child is not None else None)
            if step.error_type == "ChildGone":
                self.journal.child_starts.setdefault(key, about)
            else:
                self.journal.child_starts[key] = about

    def end_without_report(
        self,
        command: str,
        run_id: str,
        guard: RunGuard,
        changes: Any,
        report: ChildReport,
        *,
        now: str,
    ) -> None:
        """A worker dying inside ``Ledger.finish_child``, after some of its writes: the
        child's end (always), then with ``LOSE_WAKE`` the report to a parent that goes
        on, never the parent's wake-up. The parent must still see the outcome, once
        (``child_reports_match``, ``no_stuck_runs``): it looks at the child itself."""
        try:
            new = self.raw.update_run(run_id, guard, changes)
        except ConditionFailed:
            return  # a zombie child: nothing of it is written
        self.observe("ledger.update_run", (run_id, guard, changes), new)
        self.journal.produced[f"a child's end without its {command.removeprefix('lose_')}"] += 1
        if command != LOSE_WAKE:
            return
        parent = self.raw.get_run(report.parent_id)
        if parent is None or parent.terminal:
            return
        if isinstance(self.raw, MemoryLedger):
            self.raw.settle_report(report, now)
            return
        client = self.raw.client  # the DynamoDB replay: the report's own update alone
        with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
            client.update_item(**self.raw._settle(report, now)["Update"])

    def check_view(self, run_id: str, view: RunHistory) -> None:
        """A warm worker's view must hold what a load would: every record, except one a
        zombie (an older fence) wrote at a position the view lacks, which the engine
        settles when it writes there, as after any load, and a wait whose expiry a
        heartbeat moved on (``_heartbeat_only``)."""
        # Compared with the ledger as it was right after the claim (nothing ran between
        # the claim's return and that read): what a load there would have returned.
        loaded = self.at_claim.pop(run_id, None)
        if loaded is None:
            self.violate("cached_view_true", f"{run_id}: a view used with no claim before it")
            return
        fence = view.run.fence
        for position in sorted(set(loaded.steps) | set(view.steps)):
            stored, held = loaded.steps.get(position), view.steps.get(position)
            if stored == held:
                continue
            if (
                stored is not None
                and stored.fence < fence - 1
                and (held is None or (not held.status.final and held.fence <= stored.fence))
            ):
                continue  # a zombie's record (step_replaceable let it in, as after a load)
            if _heartbeat_only(held, stored):
                continue  # a heartbeat moved the wait's expiry on (no inbox bump, by design)
            if _report_unwoken(held, stored):
                continue  # a child's report whose wake-up was lost (LOSE_WAKE)
            self.violate(
                "cached_view_true",
                f"{run_id} at {position}: the view holds {_brief(held)}, the ledger "
                f"{_brief(stored)} (claim fence {fence})",
            )
        mine = {(s.signal_id, s.name, s.consumed_by) for s in view.signals}
        theirs = {(s.signal_id, s.name, s.consumed_by) for s in loaded.signals}
        if mine != theirs:
            self.violate("cached_view_true", f"{run_id}: signals {mine} vs {theirs}")

    def armed(self) -> set[str]:
        return {run_id for run_id, _ in self.timers.armed.values()}

    def violate(self, name: str, detail: str) -> None:
        self.journal.violate(name, detail, self.sched.seq)

    def know(self, run_id: str) -> None:
        if run_id not in self.runs:
            self.runs.append(run_id)

    def drain_invoker(self) -> None:
        while (item := self.invoker.pop()) is not None:
            if item.reason == LOOK_REASON:
                self.journal.produced["a parent woken to look by its child's retry"] += 1
            self.pool.append((item.run_id, item.reason, item.hop))
        for run_id in self.journal.runs_seen:
            self.know(run_id)

    def busy(self, name: str) -> bool:
        return any(t.name == name for t in self.sched.tasks)

    def spawn(self, name: str, job: Callable[[], None]) -> Task:
        return self.sched.spawn(name, job)

    def run_key(self, run_id: str) -> str | None:
        run = self.reader.get_run(run_id)
        return f"{run_id}.{incarnation(run)}" if run is not None else None

    # --- actors' jobs -----------------------------------------------------------------

    def start_worker(self, name: str, run_id: str, reason: str, hop: int, deadline: bool) -> Task:
        """A worker invocation; with ``deadline``, a Lambda of 15 minutes, stopped (its
        next port call never happens) once it is past its deadline and the overrun the
        engine allows for requests in flight. Without, it may stall and come back."""
        end = self.clock.now() + timedelta(minutes=15)
        task = self.spawn(
            name, self.worker_job(run_id, reason, hop, end if deadline else None, name)
        )
        if deadline:
            stop = end + self.config.deadline_overrun
            task.alive = lambda: self.clock.now() <= stop
        return task

    def worker_job(
        self, run_id: str, reason: str, hop: int, end: datetime | None, name: str = ""
    ) -> Callable[[], None]:
        engine = self.engines.get(name, self.engine)

        def job() -> None:
            self.requests += 1
            remaining: Callable[[], float] | None = None
            if end is not None:

                def remaining() -> float:
                    return (end - self.clock.now()).total_seconds()

            invocation = Invocation(request_id=f"req-{self.requests}", remaining_seconds=remaining)
            try:
                engine.resume(run_id, invocation, hop, reason)
            except SimulatedCrash:
                # Lambda retries an asynchronous invocation that failed, twice at most
                # (about a minute, then two, later): the same event again. A retry that
                # finds its child ended wakes a parent its lost report left waiting.
                event = (run_id, reason, hop)
                if self.settings.lambda_retries and self.retried.get(event, 0) < 2:
                    self.retried[event] = self.retried.get(event, 0) + 1
                    self.pool.append(event)
                    self.journal.produced["an invocation retried after its worker died"] += 1
                raise
            except BaseException as error:  # a control-flow signal escaping is a bug too
                self.raised[run_id] = self.raised.get(run_id, 0) + 1
                self.violate(
                    "resume_raises_nothing",
                    f"resume({run_id}, reason={reason}) raised {type(error).__name__}: "
                    f"{str(error)[:200]}",
                )

        return job

    def sweep_job(self, reports: list[SweepReport]) -> Callable[[], None]:
        def job() -> None:
            try:
                reports.append(self.engine.sweep())
            except SimulatedCrash:
                raise
            except BaseException as error:
                self.violate("sweep_raises_nothing", f"{type(error).__name__}: {error}")

        return job

    def event_job(self, arg: dict[str, Any]) -> Callable[[], None]:
        self.scripted = "script" in arg

        def job() -> None:
            stamp = self.hooks.stamp()
            facts: dict[str, Any] = {"kind": arg["type"], "run_id": None, "run": None}
            outcome = "ok"
            try:
                self._event(arg, facts)
            except SimulatedCrash:
                outcome = "crashed"
                raise
            except EXPECTED_API_ERRORS as error:
                outcome = type(error).__name__
                if isinstance(error, StorageError) and not error.retryable:
                    raise
                if isinstance(error, AmbiguousWait):
                    self.journal.produced["engine.complete_wait refused as ambiguous"] += 1
                if "token" in facts:  # refused: the outside world will not try it again
                    self.journal.answered.add(facts["token"])
                if isinstance(error, CallbackNotFound):
                    self._check_refusal(facts)
            except BaseException as error:
                outcome = type(error).__name__
                self.violate(
                    "api_errors_are_typed",
                    f"{arg['type']} on {facts['run_id']} raised {outcome}: {str(error)[:200]}",
                )
            finally:
                detail = {k: v for k, v in facts.items() if k not in ("kind", "run_id", "run")}
                kind, run_id, run = facts["kind"], facts["run_id"], facts["run"]
                done = self.hooks.stamp()
                self.journal.events.append(Event(stamp, kind, run_id, run, outcome, done, detail))

        return job

    def _pick_run(self, index: int, *, live: bool = False) -> str | None:
        """The ``index``-th known run (modulo); with ``live``, of those not finished."""
        runs = self.runs
        if live:
            active = [r for r in runs if (run := self.reader.get_run(r)) and not run.terminal]
            runs = active or runs
        return runs[index % len(runs)] if runs else None

    def _scripted_run(self, arg: dict[str, Any]) -> str | None:
        """The run a script's event names: its tagged run, or a failed child of it."""
        if "on" in arg:
            return self.tagged.get(arg["on"])
        parent = self.tagged.get(arg["child_of"])
        children = [
            r
            for r in self.runs
            if (run := self.reader.get_run(r))
            and (run.parent or "").partition("@")[0] == parent
            and run.status.value == "FAILED"
        ]
        return children[0] if parent and children else None

    def _pick_failed(self, index: int) -> str | None:
        """A failed run to retry, a child (while its parent may go on) when there is one."""
        failed = [
            r for r in self.runs if (run := self.reader.get_run(r)) and run.status.value == "FAILED"
        ]
        children = [r for r in failed if (run := self.reader.get_run(r)) and run.parent]
        pool = children or failed
        return pool[index % len(pool)] if pool else None

    def _signal_name(self, run_id: str, arg: dict[str, Any]) -> str:
        """A signal the run's program waits for (what a real sender sends), if any."""
        run = self.reader.get_run(run_id)
        ops = json.loads(run.input)["ops"] if run is not None else []
        # Not ``CHAIN_SIGNAL``: the run waiting for it is to be still going when parents
        # attach to it; the settling sends it.
        names = [op["name"] for op in ops if op["op"] == "signal" and op["name"] != CHAIN_SIGNAL]
        return names[arg["run"] % len(names)] if names else str(arg["name"])

    def _start(self, arg: dict[str, Any], facts: dict[str, Any]) -> None:
        """An operator's (or a sender's) start, as the event ``arg`` asks."""
        engine = self.engine
        produced = self.journal.produced
        key = arg.get("key")
        # Keys starting with "g" (and unkeyed starts asked so) start the gated copy;
        # a start asked "rated" the copy behind a rate limit.
        gated = arg.get("gated") or (key or "").startswith("g")
        workflow = GATED if gated else RATED if arg.get("rated") else WORKFLOW
        if (key or "").startswith("l") and not arg.get("scope"):
            workflow = LIVED  # the copy declaring a lifetime (``policy.workflow_of_key``)
            produced["engine.start(a workflow declaring max_lifetime)"] += 1
        if arg.get("async"):
            workflow = ASYNC
        attach = bool(key) and bool(arg.get("attach"))
        # A sender's start (an SQS message, an EventBridge event) keys its runs in a
        # namespace of its own; the run shows the key as ``<scope>/<key>``, which an
        # operator may also type (issue 43: a key shown by two runs).
        scope = arg.get("scope") if key else None
        if key and "/" in key and not scope:
            # Counted when tried: an engine may refuse a key of a sender's namespace.
            produced["engine.start(key shown by a sender)"] += 1
        # A key reused once its run ended (issue 46): an operator's only.
        reuse: Reuse = "after_end" if key and not scope and arg.get("reuse") else "never"
        record = engine.start(
            workflow,
            {"ops": arg["program"]},
            idempotency_key=key,
            if_running="attach" if attach else "fail",
            reuse=reuse,
            **({"key_scope": scope} if scope else {}),
            # A script's run pinned to the first version: after a deploy as before it.
            **({"version": arg["version"]} if arg.get("version") else {}),
        )
        produced[
            "engine.start(key, attach)" if attach else f"engine.start({'key' if key else 'no key'})"
        ] += 1
        if reuse != "never":
            produced["engine.start(key, reuse=after_end)"] += 1
        if scope:
            produced["engine.start(key, sender scope)"] += 1
            self.shown.append(str(record.idempotency_key))
        if record.run_id in self.ever_expired:
            produced["engine.start(key) after its run expired"] += 1
        facts.update(run_id=record.run_id, run=f"{record.run_id}.{incarnation(record)}")
        self.know(record.run_id)
        if key is not None:
            self.keys.setdefault(key, arg["program"])
        if arg.get("tag"):
            self.tagged[arg["tag"]] = record.run_id

    def _event(self, arg: dict[str, Any], facts: dict[str, Any]) -> None:
        kind = arg["type"]
        engine = self.engine
        produced = self.journal.produced
        if kind == "start":
            self._start(arg, facts)
            return
        if kind == "fire":
            self._fire(arg, facts)
            return
        if kind == "answer":
            self._answer_by_name(arg, facts)
            return
        if kind == "deploy":
            produced["deploy"] += 1
            self.hooks.deployed = True
            for each in (self.engine, *self.engines.values()):
                each.app = APP_V2
            return
        if kind == "purge":
            while self.expired:
                engine.purge_expired(self.expired.pop(0))
                produced["engine.purge_expired"] += 1
            return
        if kind == "callback":
            self._callback(arg, facts)
            return
        if kind == "erase":  # an operator erases a finished run (an erasure request)
            run_id = self.tagged.get(arg["tag"])
            if run_id is None:
                return
            facts.update(run_id=run_id)
            # Gone as if TTL had deleted it: the invariants treat it as expired (forgotten
            # first: its records are deleted, not changed).
            self.monitor.forget([run_id])
            self.ever_expired.add(run_id)
            engine.erase(run_id)
            produced["engine.erase"] += 1
            return
        if "on" in arg or "child_of" in arg:  # a script's run (or its failed child)
            run_id = self._scripted_run(arg)
        else:
            run_id = arg.get("exact") or self._pick_run(arg["run"], live=arg.get("live", False))
            if kind == "retry" and (arg.get("failed") or arg.get("upgrade")):
                run_id = self._pick_failed(arg["run"]) or run_id
        if run_id is None:
            return
        facts.update(run_id=run_id, run=self.run_key(run_id))
        self._on_run(kind, run_id, arg, facts)

    def _callback(self, arg: dict[str, Any], facts: dict[str, Any]) -> None:
        """The outside party of a callback: its answer, its rejection, or a heartbeat."""
        engine, produced = self.engine, self.journal.produced
        tokens = sorted(self.journal.mailbox)
        if "on" in arg:  # a script's: the tokens its run handed out
            run_id = self.tagged.get(arg["on"])
            tokens = [t for t in tokens if self.journal.mailbox[t].run_id == run_id]
        unused = [t for t in tokens if t not in self.journal.answered]
        if arg.get("fresh") and unused:
            tokens = unused
        if not tokens:
            return
        token = arg.get("exact") or tokens[arg["token"] % len(tokens)]
        mail = self.journal.mailbox[token]
        facts.update(run_id=mail.run_id, run=mail.run, position=mail.position, token=token)
        if arg["value"] % 4 == 0:  # the job's heartbeat instead of its answer
            try:
                engine.heartbeat(token)
                produced["engine.heartbeat"] += 1
                return
            except InvalidState:  # this callback takes no heartbeats: it is answered
                pass
        if arg["error"]:
            engine.complete_callback(token, error={"type": "Rejected", "message": "no"})
        else:
            engine.complete_callback(token, result={"answer": arg["value"]})
        produced["engine.complete_callback"] += 1
        # Answered (a crash before this line leaves it to answer again, as a caller
        # that got no reply would).
        self.journal.answered.add(token)
        return

    def _on_run(self, kind: str, run_id: str, arg: dict[str, Any], facts: dict[str, Any]) -> None:
        """An outside event or operator action on one known run."""
        engine, produced = self.engine, self.journal.produced
        if kind == "signal":
            name = self._signal_name(run_id, arg) if arg.get("expected") else arg["name"]
            signal = engine.signal(run_id, name, arg["payload"], key=arg.get("key"))
            produced[f"engine.signal({'key' if arg.get('key') else 'no key'})"] += 1
            facts.update(signal_id=signal.signal_id, name=name)
        elif kind == "cancel":
            record = engine.cancel(run_id, "simulated cancel", arg["compensate"])
            produced[f"engine.cancel(compensate={arg['compensate']})"] += 1
            facts.update(run=f"{run_id}.{incarnation(record)}", compensate=arg["compensate"])
        elif kind == "retry":
            upgrade = 2 if arg.get("upgrade") and self.hooks.deployed else None
            engine.retry(run_id, upgrade_to=upgrade)
            produced["engine.retry(upgrade_to)" if upgrade else "engine.retry"] += 1
            if (run := self.reader.get_run(run_id)) is not None and run.parent:
                produced["engine.retry of a child"] += 1
        elif kind == "fork":
            record = engine.fork(run_id, arg["from"])
            produced["engine.fork"] += 1
            facts.update(fork=record.run_id)
            self.know(record.run_id)

    def waiting_callbacks(self, run_id: str) -> dict[str, list[str]]:
        """The positions of the run's WAITING callbacks, by name."""
        history = self.reader.load(run_id)
        waiting: dict[str, list[str]] = {}
        for position, step in sorted(history.steps.items() if history else []):
            if step.kind.value == "callback" and step.status == StepStatus.WAITING:
                waiting.setdefault(step.name, []).append(position)
        return waiting

    def _answer_by_name(self, arg: dict[str, Any], facts: dict[str, Any]) -> None:
        """An operator answers a run's callback by the wait's name (``durable approve RUN
        NAME``), with its position now and then. An answer by name alone that the engine
        takes while several callbacks of that name wait picked one of them for the
        operator: a violation (issue 31, hole 5)."""
        runs = [self.tagged.get(arg["on"], "")] if "on" in arg else self.runs
        candidates = [(r, w) for r in runs if r and (w := self.waiting_callbacks(r))]
        if arg["ambiguous"]:  # the runs where a name waits more than once, if any
            candidates = [c for c in candidates if max(map(len, c[1].values())) > 1] or candidates
        if not candidates:
            return
        run_id, waiting = candidates[arg["index"] % len(candidates)]
        facts.update(run_id=run_id, run=self.run_key(run_id))
        names = sorted(waiting, key=lambda n: (-len(waiting[n]), n))
        name = names[0] if arg["ambiguous"] else names[arg["index"] % len(names)]
        position = None
        if arg["by_position"]:
            position = waiting[name][arg["index"] % len(waiting[name])]
        before = len(waiting[name])
        where = {"position": position} if position else {}
        answered = self.engine.complete_wait(run_id, name, result={"answer": arg["value"]}, **where)
        call = "engine.complete_wait(position)" if position else "engine.complete_wait"
        self.journal.produced[call] += 1
        facts.update(kind="callback", position=answered.position)
        for token, mail in self.journal.mailbox.items():
            if (mail.run_id, mail.position) == (run_id, answered.position):
                self.journal.answered.add(token)  # the outside world will not answer it too
        if position is None and before > 1:
            self.violate(
                "ambiguous_wait_answered",
                f"an answer to {name!r} of run {run_id} by name alone, while {before} "
                f"callbacks of that name waited ({', '.join(waiting[name])}), was taken "
                f"for the one at {answered.position}",
            )

    def _fire(self, arg: dict[str, Any], facts: dict[str, Any]) -> None:
        """EventBridge Scheduler's delivery of a fire of the app's schedule (on time,
        late, again), or an operator's "run now"; every delivery and its verdict is
        journaled (``fire_verdicts_hold``)."""
        from durable.engine.schedules import fire, fire_key

        overlap = arg.get("overlap") or ("buffer_one" if arg.get("buffered") else "skip")
        name = {"skip": SCHEDULE, "buffer_one": BUFFERED, "allow": ALLOWED}[overlap]
        schedule = APP.schedules()[name]
        now = self.clock.now()
        fired_at = self.fired_at.setdefault(name, [])
        if arg["again"] and fired_at:  # the newest ones most often
            when = fired_at[-1 - arg["index"] % min(3, len(fired_at))]
            self.journal.produced["schedule fire, delivered again"] += 1
        else:  # on time (within a minute or two), or late (past the grace, or not)
            when = (now - timedelta(seconds=arg["late"])).replace(microsecond=0)
            fired_at.append(when)
            late = arg["late"] > 120
            self.journal.produced[f"schedule fire, {'late' if late else 'on time'}"] += 1
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        manual = f"now-{arg['index']}" if arg["manual"] else ""
        if manual:
            self.journal.produced["schedule run now"] += 1
        fired = fire(self.engine, schedule, stamp, manual=manual)
        self.journal.produced[f"schedule fire, {overlap}"] += 1
        key = fire_key(name, manual or format_time(when))
        if not manual and fired.result == "started" and name == SCHEDULE:
            # A fresh verdict to start: no earlier run of this schedule's may still be
            # going, under its own id or a continue-as-new successor's (issue 43).
            mine = fire_key(SCHEDULE, "")
            earlier = [
                r
                for k, _, r, _ in self.journal.fires
                if k.startswith(mine) and r is not None and r != fired.run_id
            ]
            for problem in skip_chains_going(self.reader.get_run, earlier):
                self.violate(
                    "skip_schedule_one_chain_at_a_time",
                    f"fire {key} started run {fired.run_id} while {problem}",
                )
        self.journal.fires.append((key, fired.result, fired.run_id, bool(manual)))
        facts.update(run_id=fired.run_id, fire=key, verdict=fired.result)
        if fired.run_id is not None:
            self.know(fired.run_id)

    def _check_refusal(self, facts: dict[str, Any]) -> None:
        """A token a submit handed out, refused as unknown while its wait is pending."""
        token = facts.get("token")
        if token is None:
            return
        mail = self.journal.mailbox[token]
        if self.run_key(mail.run_id) != mail.run:
            return  # an earlier run under this id: refusing its token is right
        step = self.reader.get_step(mail.run_id, mail.position)
        if step is not None and step.status == StepStatus.WAITING:
            mine = step.token_hash == token_hash(token)
            self.violate(
                "issued_tokens_honoured",
                f"the token of {mail.name!r} at {mail.position} of run {mail.run_id} "
                f"(sent at seq {mail.stamp.seq}) was refused as unknown while the wait is "
                f"pending; stored token hash {'matches' if mine else 'differs'}",
            )

    # --- direct actions: AWS itself (timers, TTL), the clock ---------------------------

    def fire_timer(self, mode: str, index: int) -> str:
        now = self.clock.now()
        armed = sorted(self.timers.armed.items(), key=lambda kv: (kv[1][1], kv[0]))
        if mode == "on_time":
            armed = [(n, v) for n, v in armed if v[1] <= now]
        if not armed:
            return "no timer"
        name, (run_id, wake_at) = armed[index % len(armed)]
        del self.timers.armed[name]
        copies = {"on_time": 1, "early": 1, "twice": 2, "never": 0}[mode]
        self.pool.extend([(run_id, "timer", 0)] * copies)
        return f"{name[-12:]} due {format_time(wake_at)}"

    def ttl(self) -> list[str]:
        """DynamoDB's TTL: deletes every item whose ``purge_at`` is due now, run items and
        the items of runs declaring a lifetime alike (after checking the promise it
        relies on, ``check_item_ttls``)."""
        now = self.clock.now()
        self.check_item_ttls()
        kept: list[StepRecord | SignalRecord] = []
        if isinstance(self.raw, MemoryLedger):
            kept.extend(step for steps in self.raw._steps.values() for step in steps.values())
            kept.extend(signal for signals in self.raw._signals.values() for signal in signals)
        if any(
            item.purge_at is not None and item.purge_at <= now.timestamp() for item in kept
        ):  # the run items' TTL aside (counted apart, once expired)
            self.journal.produced["ttl deletes the items of a declared lifetime"] += 1
        gone = sorted(expire_runs(self.raw, now))
        self.monitor.forget(gone)
        self.expired.extend(gone)
        self.ever_expired.update(gone)
        return gone

    def check_item_ttls(self) -> int:
        """The promise a declared lifetime's TTL relies on (``durable.core.lifetime``),
        checked whenever the clock moves and before TTL deletes anything: an item of a
        live run is due only once the run's lifetime and retention are over (its TTL is
        its own run's, never an earlier one's: a fork's copies, a successor's handed
        signals, a keyed restart's items), and such a run is due to be woken, so that a
        claim fails it (past its lifetime's end a claim ends the run before it replays,
        so no item it would read is missed). Returns how many items are due."""
        now = self.clock.now()
        epoch = now.timestamp()
        due_items = 0
        for run_id in sorted({*self.runs, *self.journal.runs_seen}):
            # What an earlier run of a reused id left is not this run's (it is purged
            # before the new one replays): its TTL is the earlier run's.
            history = visible_history(self.raw.load(run_id))
            if history is None:
                continue
            items: list[StepRecord | SignalRecord] = [*history.steps.values(), *history.signals]
            due = [i for i in items if i.purge_at is not None and i.purge_at <= epoch]
            due_items += len(due)
            run = history.run
            if not due or run.terminal:
                continue
            end = lifetime_end(run, self.config.max_run_lifetime, self.config.retention)
            wrong = [i for i in due if i.purge_at != run.items_purge_at]
            if wrong or now < end + self.config.retention or run.due_at is None:
                self.violate(
                    "live_items_never_expire",
                    f"run {run_id} is {run.status.value} (due at {run.due_at}, its lifetime "
                    f"ends {format_time(end)}) at {format_time(now)}, but TTL deletes "
                    f"{len(due)} of its items now ({len(wrong)} with another run's TTL)",
                )
        return due_items


def _brief(step: StepRecord | None) -> str:
    if step is None:
        return "nothing"
    return f"{step.kind} {step.name!r} {step.status} (fence {step.fence}, attempt {step.attempt})"


class _Snapshots:
    """Worker w1's ledger, inside its ``SimPort``: each claim that succeeds also reads the
    ledger as it is at that moment (before the scheduler lets any other actor run, which
    it may do before the claim's answer reaches the worker), for ``check_view``."""

    def __init__(self, raw: Any, into: dict[str, RunHistory | None]) -> None:
        self._raw, self._into = raw, into

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def claim(self, run_id: str, owner: str, **kwargs: Any) -> Any:
        claim = self._raw.claim(run_id, owner, **kwargs)
        if claim is not None:
            self._into[run_id] = self._raw.load(run_id)
        return claim


def _report_unwoken(held: StepRecord | None, stored: StepRecord | None) -> bool:
    """A child's report lands before the parent's inbox moves (two writes: a worker can
    die between them), so a warm view may hold the record still WAITING for the child
    the stored one settled. The engine then settles it from the child when it looks
    (``durable.engine.children.look_for_ends``); the ledger keeps the first final record
    and the worker adopts it: the same outcome."""
    return (
        held is not None
        and stored is not None
        and held.kind == stored.kind == StepKind.CHILD
        and held.status == StepStatus.WAITING
        and stored.status.final
        and (held.detail or {}).get("child") == (stored.detail or {}).get("child")
    )


def _heartbeat_only(held: StepRecord | None, stored: StepRecord | None) -> bool:
    """A callback's heartbeat rewrites its wait (``Ledger.extend_wait``) without bumping the
    inbox, so a warm view may hold the earlier expiry. That is the one difference a view may
    have: both still WAITING, the ledger's expiry later, everything else equal. A timeout
    of the earlier expiry is refused by the ledger (``leases.step_replaceable``)."""
    if held is None or stored is None:
        return False
    if held.status != StepStatus.WAITING or stored.status != StepStatus.WAITING:
        return False
    if held.expires_at is None or stored.expires_at is None or stored.expires_at <= held.expires_at:
        return False
    same = ("updated_at", "expires_at", "detail")
    return all(
        getattr(held, f) == getattr(stored, f) for f in held.__dataclass_fields__ if f not in same
    ) and "heartbeat_at" in (stored.detail or {})
