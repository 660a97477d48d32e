"""Shared pieces of the benchmarks: figures and their table, the benchmark workflows, a
timing proxy around the ledger, DynamoDB Local and a botocore request counter.

Nothing here asserts: a benchmark prints what it measured and the verdict against the
target of DESIGN section 8, and ``run_all`` collects the figures into one table.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from durable import App, Context, RetryableError, RetryPolicy, current_step
from durable.adapters.dynamodb_units import item_size
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.core.clock import Clock
from durable.core.config import EngineConfig
from durable.core.ports import Ledger
from durable.engine.engine import Engine

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"


def ensure_aws_env() -> None:
    """Dummy credentials and region: DynamoDB Local needs some, never real ones."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


# --- figures ---------------------------------------------------------------------------

Verdict = Literal["met", "MISSED", "info", "not measured"]


@dataclass(frozen=True, slots=True)
class Figure:
    """One line of the results table."""

    name: str
    measured: str
    target: str
    verdict: Verdict
    note: str = ""

    @classmethod
    def at_most(
        cls, name: str, value: float, limit: float, fmt: str, unit: str = "", note: str = ""
    ) -> Figure:
        verdict: Verdict = "met" if value <= limit else "MISSED"
        return cls(name, f"{value:{fmt}}{unit}", f"<= {limit:{fmt}}{unit}", verdict, note)

    @classmethod
    def at_least(
        cls, name: str, value: float, limit: float, fmt: str, unit: str = "", note: str = ""
    ) -> Figure:
        verdict: Verdict = "met" if value >= limit else "MISSED"
        return cls(name, f"{value:{fmt}}{unit}", f">= {limit:{fmt}}{unit}", verdict, note)

    @classmethod
    def exactly(
        cls, name: str, value: float, expected: float, fmt: str, unit: str = "", note: str = ""
    ) -> Figure:
        verdict: Verdict = "met" if abs(value - expected) < 1e-9 else "MISSED"
        return cls(name, f"{value:{fmt}}{unit}", f"= {expected:{fmt}}{unit}", verdict, note)

    @classmethod
    def info(cls, name: str, measured: str, note: str = "") -> Figure:
        return cls(name, measured, "(report)", "info", note)

    @classmethod
    def not_measured(cls, name: str, target: str, why: str) -> Figure:
        return cls(name, "-", target, "not measured", why)


def format_table(figures: Sequence[Figure]) -> str:
    header = ("figure", "measured", "target", "verdict")
    rows = [(f.name, f.measured, f.target, f.verdict) for f in figures]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]

    def line(cells: Sequence[str]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header), "-+-".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    # One line per distinct note: a shared reason (no Java, say) is printed once.
    notes: dict[str, list[str]] = {}
    for f in figures:
        if f.note:
            notes.setdefault(f.note, []).append(f.name.strip())
    if notes:
        out.append("")
        out.extend(f"  [{'; '.join(names)}] {note}" for note, names in notes.items())
    return "\n".join(out)


def print_figures(title: str, figures: Sequence[Figure]) -> None:
    print(f"\n== {title} ==")
    print(format_table(figures))
    sys.stdout.flush()


def say(text: str) -> None:
    print(text)
    sys.stdout.flush()


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def collect() -> None:
    """Start each timed repetition from a clean heap so one run's garbage is not billed
    to the next (the collector stays enabled while timing: it is part of the cost)."""
    gc.collect()


# --- the benchmark workflows -----------------------------------------------------------


def benchmark_step(i: int) -> int:
    """The trivial step: returns an int, does nothing else."""
    return i + 1


class _Parked(RetryableError):
    """Raised by the parking step to make the run wait (durably) for a long time."""


def park() -> int:
    raise _Parked("wait", retry_after=timedelta(hours=1))


def flaky_once() -> int:
    """Fails its first attempt with a 60 s backoff, so the run suspends and wakes once."""
    if current_step().attempt == 1:
        raise RetryableError("wake me later", retry_after=timedelta(seconds=60))
    return 0


PARK_RETRY = RetryPolicy(max_attempts=2, max_delay=timedelta(hours=2))
WAKE_RETRY = RetryPolicy(max_attempts=2, max_delay=timedelta(minutes=5))


def build_app() -> App:
    """``sequential(n)``: n trivial ``@app.step`` steps. ``sequential_explicit(n)``: the
    same through ``ctx.step(fn, i)`` with an undecorated function. ``park_after(n)``: n
    steps then a 1 h durable wait. ``waves(groups)``: groups of 9 steps + 1 step that
    suspends once (a wake every 10 positions)."""
    app = App()
    step = app.step(benchmark_step)

    @app.workflow(name="sequential")
    def sequential(ctx: Context, n: int) -> int:
        total = 0
        for i in range(n):
            total += step(i)
        return total

    @app.workflow(name="sequential_explicit")
    def sequential_explicit(ctx: Context, n: int) -> int:
        total = 0
        for i in range(n):
            total += ctx.step(benchmark_step, i)
        return total

    @app.workflow(name="park_after")
    def park_after(ctx: Context, n: int) -> int:
        total = 0
        for i in range(n):
            total += step(i)
        return total + ctx.step(park, retry=PARK_RETRY)

    @app.workflow(name="waves")
    def waves(ctx: Context, groups: int) -> int:
        total = 0
        for g in range(groups):
            for i in range(9):
                total += step(g * 9 + i)
            total += ctx.step(flaky_once, retry=WAKE_RETRY)
        return total

    return app


