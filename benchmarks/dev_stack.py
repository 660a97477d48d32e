"""The local stack (``durable dev``) measured end to end, and the storage cost of a sleep.

Each figure is taken through the doors a user has: a ``durable dev`` subprocess in a
scratch directory (``DevProcess``) serving ``benchmarks.dev_workflows:app``, driven over
its HTTP API and ``/_local/status``. DynamoDB Local is its storage, persisted on disk.

(a) start to ready: ``durable dev`` launched until its HTTP server answers, in a new state
    directory (DynamoDB Local starts, the tables are created) and again on a warm restart
    of the same directory; plus the first 10-step run after a cold start (the workers
    import the handler on their first event).
(b) timer lateness: 50 runs started back to back, run i sleeping 100 + 2.5 i virtual
    seconds at time x10 (10 s + 0.25 i s real: each is above the 5 s a sleep may be served
    in-process, so it arms a Scheduler timer and suspends; the wake-ups come one every
    0.25 s, after the starts, so they measure the timer path rather than a queue). Per
    run, the sleep's recorded ``wake_at`` against the first attempt's ``started_at`` of
    the step after it, in real seconds: timer loop, worker dispatch, claim, load and
    replay. The timer loop's own lateness (due time to firing, from ``/_local/status``)
    is printed beside it.
(c) throughput: 200 runs of 10 trivial steps, POSTed back to back, until the listing
    shows every one SUCCEEDED; with 2 and with 4 worker processes.
    ``--worker-timeout 60`` (the template's minimum and the dev default), so each run is
    one invocation as on AWS; ``--handoff`` adds a run at 30 s (the dev default before it
    was 60), where every step hands off.
(d) recovery: a run whose step holds its worker 1.5 s; the worker is SIGKILLed as soon
    as the step's body has started; the time from the kill until that step's body starts
    again on another worker (its last attempt's ``started_at`` in the ledger), against
    DESIGN's target lease + sweep period + 1 s, the lease being the worker timeout (5 s
    here). Also shown: until that step is DONE (its 1.5 s body re-run), and which sweep
    took the run over (``/_local/status``).
(e) storage per sleep: a workflow that only sleeps 1 h, on ``DynamoLedger`` against its
    own DynamoDB Local, driven by the engine directly with a fake clock: the suspending
    invocation plus the waking one, minus a workflow that does nothing, counted by
    operation with botocore hooks (``RequestCounter``), with consumed write capacity.

    python -m benchmarks.dev_stack [--handoff]   # (a)-(e)
    python -m benchmarks.dev_stack --recovery-only [--rounds N]   # (d) alone

About 3 minutes on a 2-core machine. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchmarks import stack
from benchmarks.common import (
    WRITE_OPS,
    DynamoUnavailable,
    Figure,
    RequestCounter,
    TimedLedger,
    dynamo_client,
    dynamodb_endpoint,
    fresh_tables,
    not_measured,
    print_figures,
    say,
)
from durable import App, Context
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryTimers
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.ports import Ledger
from durable.engine.engine import Engine
from durable.local.harness import DevProcess
from durable.local.lambda_runtime import DEADLINE_OVERRUN

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SCALE = 10.0  # modest: ledger times are ms of virtual time, so 0.1 ms of real time
SWEEP_PERIOD = 1.0  # DevOptions.sweep_interval
THROUGHPUT_RUNS = 200
THROUGHPUT_TIMEOUT = 60.0  # the template's minimum: one invocation per 10-step run
HANDOFF_TIMEOUT = 30.0  # below the default step budget + safety margin: a hand-off per step
NAP_RUNS = 50
NAP_BASE = 100.0  # virtual seconds: 10 s real, longer than starting all 50 runs takes
NAP_GAP = 2.5  # virtual seconds between successive wake-ups: 0.25 s real
RECOVERY_TIMEOUT = 5.0
# Real seconds. On durable dev the lease outlives the invocation's deadline by the
# pool's DEADLINE_OVERRUN (the worker is killed at the deadline), and a takeover needs no
# clock-skew margin (one clock). On AWS: the engine's defaults, shown for comparison.
DEADLINE_OVERRUN_AWS = EngineConfig().deadline_overrun.total_seconds()
CLOCK_SKEW_AWS = EngineConfig().clock_skew.total_seconds()
HOLD_SECONDS = 1.5

NAMES = {
    "ready_cold": "dev start to ready, new state dir",
    "ready_warm": "dev start to ready, warm restart",
    "first_run": "dev start to first 10-step run done",
    "late_p50": "timer lateness p50 (wake_at -> next step)",
    "late_p99": "timer lateness p99 (wake_at -> next step)",
    "loop": "  timer loop alone, due -> fired p50/p99",
    "tput2": "200 ten-step runs, 2 workers",
    "tput4": "200 ten-step runs, 4 workers",
    "tput_handoff": "  same, 2 workers, 30 s timeout (hand-offs)",
    "recovery": "recovery after a SIGKILLed worker (kill -> step restarted)",
    "done": "  kill -> the step DONE (1.5 s body re-run)",
    "sleep_requests": "DynamoDB requests per sleep",
    "sleep_wcu": "DynamoDB write capacity per sleep",
}
PLANNED_DEV = [
    (NAMES[k], "(report)")
    for k in ("ready_cold", "ready_warm", "first_run", "late_p50", "late_p99", "tput2", "tput4")
] + [(NAMES["recovery"], "<= lease + sweep + 1 s")]
PLANNED_SLEEP = [(NAMES["sleep_requests"], "(report)"), (NAMES["sleep_wcu"], "(report)")]
PLANNED = PLANNED_DEV + PLANNED_SLEEP


# --- (a) start to ready ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Startup:
    ready: float
    first_run: float  # from launch until a 10-step run started after ready has SUCCEEDED


def cold_start(dev: DevProcess) -> Startup:
    launched = time.perf_counter()
    ready = dev.start()
    run_id = stack.start_runs(dev, "ten-steps", [0])[0]
    dev.wait_for(run_id, {"SUCCEEDED"}, timeout=60)
    return Startup(ready, time.perf_counter() - launched)


# --- (b) timer lateness -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lateness:
    end_to_end: list[float]  # real seconds, wake_at -> next step's first attempt started
    rounding: list[float]  # of which: wake_at up to the whole second the schedule names
    loop: list[float]  # the timer loop: schedule due -> fired, real seconds
    timers_fired: int
    usage: stack.Usage


def ceil_second(stamp: str) -> str:
    """The ``at()`` time the Scheduler adapter arms: the wake time rounded up to a second."""
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if when.microsecond:
        when = when.replace(microsecond=0) + timedelta(seconds=1)
    return when.isoformat()


def timer_lateness(dev: DevProcess) -> Lateness:
    real = stack.RealTime.of(dev)
    before = dev.status()
    seen = len(before["timer_lateness"])
    usage = stack.Usage.begin(dev)
    naps = [NAP_BASE + i * NAP_GAP for i in range(NAP_RUNS)]
    run_ids = stack.start_runs(dev, "nap", naps)
    stack.wait_succeeded(dev, "nap", run_ids, timeout=naps[-1] / SCALE + 90)
    usage.end()
    late: list[float] = []
    rounding: list[float] = []
    for run in stack.get_runs(dev, run_ids):
        sleep, after = run["steps"][0], run["steps"][1]
        if sleep["kind"] != "sleep" or not after["attempts"]:
            raise RuntimeError(f"unexpected ledger for nap run {run['run_id']}: {run['steps']}")
        wake = real(sleep["wake_at"])
        late.append(real(after["attempts"][0]["started_at"]) - wake)
        rounding.append(real(ceil_second(sleep["wake_at"])) - wake)
    after_status = dev.status()
    # The status keeps the last 1000 firings: with fewer than that the slice is exact.
    loop = [real.seconds(v) for v in after_status["timer_lateness"][seen:]]
    fired = int(after_status["timers_fired"]) - int(before["timers_fired"])
    return Lateness(late, rounding, loop, fired, usage)


# --- (c) throughput -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Throughput:
    label: str
    workers: int
    runs: int
    seconds: float  # first POST until every run is seen SUCCEEDED
    start_seconds: float  # first POST until the last POST was answered
    invocations: int  # worker invocations during the measurement
    usage: stack.Usage  # CPU seconds spent during the measurement

    @property
    def per_second(self) -> float:
        return self.runs / self.seconds


def throughput(
    dev: DevProcess, label: str, workers: int, runs: int = THROUGHPUT_RUNS
) -> Throughput:
    # Two runs per worker first, so every worker process has imported and composed its
    # handler: the figure is the steady state, not the first events' cold imports.
    warm = stack.start_runs(dev, "ten-steps", list(range(2 * workers)))
    stack.wait_succeeded(dev, "ten-steps", warm, timeout=120)
    dev.wait_idle(timeout=60)
    invoked = stack.invocations(dev)
    usage = stack.Usage.begin(dev)
    t0 = time.perf_counter()
    run_ids = stack.start_runs(dev, "ten-steps", list(range(runs)))
    started = time.perf_counter()
    done = stack.wait_succeeded(dev, "ten-steps", run_ids, timeout=300)
    return Throughput(
        label,
        workers,
        runs,
        done - t0,
        started - t0,
        stack.invocations(dev) - invoked,
        usage.end(),
    )


# --- (d) recovery after a killed worker ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recovery:
    restarted: float  # kill -> the step's body started again on another worker
    done: float  # kill -> the step DONE
    executions: int  # times the held step's body ran (2: killed once, then completed)
    into_invocation: float  # how far into the killed invocation the kill came (at least)
    sweep: float | None  # kill -> the start of the sweep that invoked the takeover

    @property
    def lease_end(self) -> float:
        """Kill -> the killed invocation's lease ended (its deadline + the overrun)."""
        return RECOVERY_TIMEOUT - self.into_invocation + DEADLINE_OVERRUN


