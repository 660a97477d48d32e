"""The chaos tier: faults under steady load on ``durable dev``; nothing lost, doubled or stuck.

GIVEN ``durable dev`` (DynamoDB Local on its data folder, 3 worker processes, the default
60 s worker timeout, time x60) serving ``tests/chaos/chaos_workflow.py``
WHEN a driver starts RUNS runs through the HTTP API at up to RATE a second (keyed starts;
it holds back while IN_FLIGHT runs are unfinished, as a client with bounded concurrency
does, so the load stays under what the machine can serve), signals each run and answers
each run's callback with the token the run mailed (its effects file), while the test
SIGKILLs a busy worker process four times, SIGSTOPs DynamoDB Local for STOP_SECONDS
(longer than the API's timeout) while a probe asks the API every second, SIGCONTs it,
later SIGKILLs it and, STORE_DOWN later (longer than the worker pool's retries), starts
it again on its data folder and port
THEN every run SUCCEEDED with the output its signal and answer make; every effect key was
written once (none doubled) and every run made exactly its effects (none lost); every
signal was consumed once; every API request was answered (a 503 with Retry-After is an
answer) within the API's timeout; and the runs in flight at the last fault had all ended within
a lease plus one sweep of it (plus SLACK: a recovered run's own remaining work).

It prints the figures docs/operations.md quotes (``make test-chaos`` shows them): runs,
p50/p99 from start to end, the worst API wait, the recovery time, and the load.
``DURABLE_CHAOS_FAULTS=0`` runs the same load without faults, for comparison.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks.stack import Usage
from durable.local import clock as vclock
from durable.local.harness import DevProcess
from durable.local.servers.dynamodb_local import DynamoDBLocal, dynamodb_local_problem
from tests.chaos import chaos_workflow as flow

UNAVAILABLE = dynamodb_local_problem()
pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
]

ROOT = Path(__file__).resolve().parents[2]
RUNS = int(os.environ.get("DURABLE_CHAOS_RUNS", "300"))
RATE = float(os.environ.get("DURABLE_CHAOS_RATE", "2"))  # starts a second, at most
IN_FLIGHT = int(os.environ.get("DURABLE_CHAOS_IN_FLIGHT", "24"))  # unfinished runs, at most
WORKERS = 3
WORKER_TIMEOUT = 60.0  # durable dev's default: the lease a killed worker's run waits out
TIME_SCALE = 60.0  # the workflow's 6-minute sleep takes 6 s
SWEEP_TICK = 1.0  # durable dev's sweep period (DevOptions.sweep_interval)
DEADLINE_OVERRUN = 0.5  # a worker is killed this long after its deadline: its lease ends
LEASE = WORKER_TIMEOUT + DEADLINE_OVERRUN
# A recovered run still has its own work to do after its takeover (its sleep, its answer
# to wait for, its map, its child), each invocation behind those queued for the 3 workers
# (up to IN_FLIGHT runs'): the bound on recovery is a lease plus a tick plus this much.
SLACK = 15.0
RECOVERY_BOUND = LEASE + SWEEP_TICK + SLACK
# Every request is answered within the API's timeout (a 503 with Retry-After is an
# answer): API Gateway's integration limit, 29 s, which durable dev's API context mirrors
# (30 s). A request alone meets a hung store's 503 in about 9 s (3 attempts of a 3 s
# read); durable dev answers one API request at a time, and a start may first ask the
# workers what they serve (each hung on the store meanwhile), so under load a request can
# wait for more than one such budget: the figures show how long.
API_TIMEOUT = 29.0
# The client waits a little longer, so a late answer is measured, not cut off.
CLIENT_TIMEOUT = 35.0
# Longer than the API's timeout: a request held as long as the store hangs (no client
# timeouts) fails the tier, one answered 503 by the stack's budget passes.
STOP_SECONDS = 30.0
# DynamoDB Local stays down this long before it is started again (which takes 2-3 s more):
# longer than the worker pool's retries (1 s, then 2 s), so some wake-ups are lost for
# good and the sweeper must find them.
STORE_DOWN = 5.0

# The faults, as fractions of the planned load (RUNS / RATE seconds from the first start).
# DURABLE_CHAOS_FAULTS=0 runs the same load without them: the calm figures to compare.
FAULTS = os.environ.get("DURABLE_CHAOS_FAULTS", "1") != "0"
LOAD_SECONDS = RUNS / RATE
WORKER_KILLS = tuple(f * LOAD_SECONDS for f in (0.10, 0.55, 0.80, 0.90))
STORE_STOP_AT = 0.20 * LOAD_SECONDS
STORE_KILL_AT = 0.65 * LOAD_SECONDS
ENDED = ("SUCCEEDED", "FAILED", "CANCELED")

Answer = tuple[int | None, Any, str | None]  # status (None: no answer), body, Retry-After


@dataclass
class Wait:
    who: str  # driver | probe | monitor
    what: str  # method and route, ids left out
    at: float  # time.time() when sent
    seconds: float
    status: int | None  # None: no answer within CLIENT_TIMEOUT (or the connection failed)
    retry_after: str | None


@dataclass
class Record:
    """What the driver did and what everyone saw; shared by the threads and the test."""

    waits: list[Wait] = field(default_factory=list)
    run_ids: dict[int, str] = field(default_factory=dict)  # order -> run id
    started_at: dict[str, float] = field(default_factory=dict)  # run id -> start answered
    ended: dict[str, float] = field(default_factory=dict)  # run id -> seen ended at
    signaled: set[int] = field(default_factory=set)
    answered: set[int] = field(default_factory=set)
    faults: list[tuple[float, str]] = field(default_factory=list)  # (time.time(), what)
    victims: dict[float, str] = field(default_factory=dict)  # a worker kill -> its run
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, wait: Wait) -> None:
        with self.lock:
            self.waits.append(wait)

    def fault(self, what: str, t0: float) -> None:
        with self.lock:
            self.faults.append((time.time(), what))
        print(f"  +{time.time() - t0:5.0f} s  chaos: {what}", flush=True)

    def in_flight(self) -> int:
        with self.lock:
            return len(self.run_ids) - len(self.ended)


class Client:
    """The HTTP API, every request's wait recorded."""

    def __init__(self, base: str, record: Record, who: str) -> None:
        self.base, self.record, self.who = base, record, who
        # A proxy from the environment must never see requests to the local stack.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(
        self, method: str, path: str, body: Any = None, key: str | None = None, what: str = ""
    ) -> Answer:
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        sent = time.time()
        answer: Answer = (None, None, None)
        try:
            with self.opener.open(request, timeout=CLIENT_TIMEOUT) as response:
                raw = response.read()
                answer = (response.status, json.loads(raw) if raw else None, None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode(errors="replace")
            answer = (e.code, parsed, e.headers.get("Retry-After"))
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError):
            answer = (None, None, None)
        self.record.add(
            Wait(self.who, what or method, sent, time.time() - sent, answer[0], answer[2])
        )
        return answer