# One invocation drives the whole run, however long (the default hands off at 1000).
CONFIG = EngineConfig(steps_per_invocation=100_000)


# --- a timing proxy around any ledger ----------------------------------------------------


@dataclass(slots=True)
class LedgerStats:
    seconds: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    method_seconds: dict[str, float] = field(default_factory=dict)

    def reset(self) -> None:
        self.seconds = 0.0
        self.calls.clear()
        self.method_seconds.clear()


class TimedLedger:
    """A ledger proxy that forwards every public method and adds up the time inside it.

    Generic on purpose: the ``Ledger`` port grows, and the proxy must time whatever the
    engine calls. Each wrapper is cached on the instance after its first lookup, so its
    cost is one extra call frame. ``on_call`` is told which method is about to run (to
    attribute requests to it).
    """

    def __init__(self, inner: object, on_call: Callable[[str], None] | None = None) -> None:
        self.inner = inner
        self.stats = LedgerStats()
        self.on_call = on_call

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "stats", "on_call") or name.startswith("_"):
            raise AttributeError(name)
        target = getattr(self.inner, name)
        if not callable(target):
            return target
        stats = self.stats

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.on_call is not None:
                self.on_call(name)
            stats.calls[name] += 1
            t0 = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                stats.seconds += spent
                stats.method_seconds[name] = stats.method_seconds.get(name, 0.0) + spent

        setattr(self, name, timed)
        return timed


def make_engine(
    app: App, ledger: object, *, clock: Clock | None = None, config: EngineConfig = CONFIG
) -> tuple[Engine, TimedLedger]:
    """An engine on ``ledger`` (wrapped in a ``TimedLedger``), memory invoker and effects.

    The invoker only queues: every benchmark drives ``engine.resume`` itself, in-process,
    with the default ``NoGuard`` (no determinism guard).
    """
    timed = TimedLedger(ledger)
    engine = Engine(
        app,
        cast("Ledger", timed),
        MemoryInvoker(),
        MemoryEffectStore(),
        clock=clock,
        config=config,
    )
    return engine, timed


def memory_engine(app: App, *, clock: Clock | None = None) -> tuple[Engine, TimedLedger]:
    return make_engine(app, MemoryLedger(), clock=clock)


# --- DynamoDB Local ------------------------------------------------------------------------


class DynamoUnavailable(Exception):
    """DynamoDB Local could not be used; the message says why."""


@contextlib.contextmanager
def dynamodb_endpoint() -> Iterator[str]:
    """``DURABLE_TEST_DYNAMODB_ENDPOINT`` if set, else a private DynamoDB Local server.

    Raises ``DynamoUnavailable`` (before yielding) when neither is possible.
    """
    ensure_aws_env()
    endpoint = os.environ.get("DURABLE_TEST_DYNAMODB_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    if shutil.which("java") is None:
        raise DynamoUnavailable(
            "java is not on PATH (DynamoDB Local needs Java 17+); install a JRE or set "
            "DURABLE_TEST_DYNAMODB_ENDPOINT to a running DynamoDB Local"
        )
    from infra.local.dynamodb_local import DynamoDBLocal, DynamoDBLocalError

    server = DynamoDBLocal()
    try:
        server.start()
    except (DynamoDBLocalError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DynamoUnavailable(f"DynamoDB Local did not start: {first}") from e
    try:
        yield server.endpoint_url
    finally:
        server.stop()


def dynamo_client(endpoint: str) -> DynamoDBClient:
    import boto3
    from botocore.config import Config

    ensure_aws_env()
    client: DynamoDBClient = boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        config=Config(max_pool_connections=4, proxies={}),
    )
    return client


def fresh_tables(client: DynamoDBClient) -> str:
    """Create a fresh ledger (and idempotency) table from template.yaml; return the ledger's."""
    from durable.adapters.schema import IDEMPOTENCY, LEDGER, create_tables

    suffix = uuid.uuid4().hex[:8]
    names = {LEDGER: f"bench-ledger-{suffix}", IDEMPOTENCY: f"bench-idem-{suffix}"}
    create_tables(client, names, template=TEMPLATE)
    return names[LEDGER]


# An item's size by DynamoDB's rules: the same function the run's bill uses.
dynamo_item_size = item_size


WRITE_OPS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
)
READ_OPS = frozenset({"GetItem", "Query", "Scan", "TransactGetItems", "BatchGetItem"})