def recovery(dev: DevProcess, counter: Path) -> Recovery:
    real = stack.RealTime.of(dev)
    # Warm workers first: a kill during a cold worker's imports would come before the
    # claim, and the sweeper would simply start the run elsewhere (no lease to wait out).
    warm = stack.start_runs(dev, "ten-steps", list(range(2 * dev.workers)))
    stack.wait_succeeded(dev, "ten-steps", warm, timeout=120)
    run_id = stack.start_runs(dev, "slow-step", [HOLD_SECONDS])[0]
    # Kill once the step's body has started (its line is in the execution counter), so
    # the run is claimed and leased, and the step is in flight: the case recovery is for.
    victim: dict[str, Any] | None = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        if stack.executions(counter)[(run_id, "0001")]:
            victim = next((w for w in dev.status()["workers"] if w["run_id"] == run_id), None)
        if victim is None:
            time.sleep(0.02)
    if victim is None:
        raise RuntimeError(f"run {run_id}'s step never started; log:\n{dev.log_tail()}")
    killed = time.time()
    os.kill(int(victim["pid"]), signal.SIGKILL)
    final = dev.wait_for(run_id, {"SUCCEEDED", "FAILED"}, timeout=120)
    if final["status"] != "SUCCEEDED":
        raise RuntimeError(f"the recovered run ended {final['status']}: {final}")
    held = final["steps"][0]["attempts"][-1]
    ran = stack.executions(counter)[(run_id, "0001")]
    restarted = real(held["started_at"]) - killed
    # The sweep that invoked the takeover: the last one to start before the step did.
    sweeps = [at - killed for at, _ in dev.status().get("sweeps", [])]
    sweep = max((at for at in sweeps if 0 < at < restarted), default=None)
    return Recovery(
        restarted=restarted,
        done=real(held["finished_at"]) - killed,
        executions=ran,
        into_invocation=float(victim["busy_seconds"]),
        sweep=sweep,
    )