class Driver(threading.Thread):
    """One client, one request at a time: starts RUNS runs at up to RATE a second (keyed;
    held back while IN_FLIGHT are unfinished), signals each right after its start, and
    answers each callback whose link the run wrote to the effects file. A request that got
    a 503 or no answer is sent again after its Retry-After (1 s without one), under the
    same key: nothing the driver sends is lost, and nothing is stored twice."""

    def __init__(self, client: Client, record: Record, effects: Path, t0: float) -> None:
        super().__init__(name="chaos-driver", daemon=True)
        self.client, self.record, self.effects, self.t0 = client, record, effects, t0
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.last_start = 0.0  # time.time() of the last start accepted
        self._read = 0  # bytes of the effects file already read
        self._links: dict[int, str] = {}  # order -> the callback's path, with its token
        self._tried: set[tuple[str, int]] = set()  # (kind, order) sent at least once
        self._next_start = 0  # the next order to start
        self._due: list[tuple[float, str, int]] = []  # (not before, kind, order)

    def backlog(self) -> int:
        now = time.time()
        return sum(1 for item in list(self._due) if item[0] <= now)

    def done(self) -> bool:
        with self.record.lock:
            return len(self.record.answered) == RUNS and len(self.record.signaled) == RUNS

    def run(self) -> None:
        try:
            while not self.stop.is_set() and not self.done():
                self._read_links()
                self._release_a_start()
                now = time.time()
                ready = sorted(item for item in self._due if item[0] <= now)
                if not ready:
                    time.sleep(0.05)
                    continue
                self._due.remove(ready[0])
                _, kind, order = ready[0]
                again = self._send(kind, order)
                if again is not None:
                    self._due.append((time.time() + again, kind, order))
        except BaseException as e:  # the test reports it
            self.error = e

    def _release_a_start(self) -> None:
        """The next start, when its time has come (RATE) and IN_FLIGHT allows it."""
        n = self._next_start
        if n >= RUNS or time.time() < self.t0 + n / RATE:
            return
        if self.record.in_flight() >= IN_FLIGHT:
            return
        self._next_start += 1
        self._due.append((time.time(), "start", n))

    def _read_links(self) -> None:
        try:
            with open(self.effects, "rb") as f:
                f.seek(self._read)
                chunk = f.read()
        except FileNotFoundError:
            return
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a line being written is read next time
        self._read += len(whole)
        for line in whole.decode().splitlines():
            order, action, _key, detail = line.split("\t")
            if action == "link" and int(order) not in self._links:
                self._links[int(order)] = urllib.parse.urlsplit(detail).path
                self._due.append((time.time(), "answer", int(order)))

    def _send(self, kind: str, order: int) -> float | None:
        """One request; None when it is done, else the seconds to wait before again."""
        retried = (kind, order) in self._tried
        self._tried.add((kind, order))
        if kind == "start":
            path = f"/workflows/{flow.WORKFLOW}/runs"
            status, body, after = self.client.call(
                "POST", path, order, f"order-{order}", "POST start"
            )
            if status in (200, 201, 202):
                with self.record.lock:
                    self.record.run_ids[order] = body["run_id"]
                    self.record.started_at[body["run_id"]] = time.time()
                self.last_start = time.time()
                self._due.append((time.time(), "signal", order))
                return None
        elif kind == "signal":
            path = f"/runs/{self.record.run_ids[order]}/signals/{flow.SIGNAL}"
            status, body, after = self.client.call(
                "POST", path, {"order": order}, f"go-{order}", "POST signal"
            )
            if status in (200, 201, 202):
                with self.record.lock:
                    self.record.signaled.add(order)
                return None
        else:
            status, body, after = self.client.call(
                "POST", self._links[order], {"approved": order}, None, "POST callback"
            )
            # 409 (already answered) only after a try whose answer was lost: that one landed.
            if status in (200, 201, 202) or (status == 409 and retried):
                with self.record.lock:
                    self.record.answered.add(order)
                return None
        if status is None or status == 503:
            return float(after) if after and after.isdigit() else 1.0
        raise AssertionError(f"{kind} of order {order}: {status} {body}")