class RequestCounter:
    """Counts a client's DynamoDB requests through botocore's event hooks.

    ``before-call`` counts operations (attributed to ``phase``, which a ``TimedLedger``
    sets to the ledger method running); ``before-send`` counts HTTP attempts (retries
    included); a ``before-parameter-build`` hook asks every data-plane call for
    ``ReturnConsumedCapacity=TOTAL`` and ``after-call`` adds the capacity up. The adapter
    itself is untouched.
    """

    def __init__(self, client: DynamoDBClient) -> None:
        self.phase = "-"
        self.ops: Counter[tuple[str, str]] = Counter()  # (phase, operation)
        self.http_attempts = 0
        self.capacity: dict[str, float] = {}  # operation -> capacity units
        self.query_pages: list[tuple[int, int]] = []  # (items, bytes) per Query page
        self.put_sizes: list[int] = []  # bytes of each PutItem's item
        self.last_put: dict[str, Any] | None = None
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._ask_capacity)
        events.register("before-call.dynamodb", self._count_call)
        events.register("before-send.dynamodb", self._count_send)
        events.register("after-call.dynamodb", self._add_capacity)

    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def reset(self) -> None:
        self.phase = "-"
        self.ops.clear()
        self.http_attempts = 0
        self.capacity.clear()
        self.query_pages.clear()
        self.put_sizes.clear()

    def _ask_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        members = getattr(model.input_shape, "members", {}) if model.input_shape else {}
        if "ReturnConsumedCapacity" in members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")
        if model.name == "PutItem" and "Item" in params:
            self.put_sizes.append(dynamo_item_size(params["Item"]))
            self.last_put = params

    def _count_call(self, model: Any, **_: Any) -> None:
        self.ops[(self.phase, str(model.name))] += 1

    def _count_send(self, **_: Any) -> None:
        self.http_attempts += 1

    def _add_capacity(self, parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        for entry in entries:
            op = str(model.name)
            self.capacity[op] = self.capacity.get(op, 0.0) + float(entry.get("CapacityUnits", 0.0))
        if model.name == "Query" and "Items" in parsed:
            items = parsed["Items"]
            self.query_pages.append((len(items), sum(dynamo_item_size(i) for i in items)))

    # --- summaries --------------------------------------------------------------------

    def by_operation(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for (_, op), n in self.ops.items():
            out[op] += n
        return out

    def writes(self) -> int:
        return sum(n for op, n in self.by_operation().items() if op in WRITE_OPS)

    def reads(self) -> int:
        return sum(n for op, n in self.by_operation().items() if op in READ_OPS)

    def write_capacity(self) -> float:
        return sum(v for op, v in self.capacity.items() if op in WRITE_OPS)

    def in_phase(self, phase: str) -> Counter[str]:
        return Counter({op: n for (p, op), n in self.ops.items() if p == phase})


def dynamo_engine(
    app: App, client: DynamoDBClient, table: str, *, clock: Clock | None = None
) -> tuple[Engine, TimedLedger, RequestCounter]:
    from durable.adapters.dynamodb import DynamoLedger

    counter = RequestCounter(client)
    engine, timed = make_engine(app, DynamoLedger(client, table), clock=clock)
    timed.on_call = counter.set_phase
    return engine, timed, counter


def not_measured(names_targets: Sequence[tuple[str, str]], why: str) -> list[Figure]:
    return [Figure.not_measured(name, target, why) for name, target in names_targets]


def warm_up(endpoint: str) -> None:
    """Exercise the server's code paths (the JVM compiles them as they get hot) and the
    client's connection before anything is timed; a fresh server is ~2x slower at first."""
    from durable.adapters.dynamodb import DynamoLedger

    say("warming up DynamoDB Local ...")
    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    engine, _ = make_engine(build_app(), DynamoLedger(client, table))
    for _ in range(2):
        run = engine.start("park_after", 150)
        engine.resume(run.run_id)
        engine.resume(run.run_id)
    for i in range(200):
        client.put_item(
            TableName=table,
            Item={"pk": {"S": "WARM"}, "sk": {"S": f"STEP#{i:06d}"}, "x": {"S": "x" * 200}},
            ConditionExpression="attribute_not_exists(sk)",
        )


def dynamo_main(
    title: str, measure: Callable[[str], list[Figure]], planned: Sequence[tuple[str, str]]
) -> None:
    """``main`` of a DynamoDB benchmark: its own server, or a clear line saying why not."""
    try:
        with dynamodb_endpoint() as endpoint:
            warm_up(endpoint)
            figures = measure(endpoint)
    except DynamoUnavailable as e:
        say(f"DynamoDB figures not measured: {e}")
        figures = not_measured(planned, str(e))
    print_figures(title, figures)