# --- (e) storage requests per sleep, engine on DynamoDB Local ------------------------------------


def sleep_app() -> App:
    app = App()

    @app.workflow(name="sleep-once")
    def sleep_once(ctx: Context) -> int:
        ctx.sleep(timedelta(hours=1))
        return 0

    @app.workflow(name="no-sleep")
    def no_sleep(ctx: Context) -> int:
        return 0

    return app


@dataclass(frozen=True, slots=True)
class Tally:
    ops: Counter[str]
    write_units: float
    phases: Counter[tuple[str, str]]
    capacity: dict[str, float]  # operation -> capacity units, reads included

    @classmethod
    def of(cls, counter: RequestCounter) -> Tally:
        return cls(
            counter.by_operation(),
            counter.write_capacity(),
            Counter(counter.ops),
            dict(counter.capacity),
        )

    def units(self) -> str:
        return ", ".join(f"{op} {v:g}" for op, v in sorted(self.capacity.items()))


@dataclass(frozen=True, slots=True)
class SleepCost:
    base: Tally  # start + one invocation of a workflow that does nothing
    suspend: Tally  # start + the invocation that records the sleep and suspends
    wake: Tally  # the invocation the timer triggers, which finishes the run

    @property
    def per_sleep(self) -> Counter[str]:
        total = self.suspend.ops + self.wake.ops
        total.subtract(self.base.ops)
        return Counter({op: n for op, n in total.items() if n})

    @property
    def write_units(self) -> float:
        return self.suspend.write_units + self.wake.write_units - self.base.write_units


