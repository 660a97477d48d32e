"""Driving ``durable dev`` for the local-stack benchmarks and the load test.

Everything goes through the doors a user has (the HTTP API and ``/_local/status``) on a
``DevProcess`` in a scratch directory, serving ``benchmarks.dev_workflows:app``. The
ledger records virtual times (``--time-scale``); ``RealTime`` turns them back into
``time.time()`` seconds from the epoch the dev server persisted, so ledger times and
the benchmark's own wall clock can be compared.
"""

from __future__ import annotations

import math
import os
import shutil
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT
from benchmarks.dev_workflows import COUNTER_ENV, SPANS_ENV
from durable.local import clock as vclock
from durable.local.harness import DevProcess

APP = "benchmarks.dev_workflows:app"
STATE_DIR = ".durable"  # durable dev keeps its state under the working directory
# One request at a time. The dev server answers each HTTP request on its own thread but
# shares one Powertools resolver, which keeps the current event in class attributes:
# concurrent requests can get a 500 (KeyError '_route') or, worse, act on another
# request's body (a start with input 0 created a run with input 2). Until the server
# serializes its API handler, as one Lambda sandbox would, the client does. Serial POSTs
# started 7-26 runs a second on the 2-core test machine, about as fast as runs finish.


def why_unavailable() -> str | None:
    """Why the dev stack cannot run with persistent storage here, or None.

    Without Java ``durable dev`` falls back to moto, a different storage engine: its
    figures would not be comparable, so they are not measured at all.
    """
    missing = [tool for tool in ("java", "npm") if shutil.which(tool) is None]
    if missing:
        return (
            f"{' and '.join(missing)} not on PATH: durable dev would store runs in moto, not "
            "DynamoDB Local; install Java 17+ and npm"
        )
    return None


def dev_process(
    workdir: Path,
    *,
    workers: int,
    worker_timeout: float,
    time_scale: float = 1.0,
    counter: Path | None = None,
    spans: Path | None = None,
) -> DevProcess:
    env = {"PYTHONPATH": str(ROOT)}
    if counter is not None:
        env[COUNTER_ENV] = str(counter)
    if spans is not None:
        env[SPANS_ENV] = str(spans)
    return DevProcess(
        workdir,
        app=APP,
        time_scale=time_scale,
        workers=workers,
        worker_timeout=worker_timeout,
        env=env,
    )


@dataclass(frozen=True, slots=True)
class RealTime:
    """Ledger (virtual) timestamps as real ``time.time()`` seconds."""

    epoch: vclock.Epoch

    @classmethod
    def of(cls, dev: DevProcess) -> RealTime:
        return cls(vclock.read(dev.workdir / STATE_DIR / "clock.json"))

    def __call__(self, stamp: str) -> float:
        virtual = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        e = self.epoch
        return e.real_epoch + (virtual - e.virtual_epoch) / e.scale

    def seconds(self, virtual_seconds: float) -> float:
        return virtual_seconds / self.epoch.scale


def start_runs(dev: DevProcess, workflow: str, inputs: Sequence[Any]) -> list[str]:
    """POST one run per input (one request at a time, see above); the run ids in order."""
    path = f"/workflows/{urllib.parse.quote(workflow, safe='')}/runs"
    return [str(dev.http("POST", path, value)["run_id"]) for value in inputs]


def listed(dev: DevProcess, workflow: str, status: str) -> set[str]:
    """Every run of ``workflow`` in ``status``, through the listing API (all pages)."""
    found: set[str] = set()
    cursor: str | None = None
    for _ in range(10_000):  # a bound, far above any page count here
        query = {"workflow": workflow, "status": status, "limit": "100"}
        if cursor:
            query["cursor"] = cursor
        page = dev.http("GET", "/runs?" + urllib.parse.urlencode(query))
        found.update(run["run_id"] for run in page["runs"])
        cursor = page.get("next_cursor")
        if not cursor:
            return found
    raise RuntimeError(f"listing {workflow} {status} did not end")


