"""Test your workflows in-process: ``LocalRunner`` with a fake clock and crash injection.

    runner = LocalRunner(app)
    run = runner.start("onboarding", {"user_id": "u1"})
    runner.run_until_idle()
    runner.advance(days=3)                   # every sleep, retry and timeout on the way
    assert runner.result(run.run_id) == Welcome(user_id="u1")
    runner.fire_schedule("nightly")          # a schedule's fire, as Scheduler delivers it

``advance`` moves time the way time moves: it stops at every wake-up before the target
(a timer, a retry's backoff, a run due, a lease that ran out; with ``schedules=True`` each
fire of the app's schedules) and runs what is due there, so a step retried three times an
hour apart succeeds within one ``advance(days=1)``, each attempt at its own time.

Crash injection wraps the ports: ``runner.crash_at("ledger.write_step", call=2,
when="after")`` makes the worker "die" right after the second ``write_step`` call (the
write happened, the worker did not learn of it). The dead worker's lease then expires
like a real one's: ``advance`` past the lease and the run is taken over. The methods that
can be targeted are listed in ``CRASH_TARGETS``; any other name is refused.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger, MemoryTimers
from durable.adapters.payload_stores import MemoryPayloads
from durable.core import serde
from durable.core.claim_check import ClaimCheck
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.model import RunRecord, RunStatus, SignalRecord, StepRecord, parse_time
from durable.core.ports import (
    CRASH_TARGETS,
    EffectStore,
    Invocation,
    PayloadStore,
    check_crash_target,
)
from durable.core.secrets import SEALED, LocalKeys, open_sealer
from durable.engine.determinism import DeterminismGuard, NoGuard, NonDeterministicCall
from durable.engine.engine import Engine, Outcome
from durable.engine.fanout import BRANCH_THREAD
from durable.engine.lineage import chain_end
from durable.engine.registry import App
from durable.engine.replay_file import ReplayResult
from durable.engine.schedules import Fired, fire
from durable.errors import RunNotFound

When = Literal["before", "after"]
# Wake-ups one ``advance`` stops at, at most: a run that polls every second for a year
# is a test that should advance less.
MAX_WAKES = 100_000
_TICK = timedelta(milliseconds=1)  # the ledger's time resolution


class RunNotSucceeded(AssertionError):
    """``LocalRunner.result`` of a run that has not succeeded: its status and error."""

    def __init__(self, run: RunRecord) -> None:
        self.run_id, self.status, self.error = run.run_id, run.status, run.error
        why = f": {run.error.type}: {run.error.message}" if run.error else ""
        hint = "" if run.status.terminal else " (advance the clock, answer its waits)"
        super().__init__(f"run {run.run_id} is {run.status.value}{why}{hint}")


class ReplayFailed(AssertionError):
    """``LocalRunner.replay(..., strict=True)`` of a run the code does not replay cleanly:
    the result is ``.result``."""

    def __init__(self, result: ReplayResult) -> None:
        self.result = result
        super().__init__(result.summary())


class SimulatedCrash(BaseException):
    """The injected death of a worker; nothing after it runs in that invocation."""


@dataclass(slots=True)
class CrashPoint:
    target: str  # "ledger.write_step", "effects.begin", "invoker.invoke", ...
    call: int  # 1-based: crash on the k-th call of that method
    when: When
    fired: bool = False


@dataclass(slots=True)
class CrashPlan:
    points: list[CrashPoint] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set when a crash fires: the dead worker's batch branches (threads of their own,
    # ``durable.engine.fanout.BRANCH_THREAD``) make no call after it, as in a real crash. The
    # next call from any other thread is a new worker's and clears it.
    dead: bool = False

    def tick(self, target: str) -> tuple[bool, bool]:
        """Count a call; return (crash before, crash after) for it."""
        with self.lock:
            n = self.counts.get(target, 0) + 1
            self.counts[target] = n
            before = after = False
            for p in self.points:
                if p.target == target and p.call == n and not p.fired:
                    p.fired = True
                    before |= p.when == "before"
                    after |= p.when == "after"
            return before, after


class CrashingPort:
    """Wraps a port; every method call is counted and may crash before or after.

    The one port wrapper that forwards by ``__getattr__``, on purpose: a crash point must
    exist at every method of every port, one added later included, and it needs no
    decision per method (it passes arguments and answers on untouched). It wraps the
    adapters themselves, beneath the engine's write boundary and claim check, which
    implement each write explicitly (``durable.core.ledger_forward``), so nothing reaches
    it unscrubbed. ``CRASH_TARGETS`` names the methods, held to the ports by a test.
    """

    def __init__(self, name: str, target: Any, plan: CrashPlan) -> None:
        self._name = name
        self._target = target
        self._plan = plan

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if not callable(value) or attr.startswith("_"):
            return value
        key = f"{self._name}.{attr}"
        plan = self._plan

        def call(*args: Any, **kwargs: Any) -> Any:
            if plan.dead:
                if threading.current_thread().name.startswith(BRANCH_THREAD):
                    raise SimulatedCrash(f"the worker is dead: no {key}")
                plan.dead = False
            before, after = plan.tick(key)
            if before:
                plan.dead = True
                raise SimulatedCrash(f"crash before {key}")
            result = value(*args, **kwargs)
            if after:
                plan.dead = True
                raise SimulatedCrash(f"crash after {key}")
            return result

        return call


class LocalRunner:
    """An in-process engine on the memory adapters with a fake clock.

    Values too large for a ledger item go to a memory payload store (``runner.payloads``),
    as they go to the stack's S3 bucket; ``large_values=False`` leaves it out, as a stack
    without ``DURABLE_PAYLOAD_BUCKET``, where such a value fails as ``PayloadTooLarge``.
    """

    def __init__(
        self,
        app: App,
        *,
        config: EngineConfig | None = None,
        clock: FakeClock | None = None,
        determinism_guard: bool = True,
        remaining_seconds: Callable[[], float] | None = None,
        effect_store: EffectStore | None = None,
        payloads: PayloadStore | None = None,
        large_values: bool = True,
    ) -> None:
        self.app = app
        self.clock = clock or FakeClock()
        # Every wait goes through the ledger (no in-process shortcuts) so tests see the
        # durable path; the sweeper has no grace period locally.
        self.config = config or EngineConfig(inprocess_wait_threshold=timedelta(0))
        if self.config.callback_secret is None:
            self.config = replace(self.config, callback_secret=os.urandom(32))
        self.config = replace(self.config, sweep_grace=timedelta(0))
        self.plan = CrashPlan()
        self.memory_ledger = MemoryLedger()
        self.invoker = MemoryInvoker()
        self.effect_store: EffectStore = effect_store or MemoryEffectStore()
        self.timers = MemoryTimers()
        # Seals secret-typed values as KMS would, with a master key of this runner's own.
        self.keys = LocalKeys()
        # Values too large for a ledger item go here, as they go to S3 on AWS; with
        # ``large_values=False`` there is none, as in a stack without a payload bucket
        # (a value over the item limit then fails as PayloadTooLarge).
        self.payloads: PayloadStore = payloads or MemoryPayloads(self.clock)
        store = self.payloads if large_values else None
        # Reads for assertions resolve large values the way the engine's reads do.
        self._reader = ClaimCheck(self.memory_ledger, store)
        self.guard = DeterminismGuard() if determinism_guard else None
        self.engine = Engine(
            app,
            CrashingPort("ledger", self.memory_ledger, self.plan),
            CrashingPort("invoker", self.invoker, self.plan),
            CrashingPort("effects", self.effect_store, self.plan),
            clock=self.clock,
            config=self.config,
            guard=self.guard or NoGuard(),
            timers=CrashingPort("timers", self.timers, self.plan),
            keys=self.keys,
            payloads=CrashingPort("payloads", store, self.plan) if store else None,
        )
        self.remaining_seconds = remaining_seconds
        self.origin = self.clock.now()  # when a rate(...) schedule's clock started
        self.crashes: list[SimulatedCrash] = []
        self.outcomes: list[Outcome] = []
        self._request = 0

    # --- crash injection --------------------------------------------------------------

    def crash_at(self, target: str, *, call: int = 1, when: When = "before") -> None:
        """Kill the worker right ``when`` ("before" or "after") the ``call``-th call of
        ``target`` (e.g. ``ledger.write_step``), counting from 1 over the runner's life.

        ``target`` must be one of ``CRASH_TARGETS``: an unknown name raises ``ValueError``
        listing the valid ones (a point that could never fire would make a test pass for
        nothing). The crash is recorded in ``crashes``; the run's lease then expires like
        a dead worker's, and ``advance`` past it lets another invocation take the run over.
        """
        check_crash_target(target)
        if call < 1:
            raise ValueError(f"call must be 1 or more (the k-th call, from 1), not {call}")
        if when not in ("before", "after"):
            raise ValueError(f"when must be 'before' or 'after', not {when!r}")
        self.plan.points.append(CrashPoint(target, call, when))

    def call_count(self, target: str) -> int:
        """How many times the engine has called ``target`` (one of ``CRASH_TARGETS``)."""
        return self.plan.counts.get(target, 0)

    # --- operations -------------------------------------------------------------------

    def deploy(self, app: App) -> None:
        """New code takes over, as a deploy does: every run in flight goes on with ``app``
        from its next invocation (replaying its ledger on the new code), and new starts
        get ``app``'s newest versions. Keep the versions runs are pinned to registered."""
        self.app = app
        self.engine.app = app

    def start(self, workflow: str, input: Any = None, **kwargs: Any) -> RunRecord:
        """Start a run of ``workflow`` with ``input`` (keyword arguments go to
        ``Engine.start``, e.g. ``idempotency_key``, ``if_running``, ``reuse="after_end"``
        for a key a recurring job reuses once its run has ended); ``run_until_idle``
        then runs it."""
        try:
            return self.engine.start(workflow, input, **kwargs)
        except SimulatedCrash as crash:
            self.crashes.append(crash)
            raise

    def run_until_idle(self, max_invocations: int = 10_000) -> list[Outcome]:
        """Run queued invocations, fire due timers, sweep; repeat until nothing is due."""
        outcomes: list[Outcome] = []
        for _ in range(max_invocations):
            item = self.invoker.pop()
            if item is not None:
                outcomes.extend(self._invoke(item.run_id, item.hop, item.reason))
                continue
            fired = self.timers.due(self.clock.now())
            if fired:
                for run_id in fired:
                    outcomes.extend(self._invoke(run_id, 0, "timer"))
                continue
            try:
                report = self.engine.sweep()  # queues invocations for whatever is due
            except SimulatedCrash as crash:  # the sweeper died; the next sweep starts over
                self.crashes.append(crash)
                continue
            if report.invoked == 0:
                self._raise_violations()
                return outcomes
        raise RuntimeError(
            f"run_until_idle: still busy after {max_invocations} invocations (a run that "
            "never waits nor ends?)"
        )

    def advance(
        self, delta: timedelta | None = None, *, schedules: bool = False, **kwargs: float
    ) -> list[Outcome]:
        """Move the fake clock forward by ``delta`` (or ``days=3``, ``hours=1``, ...), as
        time passes: stopping at every wake-up on the way (a timer, a retry's backoff, a
        run due, a lease that ran out) and running what is due there. With ``schedules``,
        each fire of the app's schedules on the way is delivered at its time too."""
        target = self.clock.now() + (delta if delta is not None else timedelta(**kwargs))
        outcomes = self.run_until_idle()
        for _ in range(MAX_WAKES):
            wake = self._next_wake(target, schedules)
            if wake is None:
                break
            at, due = wake
            self.clock.set(at)
            for name in due:
                self._deliver(name, at)
            outcomes.extend(self.run_until_idle())
        else:
            raise RuntimeError(
                f"advance: more than {MAX_WAKES} wake-ups before {target:%Y-%m-%d %H:%M}; "
                "advance by less at a time"
            )
        if target > self.clock.now():
            self.clock.set(target)
        outcomes.extend(self.run_until_idle())
        return outcomes

    def _next_wake(self, target: datetime, schedules: bool) -> tuple[datetime, list[str]] | None:
        """The first moment after now and not after ``target`` at which something is due,
        and the schedules that fire then (only those with ``schedules``)."""
        now = self.clock.now()
        times = [at for _, at in self.timers.armed.values()]
        # A run due (the sweeper's fallback, a dead worker's lease) is taken a millisecond
        # after its due time, as a real sweeper always comes: a lease is taken over only
        # strictly after its end and the skew allowance (``durable.core.leases``).
        runs = (self.memory_ledger.get_run(r) for r in self.memory_ledger.all_run_ids())
        times += [parse_time(r.due_at) + _TICK for r in runs if r is not None and r.due_at]
        fires: dict[str, datetime] = {}
        if schedules:
            for name, schedule in self.app.schedules().items():
                at = schedule.next_fire(now, self.origin)  # None: none within five years
                if at is not None:
                    fires[name] = at
        candidates = [t for t in [*times, *fires.values()] if now < t <= target]
        if not candidates:
            return None
        first = min(candidates)
        return first, sorted(n for n, t in fires.items() if t == first)

    def fire_schedule(self, name: str, at: datetime | None = None) -> Fired:
        """Deliver a fire of the app's schedule ``name`` for the time ``at`` (default now)
        as EventBridge Scheduler does: with the schedule's overlap and lateness rules (an
        ``at`` before now is a late delivery), once per fire time however often it is
        delivered. A fire in the future is delivered when the clock gets there (``advance``
        runs what is due on the way). Returns what the fire did; its run is run."""
        known = self.app.schedules()
        if name not in known:
            listed = ", ".join(sorted(known)) or "none declared"
            raise ValueError(f"no schedule {name!r} in this app (its schedules: {listed})")
        when = at or self.clock.now()
        if when > self.clock.now():
            self.advance(when - self.clock.now())
        fired = self._deliver(name, when)
        self.run_until_idle()
        return fired

    def _deliver(self, name: str, at: datetime) -> Fired:
        stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return fire(self.engine, self.app.schedules()[name], stamp)

    def result(self, run_id: str) -> Any:
        """The run's result, decoded by its workflow's return type (a pydantic model comes
        back as one, secrets opened), as ``ctx.run_child`` would return it; raises
        ``RunNotSucceeded`` (its status and error) for a run that has not succeeded.

        A run that continued as new has the outcome of the run that ends its chain
        (``durable.engine.lineage``): its result is that run's, as a parent attached to
        it gets; ``get_run`` still shows each run as it is."""
        run = self.get_run(run_id)
        end = chain_end(self.memory_ledger.get_run, run, max_hops=10_000)
        if end is not None and end.run_id != run.run_id:
            run = self.get_run(end.run_id)
        if run.status != RunStatus.SUCCEEDED:
            raise RunNotSucceeded(run)
        annotation = self.app.get_workflow(run.workflow, run.version).return_annotation
        text = run.output
        if text is None or SEALED not in text or run.data_key is None:
            return serde.decode(text, annotation)
        # This runner's own key service: the test reads what the workflow returned.
        return serde.decode(text, annotation, open_sealer(self.keys, run.data_key))

    def complete_callback(self, token: str, result: Any = None, error: Any = None) -> str:
        """Answer a callback (as the API route would); ``run_until_idle`` then resumes it."""
        return self.engine.complete_callback(token, result, error)

    def heartbeat(self, token: str) -> str:
        """A heartbeat for a callback with a ``heartbeat_timeout`` (as the API route would):
        its new expiry."""
        return self.engine.heartbeat(token)[1]

    def complete_wait(
        self,
        run_id: str,
        name: str,
        result: Any = None,
        error: Any = None,
        *,
        position: str | None = None,
    ) -> StepRecord:
        """Answer the run's pending callback ``name`` as an operator would (no token).
        When several callbacks of that name wait (map branches), ``position`` says which
        (``AmbiguousWait`` without it), as the API's and ``durable approve --position``."""
        return self.engine.complete_wait(
            run_id, name, result, error, requested_by="local-runner", position=position
        )

    def signal(
        self, run_id: str, name: str, payload: Any = None, *, key: str | None = None
    ) -> SignalRecord:
        """Send a signal (as the API route would); ``key`` makes a repeat store nothing."""
        return self.engine.signal(run_id, name, payload, key=key)

    # Operator decisions, as the API and the CLI make them; ``run_until_idle`` then acts.

    def cancel(
        self, run_id: str, reason: str = "canceled in a test", compensate: bool = False
    ) -> RunRecord:
        """Ask the run to stop, running its compensations first with ``compensate``."""
        return self.engine.cancel(run_id, reason, compensate, requested_by="local-runner")

    def retry(self, run_id: str, upgrade_to: int | None = None) -> RunRecord:
        """Run a failed run again from its failed step, on version ``upgrade_to`` if given."""
        return self.engine.retry(run_id, upgrade_to, requested_by="local-runner")

    def fork(self, run_id: str, from_step: int | str) -> RunRecord:
        """Start a new run with a copy of this run's ledger before step ``from_step``."""
        return self.engine.fork(run_id, from_step, requested_by="local-runner")

    def replay(
        self, source: str | os.PathLike[str] | Mapping[str, Any], *, strict: bool = False
    ) -> ReplayResult:
        """Replay a recorded run (a file ``durable export`` wrote, or its document) on
        this runner's app, the code as it is now: each step returns what it recorded, no
        body runs, nothing is written anywhere, and the replay stops where the history
        has no settled record. It runs in this process: a ``breakpoint()`` in the
        workflow code stops there.

        Returns a ``ReplayResult`` (``.ok``, ``.diverged``, ``.divergence`` naming the
        position and the recorded and called names, ``.error``), the deploy gate's
        verdict; raises nothing for what it finds unless ``strict`` (then
        ``ReplayFailed``, an ``AssertionError``). Keep the file as a regression test::

            assert runner.replay("tests/runs/order-7.json").ok
        """
        from durable.engine.replay_file import replay

        result = replay(self.app, source, empty=MemoryLedger(), config=self.config)
        if strict and not result.ok:
            raise ReplayFailed(result)
        return result

    def expire(self) -> list[str]:
        """Do what DynamoDB does with finished runs after their retention: TTL deletes the
        run items whose ``purge_at`` has passed, and the purge on the table's stream
        deletes what they left. Returns the expired run ids."""
        expired = self.memory_ledger.expire(self.clock.now())
        for run_id in expired:
            self.engine.purge_expired(run_id)
        return expired

    def _invoke(self, run_id: str, hop: int, reason: str = "") -> list[Outcome]:
        self._request += 1
        invocation = Invocation(
            request_id=f"local-{self._request}", remaining_seconds=self.remaining_seconds
        )
        try:
            outcome = self.engine.resume(run_id, invocation, hop, reason)
        except SimulatedCrash as crash:
            self.crashes.append(crash)
            return []
        self.outcomes.append(outcome)
        return [outcome]

    def _raise_violations(self) -> None:
        if self.guard is not None and self.guard.violations:
            first = self.guard.violations[0]
            self.guard.violations.clear()
            raise first

    # Reads for assertions go to the ledger directly: they are not the worker's calls,
    # so they neither count towards nor trigger injected crashes.

    def get_run(self, run_id: str) -> RunRecord:
        """The run's record as stored now; ``RunNotFound`` if there is none."""
        run = self.memory_ledger.get_run(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}")
        return self._reader.resolve(run)  # type: ignore[no-any-return]

    def run_by_key(self, workflow: str, key: str) -> RunRecord:
        """The run of ``workflow`` started under idempotency key ``key`` (a keyed child's
        ``id=``, an operator's key, a sender's with its namespace); ``RunNotFound`` if
        none holds it."""
        run = self.engine.run_by_key(workflow, key)
        if run is None:
            raise RunNotFound(f"no run of {workflow!r} has the key {key!r}")
        return run

    def history(self, run_id: str) -> list[StepRecord]:
        """The run's step records in position order, as stored now."""
        loaded = self._reader.resolve(self.memory_ledger.load(run_id))
        if loaded is None:
            raise RunNotFound(f"no run {run_id!r}")
        return [loaded.steps[p] for p in sorted(loaded.steps)]


__all__ = [
    "CRASH_TARGETS",
    "CrashPlan",
    "CrashPoint",
    "CrashingPort",
    "FakeClock",
    "LocalRunner",
    "NonDeterministicCall",
    "ReplayFailed",
    "ReplayResult",
    "RunNotSucceeded",
    "SimulatedCrash",
]