def sleep_engine(client: DynamoDBClient, table: str) -> tuple[Engine, RequestCounter, FakeClock]:
    from durable.adapters.dynamodb import DynamoLedger

    counter = RequestCounter(client)
    ledger = TimedLedger(DynamoLedger(client, table), on_call=counter.set_phase)
    clock = FakeClock()
    engine = Engine(
        sleep_app(),
        cast("Ledger", ledger),
        MemoryInvoker(),
        MemoryEffectStore(),
        clock=clock,
        timers=MemoryTimers(),  # a timer is armed (not a storage request) as on AWS
    )
    return engine, counter, clock


def counted(counter: RequestCounter, action: Any) -> tuple[Any, Tally]:
    counter.reset()
    result = action()
    return result, Tally.of(counter)


def sleep_cost(endpoint: str) -> SleepCost:
    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    engine, counter, clock = sleep_engine(client, table)

    def one_sleep() -> SleepCost:
        def base_run() -> str:
            run = engine.start("no-sleep")
            return engine.resume(run.run_id).result

        def suspend_run() -> tuple[str, str]:
            run = engine.start("sleep-once")
            return run.run_id, engine.resume(run.run_id).result

        ended, base = counted(counter, base_run)
        (run_id, suspended), suspend = counted(counter, suspend_run)
        clock.advance(timedelta(hours=1, seconds=1))
        woke, wake = counted(counter, lambda: engine.resume(run_id, reason="timer").result)
        if (ended, suspended, woke) != ("succeeded", "suspended", "succeeded"):
            raise RuntimeError(f"sleep runs ended {ended}, {suspended}, {woke}")
        return SleepCost(base, suspend, wake)

    one_sleep()  # the first opens connections and resolves the endpoint; not counted
    return one_sleep()


def describe(ops: Counter[str]) -> str:
    return " + ".join(f"{n} {op}" for op, n in sorted(ops.items())) or "nothing"


def by_phase(tally: Tally) -> str:
    return ", ".join(f"{phase}: {n} {op}" for (phase, op), n in sorted(tally.phases.items()))


