"""No live callback token reaches storage, by any path (issue 32, finding 1).

A workflow mints a callback and sends its URL everywhere workflow code can: a step's
result, a child's input (the reported case: a notifier child), a step's exception, a
checkpoint, the run's own failure, and the outside world sends it back in a signal, a
callback's answer and a cancel's reason; each time inside a random JSON structure
(hypothesis), whole or inside a longer text. Then every item of every table (the ledger
and the idempotency table, on DynamoDB Local and moto) is scanned for the token's MAC:
it appears nowhere. The ``WriteBoundary`` every ledger write crosses is what makes it so.
"""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable import App, Context, Engine, EngineConfig, RetryPolicy, StepFailed, current_step
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.write_boundary import REDACTED_TOKEN
from tests.conftest import MakeTables

PLANT = "@@URL@@"  # where a structure carries the callback's URL
TABLES: list[str] = []

app = App()


def plant(shape: Any, url: str) -> Any:
    """``shape`` with every planted marker replaced by ``url`` (or a text around it)."""
    if isinstance(shape, str):
        return shape.replace(PLANT, url)
    if isinstance(shape, dict):
        return {k: plant(v, url) for k, v in shape.items()}
    if isinstance(shape, list):
        return [plant(v, url) for v in shape]
    return shape


@app.workflow(name="notify")
def notify(ctx: Context, message: dict[str, Any]) -> dict[str, Any]:
    return message  # echoed: the parent's record of it holds it too


@app.workflow(name="leaky")
def leaky(ctx: Context, shape: dict[str, Any]) -> None:
    cb = ctx.create_callback("approval", timeout=timedelta(days=1))
    carried = plant(shape, cb.url)
    ctx.step(lambda: carried, name="returns-it")
    ctx.run_child("notify", {"carried": carried})
    # and one whose input is over 512 bytes: kept in an item of its own (INPUT#...)
    ctx.run_child("notify", {"carried": carried, "pad": "x" * 600})

    def raises() -> None:
        raise RuntimeError(f"could not reach {cb.url}")

    with contextlib.suppress(StepFailed):
        ctx.step(raises, name="raises-it", retry=RetryPolicy(max_attempts=1))

    def checkpoints() -> None:
        current_step().checkpoint({"carried": carried})

    ctx.step(checkpoints, name="checkpoints-it")
    ctx.wait_for_signal("echo")
    cb.result()
    raise RuntimeError(f"failed on purpose, its callback was {cb.url}")


# Random JSON structures with the URL planted at their leaves.
leaves = st.one_of(
    st.just(PLANT),
    st.just(f"see {PLANT} to approve"),
    st.text(max_size=8),
    st.integers(),
    st.booleans(),
)
shapes = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=6,
    ),
    min_size=1,
    max_size=3,
).map(lambda d: {**d, "url": PLANT})


def scan(client: Any, table: str) -> list[str]:
    items: list[str] = []
    start: dict[str, Any] | None = None
    while True:
        page = client.scan(TableName=table, **({"ExclusiveStartKey": start} if start else {}))
        items += [json.dumps(item) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def drain(engine: Engine, invoker: MemoryInvoker) -> None:
    while (item := invoker.pop()) is not None:
        engine.resume(item.run_id, reason=item.reason)


@pytest.mark.integration
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(shape=shapes)
def test_no_live_token_is_stored_whatever_path_it_takes(
    shape: dict[str, Any], ddb_local_client: Any, make_tables: MakeTables
) -> None:
    # Tables made once for every example (a table takes seconds on DynamoDB Local); each
    # example is a run of its own in them.
    if not TABLES:
        TABLES.extend(make_tables(ddb_local_client))
    ledger_table, idem_table = TABLES
    invoker = MemoryInvoker()
    engine = Engine(
        app,
        DynamoLedger(ddb_local_client, ledger_table),
        invoker,
        DynamoEffectStore(ddb_local_client, idem_table),
        clock=FakeClock(),
        config=EngineConfig(
            callback_secret=b"no-token-at-rest-secret-0123456789",
            callback_base_url="https://api.example.com/prod",
            inprocess_wait_threshold=timedelta(0),
        ),
    )
    run = engine.start("leaky", shape)
    drain(engine, invoker)
    # The outside world sends the URL back: in a signal, the answer, a cancel's reason.
    url = _minted_url(engine, run.run_id)
    engine.signal(run.run_id, "echo", plant(shape, url))
    drain(engine, invoker)
    engine.complete_callback(url.rsplit("/", 1)[1], result=plant(shape, url))
    drain(engine, invoker)
    mac = url.rsplit(".", 1)[1]
    assert engine.get_run(run.run_id).status.value == "FAILED"
    stored = scan(ddb_local_client, ledger_table) + scan(ddb_local_client, idem_table)
    assert stored and not [item for item in stored if mac in item]
    assert any(REDACTED_TOKEN in item for item in stored)  # it was there to redact
    # the large child input took the input item's path, and was redacted there too
    assert any('"INPUT#' in item and REDACTED_TOKEN in item for item in stored)
    failed = engine.get_run(run.run_id)
    assert failed.error is not None and REDACTED_TOKEN in failed.error.message


def _minted_url(engine: Engine, run_id: str) -> str:
    """The callback URL, as the engine mints it for the run (what ``cb.url`` held)."""
    from durable.core.tokens import make_token

    step = next(s for s in engine.history(run_id) if s.name == "approval")
    secret = engine.config.callback_secret
    assert secret is not None and step.token_nonce is not None
    token = make_token(secret, run_id, step.position, step.token_nonce)
    return f"{engine.config.callback_base_url}/callbacks/{token}"