def wait_succeeded(
    dev: DevProcess, workflow: str, run_ids: Iterable[str], *, timeout: float, poll: float = 0.5
) -> float:
    """Wait until every run is SUCCEEDED; return ``time.perf_counter()`` when seen so.

    Polls the listing (a few Query pages) rather than each run, so the poller stays a
    small load beside the workers it measures. A run that FAILED ends the wait at once.
    """
    want = set(run_ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if want <= listed(dev, workflow, "SUCCEEDED"):
            return time.perf_counter()
        failed = want & listed(dev, workflow, "FAILED")
        if failed:
            raise RuntimeError(f"{len(failed)} {workflow} runs FAILED, e.g. {sorted(failed)[0]}")
        time.sleep(poll)
    done = len(want & listed(dev, workflow, "SUCCEEDED"))
    raise RuntimeError(
        f"{done}/{len(want)} {workflow} runs SUCCEEDED after {timeout:.0f} s; dev log:\n"
        + dev.log_tail()
    )


def get_runs(dev: DevProcess, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Each run with its ledger (GET /runs/{id}), one request at a time (see above)."""
    runs: list[dict[str, Any]] = []
    for run_id in run_ids:
        runs.append(dev.http("GET", f"/runs/{urllib.parse.quote(run_id)}"))
    return runs


def executions(counter: Path) -> Counter[tuple[str, str]]:
    """How many times each (run id, position) step body ran, from the append-only file."""
    counts: Counter[tuple[str, str]] = Counter()
    if counter.exists():
        for line in counter.read_text().splitlines():
            run_id, position, _attempt = line.split()
            counts[(run_id, position)] += 1
    return counts


def invocations(dev: DevProcess) -> int:
    invoked: int = dev.status()["stats"]["invoked"]
    return invoked


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation: with 50 samples p99 is the maximum)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


def cpu_seconds(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of ``durable dev`` and its children, by role.

    Read from /proc (Linux; empty elsewhere). It shows where a throughput figure's time
    goes: the dev server process (HTTP API, timer loop, sweeper, embedded moto), the
    worker processes and DynamoDB Local's JVM.
    """
    proc = Path("/proc")
    out: dict[str, float] = {}
    if not proc.is_dir():
        return out
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        # The command name (field 2) may contain spaces; the fields after it do not.
        fields = raw[raw.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        stats[pid] = fields
    tree = {root_pid}
    for _ in range(8):  # a few generations: dev -> worker / the JVM's launcher -> the JVM
        tree |= {pid for pid, parent in parents.items() if parent in tree}
    for pid in tree & stats.keys():
        fields = stats[pid]
        seconds = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        try:
            cmdline = (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if pid == root_pid:
            role = "dev server"
        elif b"java" in cmdline:
            role = "DynamoDB Local"
        elif b"spawn_main" in cmdline:
            role = "workers"
        else:
            role = "other children"
        out[role] = out.get(role, 0.0) + seconds
    return out


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all processes, all cores; Linux).

    Against ``cpu_seconds`` it shows how much of the machine other work took meanwhile.
    """
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return 0.0
    # cpu user nice system idle iowait irq softirq steal ...: busy is all but idle/iowait.
    values = [int(v) for v in first[1:9]]
    busy = sum(values) - values[3] - values[4]
    return busy / os.sysconf("SC_CLK_TCK")


STACK_ROLES = ("DynamoDB Local", "workers", "dev server", "other children")


@dataclass(slots=True)
class Usage:
    """CPU seconds spent between ``begin`` and ``end``: the stack by role, this client and
    other work on the machine (its busy time minus both). On a shared machine the last
    one tells a slow round from a slow stack."""

    root_pid: int
    _stack: dict[str, float]
    _machine: float
    _client: float
    spent: dict[str, float]

    @classmethod
    def begin(cls, dev: DevProcess) -> Usage:
        assert dev.process is not None, "durable dev is not running"
        pid = dev.process.pid
        return cls(pid, cpu_seconds(pid), machine_busy_seconds(), time.process_time(), {})

    def end(self) -> Usage:
        after = cpu_seconds(self.root_pid)
        spent = {role: after.get(role, 0.0) - self._stack.get(role, 0.0) for role in after}
        self.spent = {role: s for role, s in spent.items() if s >= 0.05}
        self.spent["this client"] = time.process_time() - self._client
        busy = machine_busy_seconds() - self._machine
        self.spent["other work"] = max(0.0, busy - sum(self.spent.values()))
        return self

    @property
    def stack(self) -> float:
        return sum(s for role, s in self.spent.items() if role in STACK_ROLES)

    def describe(self) -> str:
        order = [*STACK_ROLES, "this client", "other work"]
        return ", ".join(f"{r} {self.spent[r]:.1f}" for r in order if r in self.spent)