def sleep_figures(cost: SleepCost) -> list[Figure]:
    ops = cost.per_sleep
    writes = sum(n for op, n in ops.items() if op in WRITE_OPS)
    reads = sum(ops.values()) - writes
    return [
        Figure.info(
            NAMES["sleep_requests"],
            f"{writes} writes + {reads} read",
            note=(
                f"suspend + resume minus a run without the sleep: {describe(ops)}. Suspending "
                f"invocation: {by_phase(cost.suspend)}; waking invocation: "
                f"{by_phase(cost.wake)}; baseline: {by_phase(cost.base)}"
            ),
        ),
        Figure.info(
            NAMES["sleep_wcu"],
            f"{cost.write_units:.1f} WCU",
            note=(
                "ConsumedCapacity (TOTAL, indexes included) as DynamoDB Local reports it, "
                f"suspend + wake - baseline: {cost.suspend.write_units:g} + "
                f"{cost.wake.write_units:g} - {cost.base.write_units:g} WCU. By operation: "
                f"suspend (start included) {cost.suspend.units()}; wake {cost.wake.units()}; "
                f"baseline {cost.base.units()}. A step item is 1 WCU; a run-item update also "
                "rewrites the due-index and list-index entries whose keys it changes"
            ),
        ),
    ]


def measure_sleep_cost() -> list[Figure]:
    say("storage per sleep: the engine on DynamoDB Local, one 1 h sleep ...")
    try:
        with dynamodb_endpoint() as endpoint:
            return sleep_figures(sleep_cost(endpoint))
    except DynamoUnavailable as e:
        return not_measured(PLANNED_SLEEP, str(e))


# --- the dev stack ----------------------------------------------------------------------------


@contextlib.contextmanager
def running(dev: DevProcess) -> Iterator[DevProcess]:
    """Stop ``durable dev`` (and everything it started) however the block ends."""
    try:
        yield dev
    finally:
        dev.stop()


@dataclass(slots=True)
class DevResults:
    cold: list[Startup]
    warm: float
    lateness: Lateness
    tput: list[Throughput]
    recovered: Recovery


