"""What the write boundary costs a step: the engine with and without ``WriteBoundary``.

Every write to the ledger passes ``durable.core.write_boundary.scrub`` (issue 32: no live
callback token is stored, whatever path it takes). That is a regular expression over the
texts of each record written, on the hot path of every step. This measures a run of N
trivial steps on the memory ledger (where the boundary's share is largest: no network to
hide behind) with the engine as composed and with the boundary taken out, in interleaved
rounds on one process, and prints the ratio of the medians:

    boundary / none = per-step time with the boundary / per-step time without

The same for steps whose results are 2 KB texts with dots in them (the scan's worst
ordinary case: a text without a dot is passed over at once). No target: a report, with
the absolute microseconds beside it.

Two more cases measure the stored-bytes rule one level lower (``durable.core.stored_bytes``):

* the DynamoDB request hook (``durable.adapters.item_boundary``) on a real botocore client
  whose requests are answered in-process (no network, so its share is the largest it can
  be): a step's PutItem and one with a 2 KB result, per request with the hook and without;
* the memory ledger's walk of each record it stores, the same runs with it and with it
  taken out (the engine's boundary in place both times).

    python -m benchmarks.write_boundary
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.common import Figure, collect, median, memory_engine, print_figures, say
from durable import App, Context
from durable.adapters import item_boundary
from durable.adapters import memory as memory_module
from durable.adapters.dynamodb_items import step_to_item
from durable.core.model import Attempt, StepKind, StepRecord, StepStatus
from durable.engine.engine import Engine

N = 400
ROUNDS = 9
WORDY = ("see https://example.com/a.b.c?x=1. " * 60)[:2048]


def build_app() -> App:
    app = App()

    @app.step(name="tiny")
    def tiny(i: int) -> int:
        return i

    @app.step(name="wordy")
    def wordy(i: int) -> str:
        return f"{i} {WORDY}"

    @app.workflow(name="tiny_steps")
    def tiny_steps(ctx: Context, n: int) -> int:
        return sum(tiny(i) for i in range(n))

    @app.workflow(name="wordy_steps")
    def wordy_steps(ctx: Context, n: int) -> int:
        return sum(len(wordy(i)) for i in range(n))

    return app


@contextmanager
def without_boundary() -> Iterator[None]:
    """Engines made inside hold their ledger as given (the boundary is an identity)."""
    import durable.engine.engine as engine_module

    saved = engine_module.__dict__["WriteBoundary"]
    setattr(engine_module, "WriteBoundary", lambda ledger: ledger)  # noqa: B010
    try:
        yield
    finally:
        setattr(engine_module, "WriteBoundary", saved)  # noqa: B010


def per_step(make: Callable[[], Engine], workflow: str) -> float:
    engine = make()
    collect()
    t0 = time.perf_counter()
    run = engine.start(workflow, N)
    outcome = engine.resume(run.run_id)
    elapsed = time.perf_counter() - t0
    if outcome.result != "succeeded":
        raise RuntimeError(f"{workflow}: expected success, got {outcome.result}")
    return elapsed / N


def measure(app: App, workflow: str) -> tuple[float, float]:
    def with_it() -> Engine:
        return memory_engine(app)[0]

    def without_it() -> Engine:
        with without_boundary():
            return memory_engine(app)[0]

    on: list[float] = []
    off: list[float] = []
    per_step(with_it, workflow)  # warm both paths
    per_step(without_it, workflow)
    for i in range(ROUNDS):
        # Interleaved, the order alternating: drift on a shared machine hits both.
        pair = [(on, with_it), (off, without_it)]
        for sink, make in pair if i % 2 == 0 else reversed(pair):
            sink.append(per_step(make, workflow))
    return median(on), median(off)


# --- the DynamoDB request hook ------------------------------------------------------------

REQUESTS = 2000


def answered_client(hook: bool) -> Any:
    """A DynamoDB client as the deployed functions make it, every request answered ``{}``
    before it is sent (``before-send``), with the stored-bytes hook or without."""
    import boto3
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from botocore.config import Config

    from durable.adapters.aws_services import DYNAMODB_CLIENT_OPTIONS

    class Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b"{}"

    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(**DYNAMODB_CLIENT_OPTIONS),
    )
    answer = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 200, HTTPHeaders(), Raw())
    # A handler of before-send that returns a response: botocore sends nothing.
    answered: Any = lambda **_: answer  # noqa: E731
    client.meta.events.register("before-send.dynamodb", answered)
    return item_boundary.install(client) if hook else client


def step_item(output: str) -> dict[str, Any]:
    """The item of a finished step with ``output``, as the ledger's codec writes it."""
    at = "2026-01-01T00:00:00.000Z"
    return step_to_item(
        StepRecord(
            run_id="01KDVDNA00NH4Y4J45KWBET2C0",
            position="0007",
            name="charge",
            kind=StepKind.STEP,
            status=StepStatus.DONE,
            updated_at=at,
            attempt=1,
            attempts=[Attempt(1, at, finished_at=at, request_id="c0ffee-1234")],
            output=output,
            refs=[{"charge": "ch_1"}],
        )
    )