class Probe(threading.Thread):
    """While the store is stopped: a read of one run and a page of the listing, in turn,
    one a second (after the last one's answer), each timed."""

    def __init__(self, client: Client, run_id: str) -> None:
        super().__init__(name="chaos-probe", daemon=True)
        self.client, self.run_id = client, run_id
        self.stop = threading.Event()

    def run(self) -> None:
        paths = [
            (f"/runs/{self.run_id}", "GET run"),
            (f"/runs?workflow={flow.WORKFLOW}&limit=10", "GET runs"),
        ]
        turn = 0
        while not self.stop.is_set():
            path, what = paths[turn % 2]
            turn += 1
            self.client.call("GET", path, what=what)
            self.stop.wait(1.0)


def percentile(values: list[float], p: float) -> float:
    """Nearest rank (no interpolation); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, min(len(ordered), math.ceil(p / 100 * len(ordered)))) - 1]


def children_of(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc), from each of its threads."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def store_pid(dev: DevProcess) -> int:
    """The DynamoDB Local JVM this dev started: its child (the launcher execs java)."""
    assert dev.process is not None
    for pid in children_of(dev.process.pid):
        with contextlib.suppress(OSError):
            if b"LocalhostDynamoDB" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    raise AssertionError("durable dev's DynamoDB Local process not found")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of one process so far (Linux /proc; 0 if gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, TypeError):
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def store_port(workdir: Path) -> int:
    """DynamoDB Local's port, from the dev's ``.durable/dev.json`` (written just after the
    API starts answering: waited for)."""
    info = workdir / ".durable" / "dev.json"
    deadline = time.time() + 30
    while not info.exists() and time.time() < deadline:
        time.sleep(0.1)
    endpoint: str = json.loads(info.read_text())["dynamodb"]
    port = urllib.parse.urlsplit(endpoint).port
    assert port is not None
    return port


class Chaos:
    """The faults, on one dev stack, and the monitor that sees runs end."""

    def __init__(self, dev: DevProcess, record: Record, driver: Driver, workdir: Path) -> None:
        self.dev, self.record, self.driver, self.workdir = dev, record, driver, workdir
        self.monitor = Client(dev.base, record, "monitor")
        self.port = store_port(workdir)
        self.stopped: list[int] = []  # a SIGSTOPped store: SIGCONTed whatever happens
        self.restarted = DynamoDBLocal(log_path=workdir / "dynamodb-restarted.log")
        self._said = self._looked = 0.0

    def plan(self) -> list[tuple[float, str]]:
        if not FAULTS:
            return [(LOAD_SECONDS, "none")]
        faults = [(t, "kill-worker") for t in WORKER_KILLS]
        return sorted([*faults, (STORE_STOP_AT, "stop-store"), (STORE_KILL_AT, "kill-store")])

    def wait_until(self, when: float) -> None:
        """Watch runs end (and say how far things are) until ``when``."""
        while time.time() < when:
            self.see_ended()
            self.say()
            if self.driver.error is not None:
                raise self.driver.error
            time.sleep(min(1.0, max(0.0, when - time.time())))

    def see_ended(self) -> None:
        """The runs that ended: those started (a second ago or more, so the listing has
        them) that the listing no longer shows unfinished. It lists unfinished runs
        first, so one page or two hold them all: one cheap look every 2 s."""
        if time.time() - self._looked < 2:
            return
        self._looked = time.time()
        with self.record.lock:
            started = {rid for rid, at in self.record.started_at.items() if at < self._looked - 1}
        unfinished: set[str] = set()
        cursor: str | None = None
        while True:
            query = {
                "workflow": flow.WORKFLOW,
                "limit": "100",
                **({"cursor": cursor} if cursor else {}),
            }
            answer, page, _ = self.monitor.call(
                "GET", "/runs?" + urllib.parse.urlencode(query), what="GET runs"
            )
            if answer != 200:
                return  # a fault's 503: the next look asks again
            runs = page["runs"]
            unfinished |= {run["run_id"] for run in runs if run["status"] not in ENDED}
            cursor = page.get("next_cursor")
            if not cursor or any(run["status"] in ENDED for run in runs):
                break
        with self.record.lock:
            for rid in started - unfinished:
                self.record.ended.setdefault(rid, self._looked)

    def say(self) -> None:
        """A line every 10 s: the driver's and the runs' pace (CI logs show it)."""
        if time.time() - self._said < 10:
            return
        self._said = time.time()
        with self.record.lock:
            recent = [w.seconds for w in self.record.waits if w.at > time.time() - 10]
            line = (
                f"  +{time.time() - self.driver.t0:5.0f} s  started {len(self.record.run_ids)}, "
                f"ended {len(self.record.ended)}, signaled {len(self.record.signaled)}, "
                f"answered {len(self.record.answered)}, driver backlog {self.driver.backlog()}"
            )
        if recent:
            line += f", API p50 {percentile(recent, 50) * 1000:.0f} ms of {len(recent)}"
        # The stack's side (its local status route needs no store): busy workers, and the
        # sweeps of the last 10 s (a slow sweep delays every takeover behind it).
        with contextlib.suppress(OSError):
            status = self.dev.status()
            busy = sum(1 for w in status["workers"] if w["run_id"])
            sweeps = [took for at, took in status["sweeps"] if at > time.time() - 10]
            line += (
                f"; workers busy {busy}/{WORKERS}, {len(sweeps)} sweeps (longest "
                f"{max(sweeps, default=0):.1f} s)"
            )
        print(line, flush=True)

    def inject(self, what: str) -> None:
        t0 = self.driver.t0
        if what == "none":
            self.record.fault("the planned load is started (no faults: calm figures)", t0)
        elif what == "kill-worker":
            # A worker in the middle of a run (waited for a few seconds), else any.
            deadline = time.time() + 5
            while True:
                workers = [w for w in self.dev.status()["workers"] if w["alive"] and w["pid"]]
                busy = [w for w in workers if w["run_id"]]
                if busy or time.time() > deadline:
                    break
                time.sleep(0.05)
            victim = (busy or workers)[0]
            os.kill(victim["pid"], signal.SIGKILL)
            running = victim["run_id"] or "nothing"
            self.record.fault(f"SIGKILL worker {victim['pid']} (running {running})", t0)
            if victim["run_id"]:
                self.record.victims[self.record.faults[-1][0]] = victim["run_id"]
        elif what == "stop-store":
            self.stop_store()
        else:
            pid = store_pid(self.dev)
            os.kill(pid, signal.SIGKILL)
            self.record.fault(f"SIGKILL DynamoDB Local {pid}", t0)
            killed = time.time()
            time.sleep(STORE_DOWN)
            self.restarted.start(port=self.port, db_path=self.workdir / ".durable" / "dynamodb")
            self.record.fault(
                f"DynamoDB Local restarted on its data and port, {time.time() - killed:.1f} s "
                "after the kill",
                t0,
            )

    def stop_store(self) -> None:
        """SIGSTOP DynamoDB Local for STOP_SECONDS while the probe asks the API; SIGCONT."""
        pid = store_pid(self.dev)
        with self.record.lock:
            some_run = next(iter(self.record.run_ids.values()))
        probe = Probe(Client(self.dev.base, self.record, "probe"), some_run)
        os.kill(pid, signal.SIGSTOP)
        self.stopped.append(pid)
        self.record.fault(f"SIGSTOP DynamoDB Local {pid} for {STOP_SECONDS:g} s", self.driver.t0)
        probe.start()
        time.sleep(STOP_SECONDS)  # no monitor look meanwhile: the probe's waits are its own
        os.kill(pid, signal.SIGCONT)
        self.stopped.remove(pid)
        self.record.fault(f"SIGCONT DynamoDB Local {pid}", self.driver.t0)
        probe.stop.set()
        probe.join()

    def close(self) -> None:
        for pid in self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@dataclass
class Outcome:
    """What the test saw, read once the stack has stopped."""

    record: Record
    t0: float
    last_fault: float
    last_start: float
    details: dict[str, dict[str, Any]]  # run id -> GET /runs/{id}
    effects: list[list[str]]  # the effects file's lines, split
    invocations: int
    deaths: int
    usage: Usage
    usage_seconds: float  # the time the usage covers
    epoch: vclock.Epoch
    wall: float

    def real(self, stamp: str) -> float:
        """A ledger (virtual) time as time.time() seconds."""
        virtual = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        e = self.epoch
        return e.real_epoch + (virtual - e.virtual_epoch) / e.scale

    def durations(self) -> list[float]:
        return [
            self.real(run["updated_at"]) - self.real(run["created_at"])
            for run in self.details.values()
            if run["status"] in ENDED
        ]

    def recovery(self, after: float | None = None) -> float:
        """From a fault (the last one by default) until every run started before it had
        ended."""
        at = self.last_fault if after is None else after
        # By the ledger's creation time: a start still on its way back to the driver at
        # the fault has a run the fault may have hit.
        before = [
            self.real(run["updated_at"])
            for run in self.details.values()
            if self.real(run["created_at"]) <= at
        ]
        return max(before, default=at) - at

    def in_flight_at(self, at: float) -> int:
        return sum(
            1
            for run in self.details.values()
            if self.real(run["created_at"]) <= at < self.real(run["updated_at"])
        )

    def taken_over(self, at: float, run_id: str) -> float | None:
        """Seconds from a worker's kill until its run moved again: the first write of one
        of its steps after the kill (its new owner's), or its end."""
        run = self.details.get(run_id)
        if run is None:
            return None
        moved = [
            self.real(step["updated_at"])
            for step in run["steps"]
            if self.real(step["updated_at"]) > at
        ]
        if run["status"] in ENDED:
            moved.append(self.real(run["updated_at"]))
        return min(moved, default=at) - at

    def per_fault(self) -> list[str]:
        lines = []
        for at, what in self.record.faults:
            line = f"    +{at - self.t0:6.1f} s  {what}"
            if FAULTS:
                line += (
                    f": {self.in_flight_at(at)} runs in flight, all ended "
                    f"{self.recovery(at):.1f} s later"
                )
            victim = self.record.victims.get(at)
            took = self.taken_over(at, victim) if victim else None
            if took is not None:
                line += f"; its run moved again {took:.1f} s after the kill"
            lines.append(line)
        return lines


def drive(workdir: Path) -> Outcome:
    """The load and the faults on a fresh dev stack; what they left, read back."""
    effects = workdir / "effects.log"
    record = Record()
    wall0 = time.time()
    dev = DevProcess(
        workdir,
        app="tests.chaos.chaos_workflow:app",
        time_scale=TIME_SCALE,
        workers=WORKERS,
        worker_timeout=WORKER_TIMEOUT,
        env={"PYTHONPATH": str(ROOT), "DURABLE_CHAOS_EFFECTS": str(effects)},
    )
    chaos: Chaos | None = None
    try:
        dev.start()
        invoked = dev.status()["stats"]["invoked"]
        usage, usage_from = Usage.begin(dev), time.time()
        t0 = time.time() + 1.0
        driver = Driver(Client(dev.base, record, "driver"), record, effects, t0)
        chaos = Chaos(dev, record, driver, workdir)
        driver.start()
        for offset, what in chaos.plan():
            chaos.wait_until(t0 + offset)
            chaos.inject(what)
        last_fault = record.faults[-1][0]
        # Every run ends within a lease and a tick of the last fault or of its own start
        # (plus its own work); waited past that bound, to measure how far past it.
        while True:
            end = max(last_fault, driver.last_start) + RECOVERY_BOUND + 20
            if len(record.ended) >= RUNS or time.time() > end:
                break
            chaos.wait_until(min(end, time.time() + 1))
        driver.stop.set()
        driver.join(timeout=CLIENT_TIMEOUT + 5)
        if driver.error is not None:
            raise driver.error
        usage.end()
        usage_seconds = time.time() - usage_from
        # The restarted DynamoDB Local is this test's child, not the dev's: its CPU is
        # the store's, not other work's.
        restarted = cpu_seconds(chaos.restarted.pid)
        usage.spent["DynamoDB Local"] = usage.spent.get("DynamoDB Local", 0.0) + restarted
        usage.spent["other work"] = max(0.0, usage.spent.get("other work", 0.0) - restarted)
        details = {rid: dev.http("GET", f"/runs/{rid}") for rid in record.run_ids.values()}
        stats = dev.status()["stats"]
        return Outcome(
            record,
            t0,
            last_fault,
            driver.last_start,
            details,
            [line.split("\t") for line in effects.read_text().splitlines()],
            stats["invoked"] - invoked,
            stats["died"],
            usage,
            usage_seconds,
            vclock.read(workdir / ".durable" / "clock.json"),
            time.time() - wall0,
        )
    except BaseException:
        print(f"dev log:\n{dev.log_tail(60)}", flush=True)
        raise
    finally:
        if chaos is not None:
            chaos.close()  # a stopped store continues first: dev's Ctrl-C then stops it
        dev.stop()
        if chaos is not None:
            chaos.restarted.stop()


def figures(o: Outcome) -> str:
    """The figures docs/operations.md quotes, with the load they were measured under."""
    r = o.record
    durations = o.durations()
    worst = max(r.waits, key=lambda w: w.seconds)
    probes = [w.seconds for w in r.waits if w.who == "probe"]
    stopped = [w for w in r.waits if w.status == 503]
    by_who = {
        who: max(w.seconds for w in r.waits if w.who == who)
        for who in sorted({w.who for w in r.waits})
    }
    answers = Counter(w.status for w in r.waits)
    rate = len(r.run_ids) / max(1e-9, o.last_start - o.t0)
    children = sum(flow.has_child(n) for n in range(RUNS))
    return "\n".join(
        [
            "",
            "chaos tier figures" + ("" if FAULTS else " (calm: DURABLE_CHAOS_FAULTS=0)"),
            f"  load      {len(r.run_ids)} runs of {flow.WORKFLOW} (+{children} child runs) "
            f"started in {o.last_start - o.t0:.0f} s ({rate:.2f}/s; at most {RATE:g}/s and "
            f"{IN_FLIGHT} unfinished), {len(o.effects)} effects, {o.invocations} worker "
            f"invocations; {WORKERS} workers, --worker-timeout {WORKER_TIMEOUT:g}, "
            f"--time-scale {TIME_SCALE:g}, {os.cpu_count()} cores",
            f"  CPU s     {o.usage.describe()} (of {o.usage_seconds * (os.cpu_count() or 1):.0f} "
            f"in {o.usage_seconds:.0f} s)",
            f"  faults    ({o.deaths} worker deaths seen by the pool)",
            *o.per_fault(),
            f"  runs      {len(r.ended)}/{RUNS} ended; start to end p50 "
            f"{percentile(durations, 50):.1f} s, p99 {percentile(durations, 99):.1f} s, "
            f"max {max(durations, default=0):.1f} s",
            f"  API       {len(r.waits)} requests; worst wait {worst.seconds:.1f} s ({worst.who} "
            f"{worst.what} -> {worst.status}); the probe during the stop: {len(probes)} "
            f"requests, worst {max(probes, default=0):.1f} s; worst by client "
            f"{', '.join(f'{who} {s:.1f} s' for who, s in by_who.items())}; 503s answered in "
            f"{min((w.seconds for w in stopped), default=0):.1f}-"
            f"{max((w.seconds for w in stopped), default=0):.1f} s; answers "
            f"{dict(sorted(answers.items(), key=str))}",
            f"  recovery  the runs in flight at the last fault all ended {o.recovery():.1f} s "
            f"after it (bound: lease {LEASE:g} s + tick {SWEEP_TICK:g} s + slack {SLACK:g} s "
            f"= {RECOVERY_BOUND:g} s)",
            f"  wall      {o.wall:.0f} s",
        ]
    )


def problems_in(o: Outcome) -> list[str]:
    r = o.record
    problems: list[str] = []
    # Nothing stuck: every run started and SUCCEEDED, with what its signal and answer say.
    if len(r.run_ids) != RUNS:
        problems.append(f"only {len(r.run_ids)} of {RUNS} starts were accepted")
    for order, rid in sorted(r.run_ids.items()):
        run = o.details[rid]
        if run["status"] != "SUCCEEDED":
            problems.append(f"order {order}: run {rid} is {run['status']} ({run['waiting_for']})")
            continue
        if run["output"] != flow.expected_output(order):
            problems.append(f"order {order}: output {run['output']}")
        # The signal the driver sent was stored once and consumed.
        sent = [s for s in run["signals"] if s["name"] == flow.SIGNAL]
        if len(sent) != 1 or not sent[0]["consumed_by"]:
            problems.append(f"order {order}: signals {run['signals']}")
    # Every signal and answer the driver sent was taken (the outputs above carry them).
    if len(r.answered) != RUNS or len(r.signaled) != RUNS:
        problems.append(f"{len(r.signaled)} signals and {len(r.answered)} answers of {RUNS}")
    # No effect doubled, none lost: each key once; each run exactly its actions, once each.
    keys = Counter(fields[2] for fields in o.effects)
    doubled = sorted(key for key, n in keys.items() if n > 1)
    if doubled:
        problems.append(f"{len(doubled)} effects ran twice, e.g. {doubled[0]}")
    made: dict[int, Counter[str]] = {}
    for order_text, action, _key, _detail in o.effects:
        made.setdefault(int(order_text), Counter())[action] += 1
    for order in range(RUNS):
        actions = made.get(order, Counter())
        if set(actions) != flow.expected_actions(order) or any(n != 1 for n in actions.values()):
            problems.append(f"order {order}: effects {dict(actions)}")
    # The API answered every request within its budget; a 5xx is a 503 with Retry-After.
    late = [w for w in r.waits if w.status is None or w.seconds > API_TIMEOUT]
    if late:
        problems.append(f"{len(late)} requests not answered within {API_TIMEOUT:g} s: {late[:5]}")
    bad = [
        w
        for w in r.waits
        if w.status and w.status >= 500 and not (w.status == 503 and w.retry_after)
    ]
    if bad:
        problems.append(f"{len(bad)} answers a 5xx other than 503 with Retry-After: {bad[:5]}")
    probes = [w for w in r.waits if w.who == "probe"]
    if FAULTS and (not probes or any(w.status not in (200, 503) for w in probes)):
        problems.append(f"the probe during the stop: {[(w.what, w.status) for w in probes]}")
    # Recovery: the runs in flight at the last fault ended within a lease and a tick of it.
    if o.recovery() > RECOVERY_BOUND:
        problems.append(
            f"the runs in flight at the last fault ended {o.recovery():.1f} s after it "
            f"(bound {RECOVERY_BOUND:g} s)"
        )
    return problems


def test_faults_under_load_lose_double_and_strand_nothing(tmp_path: Path) -> None:
    outcome = drive(tmp_path)
    print(figures(outcome), flush=True)
    problems = problems_in(outcome)
    assert problems == [], f"{len(problems)} problems:\n" + "\n".join(problems[:40])