def measure_dev(handoff: bool) -> DevResults:
    with tempfile.TemporaryDirectory(prefix="durable-bench-dev-") as tmp:
        root = Path(tmp)
        first, second = root / "a", root / "b"
        first.mkdir()
        second.mkdir()
        counter = first / "executions.log"
        dev = stack.dev_process(
            first, workers=2, worker_timeout=THROUGHPUT_TIMEOUT, time_scale=SCALE, counter=counter
        )
        say("durable dev, 2 workers: cold start ...")
        with running(dev):
            cold = [cold_start(dev)]
            say(f"  ready in {cold[0].ready:.2f} s; timer lateness, {NAP_RUNS} sleeps ...")
            late = timer_lateness(dev)
            say(f"  throughput, {THROUGHPUT_RUNS} runs ...")
            tput = [throughput(dev, NAMES["tput2"], 2)]
        # The warm restart keeps the state directory (ledger, clock, keys); only the
        # worker timeout changes, to a short lease so the takeover comes in seconds.
        dev.worker_timeout = RECOVERY_TIMEOUT
        say(f"warm restart (worker timeout {RECOVERY_TIMEOUT:g} s); recovery after a kill ...")
        with running(dev):
            warm = dev.start()
            recovered = recovery(dev, counter)
        say("durable dev, 4 workers: cold start, throughput ...")
        four = stack.dev_process(
            second, workers=4, worker_timeout=THROUGHPUT_TIMEOUT, time_scale=SCALE
        )
        with running(four) as d:
            cold.append(cold_start(d))
            tput.append(throughput(d, NAMES["tput4"], 4))
        if handoff:
            third = root / "c"
            third.mkdir()
            say(f"durable dev, 2 workers, --worker-timeout {HANDOFF_TIMEOUT:g}: throughput ...")
            with running(
                stack.dev_process(
                    third, workers=2, worker_timeout=HANDOFF_TIMEOUT, time_scale=SCALE
                )
            ) as d:
                d.start()
                tput.append(throughput(d, NAMES["tput_handoff"], 2))
        return DevResults(cold, warm, late, tput, recovered)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def dev_figures(r: DevResults) -> list[Figure]:
    late = r.lateness
    colds = ", ".join(f"{s.ready:.2f}" for s in r.cold)
    figures = [
        Figure.info(
            NAMES["ready_cold"],
            f"{min(s.ready for s in r.cold):.2f} s",
            note=(
                f"launch of `durable dev` until /_local/status answers, in a new state "
                f"directory (DynamoDB Local's JVM starts, tables created): {colds} s over "
                f"{len(r.cold)} starts (the best is shown)"
            ),
        ),
        Figure.info(
            NAMES["ready_warm"],
            f"{r.warm:.2f} s",
            note="the same directory restarted: the tables and the ledger already exist",
        ),
        Figure.info(
            NAMES["first_run"],
            f"{min(s.first_run for s in r.cold):.2f} s",
            note=(
                "launch until a 10-step run started right after ready has SUCCEEDED: the "
                "workers import and compose the handler on their first event"
            ),
        ),
        Figure.info(
            NAMES["late_p50"],
            ms(stack.percentile(late.end_to_end, 50)),
            note=(
                f"{NAMES['late_p50'].split(' p50')[0]}: {len(late.end_to_end)} runs sleeping "
                f"{NAP_BASE:g} + {NAP_GAP:g} i virtual s at time x{SCALE:g} (a wake-up every "
                f"{NAP_GAP / SCALE:g} s) on 2 workers; min {ms(min(late.end_to_end))}, max "
                f"{ms(max(late.end_to_end))}. Of it, rounding the wake time up to the whole "
                f"(virtual) second of an at() schedule: p50 "
                f"{ms(stack.percentile(late.rounding, 50))}; the timer loop fired "
                f"{late.timers_fired} schedules (the sweeper may wake a run first). CPU "
                f"seconds meanwhile: {late.usage.describe()}"
            ),
        ),
        Figure.info(NAMES["late_p99"], ms(stack.percentile(late.end_to_end, 99))),
    ]
    if late.loop:
        figures.append(
            Figure.info(
                NAMES["loop"],
                f"{ms(stack.percentile(late.loop, 50))} / {ms(stack.percentile(late.loop, 99))}",
                note=(
                    "/_local/status timer_lateness: the rounded schedule time until the loop "
                    "(polling every 0.1 s) handed the event to the pool"
                ),
            )
        )
    for t in r.tput:
        figures.append(
            Figure.info(
                t.label,
                f"{t.per_second:.1f} runs/s",
                note=(
                    f"{t.workers} workers: {t.runs} runs in {t.seconds:.1f} s (the starts took "
                    f"{t.start_seconds:.1f} s), {t.invocations} worker invocations "
                    f"({t.invocations / t.runs:.2f} per run); the stack used "
                    f"{t.usage.stack / t.runs * 1000:.0f} CPU ms per run. CPU seconds "
                    f"meanwhile (of {(os.cpu_count() or 1) * t.seconds:.0f} on "
                    f"{os.cpu_count()} cores): {t.usage.describe()}"
                ),
            )
        )
    return figures + recovery_figures([r.recovered])