def per_request(client: Any, item: dict[str, Any]) -> float:
    collect()
    t0 = time.perf_counter()
    for _ in range(REQUESTS):
        # A fresh copy each time, as the codec builds one per write (the hook edits in place).
        client.put_item(
            TableName="ledger",
            Item={k: dict(v) for k, v in item.items()},
            ConditionExpression="attribute_not_exists(pk) OR #s <> :done",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":done": {"S": "DONE"}},
        )
    return (time.perf_counter() - t0) / REQUESTS


def measure_hook(item: dict[str, Any]) -> tuple[float, float]:
    hooked, bare = answered_client(True), answered_client(False)
    per_request(hooked, item)
    per_request(bare, item)
    on: list[float] = []
    off: list[float] = []
    for i in range(ROUNDS):
        pair = [(on, hooked), (off, bare)]
        for sink, client in pair if i % 2 == 0 else reversed(pair):
            sink.append(per_request(client, item))
    return median(on), median(off)


def walk_only(item: dict[str, Any]) -> float:
    """The hook's walk alone (``check_request``), per request."""
    params = {"TableName": "ledger", "Item": item}
    t0 = time.perf_counter()
    for _ in range(REQUESTS):
        item_boundary.check_request(params)
    return (time.perf_counter() - t0) / REQUESTS


# --- the memory ledger's walk ----------------------------------------------------------


@contextmanager
def without_memory_rule() -> Iterator[None]:
    """The memory ledger stores its records unwalked (a step still copied, as before)."""
    saved = {name: getattr(memory_module, name) for name in ("_run", "_step", "_signal")}
    for name in saved:
        setattr(memory_module, name, lambda record: record)
    setattr(memory_module, "_step", memory_module.copy_step)  # noqa: B010
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(memory_module, name, function)


def measure_memory_rule(app: App, workflow: str) -> tuple[float, float]:
    def with_it() -> float:
        return per_step(lambda: memory_engine(app)[0], workflow)

    def without_it() -> float:
        with without_memory_rule():
            return per_step(lambda: memory_engine(app)[0], workflow)

    with_it()
    without_it()
    on: list[float] = []
    off: list[float] = []
    for i in range(ROUNDS):
        pair = [(on, with_it), (off, without_it)]
        for sink, run in pair if i % 2 == 0 else reversed(pair):
            sink.append(run())
    return median(on), median(off)


def main() -> None:
    app = build_app()
    figures: list[Figure] = []
    for label, workflow in (("tiny results", "tiny_steps"), ("2 KB results", "wordy_steps")):
        say(f"write boundary: {N} steps with {label}, {ROUNDS} interleaved rounds ...")
        on, off = measure(app, workflow)
        figures.append(
            Figure.info(
                f"step time with / without the boundary, {label}",
                f"{on / off:.3f}",
                f"{on * 1e6:.1f} vs {off * 1e6:.1f} us per step (memory ledger)",
            )
        )
    for label, output in (("a step's PutItem", "42"), ("a PutItem with a 2 KB result", WORDY)):
        say(f"stored-bytes hook: {REQUESTS} requests of {label}, {ROUNDS} rounds ...")
        item = step_item(output)
        on, off = measure_hook(item)
        figures.append(
            Figure.info(
                f"request time with / without the DynamoDB hook, {label}",
                f"{on / off:.3f}",
                f"{on * 1e6:.1f} vs {off * 1e6:.1f} us per request (client side, no "
                f"network); the walk alone {walk_only(item) * 1e6:.1f} us",
            )
        )
    for label, workflow in (("tiny results", "tiny_steps"), ("2 KB results", "wordy_steps")):
        say(f"memory ledger's walk: {N} steps with {label}, {ROUNDS} interleaved rounds ...")
        on, off = measure_memory_rule(app, workflow)
        figures.append(
            Figure.info(
                f"step time with / without the memory ledger's walk, {label}",
                f"{on / off:.3f}",
                f"{on * 1e6:.1f} vs {off * 1e6:.1f} us per step",
            )
        )
    print_figures("the write boundary on the hot path", figures)


if __name__ == "__main__":
    main()