def recovery_figures(rounds: list[Recovery]) -> list[Figure]:
    """The worst of ``rounds`` against the target; every round in the notes."""
    target = RECOVERY_TIMEOUT + SWEEP_PERIOD + 1.0
    worst = max(rounds, key=lambda r: r.restarted)
    each = ", ".join(f"{r.restarted:.2f}" for r in rounds)
    waits = ", ".join(
        f"{r.sweep - r.lease_end:.2f} + {r.restarted - r.sweep:.2f}"
        for r in rounds
        if r.sweep is not None
    )
    # What the rules allow: the lease ends DEADLINE_OVERRUN after the killed invocation's
    # deadline; no clock-skew margin (one clock); the next sweep; then the takeover itself.
    bound = worst.lease_end + SWEEP_PERIOD
    return [
        Figure.at_most(
            NAMES["recovery"],
            worst.restarted,
            target,
            ".1f",
            " s",
            note=(
                f"kill -> the killed step's body started again on another worker, the worst "
                f"of {len(rounds)} round(s): {each} s. Target: lease {RECOVERY_TIMEOUT:g} s "
                f"(the worker timeout) + sweep {SWEEP_PERIOD:g} s + 1 s. Bound: the deadline "
                f"{RECOVERY_TIMEOUT - worst.into_invocation:.2f} s after the kill + the lease's "
                f"overrun {DEADLINE_OVERRUN:g} s (the worker is killed at its deadline) + no "
                f"clock-skew margin (one clock) + at most one sweep period {SWEEP_PERIOD:g} s = "
                f"{bound:.2f} s, then the takeover (claim, load, replay). Per round, lease end "
                f"-> the sweep that took over + that sweep -> step started: {waits} s. On AWS "
                f"the lease outlives the deadline by {DEADLINE_OVERRUN_AWS:g} s, a takeover "
                f"waits {CLOCK_SKEW_AWS:g} s of clock skew more, then the next sweep (every "
                "minute)"
            ),
        ),
        Figure.info(
            NAMES["done"],
            f"{max(r.done for r in rounds):.1f} s",
            note=(
                f"the worker SIGKILLed {worst.into_invocation:.2f} s into its invocation, as its "
                f"{HOLD_SECONDS:g} s step had started; the step DONE on another worker "
                f"{worst.done:.1f} s after the kill (the body ran {worst.executions} times)"
            ),
        ),
    ]


def measure_recovery(rounds: int) -> list[Figure]:
    """(d) alone: ``rounds`` kills, each on a fresh ``durable dev`` (worker timeout 5 s)."""
    planned = [(NAMES["recovery"], "<= lease + sweep + 1 s")]
    why = stack.why_unavailable()
    if why is not None:
        return not_measured(planned, why)
    results: list[Recovery] = []
    with tempfile.TemporaryDirectory(prefix="durable-bench-recovery-") as tmp:
        for i in range(rounds):
            workdir = Path(tmp) / f"r{i}"
            workdir.mkdir()
            counter = workdir / "executions.log"
            dev = stack.dev_process(
                workdir,
                workers=2,
                worker_timeout=RECOVERY_TIMEOUT,
                time_scale=SCALE,
                counter=counter,
            )
            say(f"recovery round {i + 1}/{rounds} (worker timeout {RECOVERY_TIMEOUT:g} s) ...")
            with running(dev):
                dev.start()
                results.append(recovery(dev, counter))
            last = results[-1]
            say(f"  restarted {last.restarted:.2f} s, DONE {last.done:.2f} s after the kill")
    return recovery_figures(results)


def measure(handoff: bool = False) -> list[Figure]:
    why = stack.why_unavailable()
    if why is not None:
        say(f"dev stack figures not measured: {why}")
        dev = not_measured(PLANNED_DEV, why)
    else:
        dev = dev_figures(measure_dev(handoff))
    return [*dev, *measure_sleep_cost()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--handoff",
        action="store_true",
        help=f"also measure 2 workers at --worker-timeout {HANDOFF_TIMEOUT:g} (a hand-off "
        "per step, the dev default before it was 60 s; adds about 90 s)",
    )
    parser.add_argument(
        "--recovery-only",
        action="store_true",
        help="measure only (d), recovery after a killed worker, on a fresh durable dev per round",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds of (d) with --recovery-only (default 1)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.recovery_only:
        figures = measure_recovery(max(1, args.rounds))
        print_figures("durable dev: recovery after a killed worker", figures)
        say(f"\n{time.perf_counter() - started:.0f} s in all")
        return
    figures = measure(args.handoff)
    print_figures("durable dev: the local stack (and the storage cost of a sleep)", figures)
    say(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
