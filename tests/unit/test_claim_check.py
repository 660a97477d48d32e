"""Large values: kept in the payload store and referenced from the ledger (the claim check).

Every test here would fail without ``durable.core.claim_check``: the values are over
DynamoDB's item limit (PayloadTooLarge before), or the point is what the stored item
holds (a reference), what the store holds (sealed, redacted), or what a forged
reference cannot reach.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from durable import App, Context, PayloadTooLarge, current_step
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.adapters.payload_stores import FolderPayloads, MemoryPayloads
from durable.core.claim_check import MARK, ClaimCheck, _Cache, is_reference
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.model import RunStatus, StepStatus
from durable.core.ports import Invocation
from durable.core.write_boundary import TOKEN_TEXT
from durable.engine.engine import Engine
from durable.engine.events import send_signal
from durable.errors import PayloadMissing, StorageError
from durable.testing import LocalRunner

BIG = 450 * 1024  # over DynamoDB's 400 KB item limit on its own

app = App()


@app.step()
def big_text(n: int) -> str:
    return "x" * n


@app.step()
def length(text: str) -> int:
    return len(text)


@app.workflow(name="big-result", version=1)
def big_result(ctx: Context, n: int) -> int:
    text = ctx.step(big_text, n)
    ctx.sleep(timedelta(minutes=1))  # a replay reads the result back from the ledger
    return ctx.step(length, text)


@app.workflow(name="echo", version=1)
def echo(ctx: Context, payload: Any) -> Any:
    ctx.sleep(timedelta(minutes=1))
    return payload


@app.step()
def chunk(i: int) -> str:
    return str(i) * (120 * 1024)


def chunk_branch(ctx: Context, i: int) -> str:
    return ctx.step(chunk, i)


@app.workflow(name="map-of-large", version=1)
def map_of_large(ctx: Context, n: int) -> list[str]:
    return ctx.map(chunk_branch, list(range(n))).values()


SENT: list[Any] = []


@app.workflow(name="answer", version=1)
def answer(ctx: Context) -> int:
    text = ctx.wait_for_callback("big", timedelta(hours=1), submit=SENT.append)
    return len(str(text))


@app.workflow(name="hold", version=1)
def hold(ctx: Context, payload: Any) -> Any:
    ctx.wait_for_signal("go", timeout=timedelta(days=7))
    return payload


@app.workflow(name="listen", version=1)
def listen(ctx: Context) -> int:
    payload = ctx.wait_for_signal("data", timeout=timedelta(hours=1))
    return len(str(payload))


class Card(BaseModel):
    number: SecretStr
    notes: str


@app.step()
def card(n: int) -> Card:
    return Card(number=SecretStr("4111111111111111"), notes="n" * n)


@app.workflow(name="secret-card", version=1)
def secret_card(ctx: Context, n: int) -> int:
    made = ctx.step(card, n)
    ctx.sleep(timedelta(minutes=1))
    return len(made.notes) + len(made.number.get_secret_value())


@app.workflow(name="token-holder", version=1)
def token_holder(ctx: Context) -> str:
    cb = ctx.create_callback("approval", timeout=timedelta(hours=1))
    ctx.step(big_text_with, cb.url)
    return str(cb.result())


@app.step()
def big_text_with(url: str) -> str:
    return (url + " ") * 3000  # a live callback URL, over the offload size


def stored_step(runner: LocalRunner, run_id: str, name: str) -> Any:
    loaded = runner.memory_ledger.load(run_id)
    assert loaded is not None
    [step] = [s for s in loaded.steps.values() if s.name == name]
    return step


def test_a_step_result_over_the_item_limit_succeeds_and_replays_equal() -> None:
    """GIVEN a step returning 450 KB WHEN the run goes on after a sleep (a replay) THEN it
    succeeds, the step item holds a reference of about a hundred bytes, and the store
    one object under the run's id holding the value."""
    runner = LocalRunner(app)
    run = runner.start("big-result", BIG)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert runner.result(run.run_id) == BIG
    raw = stored_step(runner, run.run_id, "big_text")
    assert is_reference(raw.output) and len(raw.output) < 200
    held = json.loads(raw.output)["$durable.payload"]
    assert held["bytes"] == BIG + 2  # the JSON quotes
    payloads = runner.payloads
    assert isinstance(payloads, MemoryPayloads)
    [key] = payloads.objects
    assert key == f"{run.run_id}/{held['object']}"
    assert json.loads(payloads.objects[key][0]) == "x" * BIG
    # What the tests and the read API see: the value itself.
    assert json.loads(runner.history(run.run_id)[0].output or "") == "x" * BIG


def test_the_issue_case_four_map_results_of_120_kb_succeed() -> None:
    """The peer's case: 4 x 120 KB map results (481 KB in the run's result)."""
    runner = LocalRunner(app)
    run = runner.start("map-of-large", 4)
    runner.run_until_idle()
    assert runner.result(run.run_id) == [str(i) * (120 * 1024) for i in range(4)]
    assert is_reference(runner.memory_ledger.get_run(run.run_id).output)  # type: ignore[union-attr]


def test_a_large_input_signal_and_callback_answer_are_kept_aside() -> None:
    runner = LocalRunner(app)
    started = runner.start("echo", {"blob": "y" * BIG})
    assert is_reference(runner.memory_ledger.get_run(started.run_id).input)  # type: ignore[union-attr]
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.result(started.run_id) == {"blob": "y" * BIG}
    assert is_reference(runner.memory_ledger.get_run(started.run_id).output)  # type: ignore[union-attr]

    SENT.clear()
    waiting = runner.start("answer")
    runner.run_until_idle()
    runner.complete_callback(SENT[-1].token, "z" * BIG)
    runner.run_until_idle()
    assert runner.result(waiting.run_id) == BIG

    listening = runner.start("listen")
    runner.run_until_idle()
    runner.signal(listening.run_id, "data", "s" * BIG)
    runner.run_until_idle()
    assert runner.result(listening.run_id) == BIG


def test_a_value_over_the_hard_limit_fails_the_step_naming_the_setting() -> None:
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), payload_max_bytes=200 * 1024)
    runner = LocalRunner(app, config=config)
    run = runner.start("big-result", BIG)
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error.type == "StepFailed"
    assert "after 1 attempt(s): PayloadTooLarge" in failed.error.message  # not retried
    assert "DURABLE_PAYLOAD_MAX_BYTES" in failed.error.message
    assert runner.payloads.objects == {}  # type: ignore[attr-defined]


def test_without_a_store_a_large_value_is_refused_with_the_fix() -> None:
    """An engine composed without a payload store keeps today's refusal, and says what
    to configure."""
    runner = LocalRunner(app)
    engine = Engine(app, runner.memory_ledger, MemoryInvoker(), MemoryEffectStore())
    with pytest.raises(PayloadTooLarge, match="DURABLE_PAYLOAD_BUCKET"):
        engine.start("echo", {"blob": "y" * BIG})


def test_a_reference_shaped_input_comes_back_as_itself_and_reads_no_other_run() -> None:
    """GIVEN run A's large value in the store WHEN an outside caller starts run B with an
    input that is a reference to A's object THEN B's input is stored by reference to a
    copy of its own text, and B sees exactly what was sent, never A's value."""
    runner = LocalRunner(app)
    first = runner.start("echo", {"blob": "secret " * 80_000})
    [key] = runner.payloads.objects  # type: ignore[attr-defined]
    object_id = key.split("/")[1]
    data = runner.payloads.objects[key][0]  # type: ignore[attr-defined]
    digest = hashlib.sha256(data).hexdigest()
    forged = json.loads(
        MARK + json.dumps({"object": object_id, "sha256": digest, "bytes": len(data)}) + "}"
    )
    second = runner.start("echo", forged)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.result(second.run_id) == forged
    assert runner.result(first.run_id) == {"blob": "secret " * 80_000}
    assert is_reference(runner.memory_ledger.get_run(second.run_id).input)  # type: ignore[union-attr]


def test_a_secret_typed_field_of_a_large_value_is_sealed_in_the_store() -> None:
    runner = LocalRunner(app)
    run = runner.start("secret-card", BIG)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.result(run.run_id) == BIG + 16
    stored = b"".join(data for data, _ in runner.payloads.objects.values())  # type: ignore[attr-defined]
    assert stored and b"4111111111111111" not in stored


def test_a_live_callback_token_in_a_large_value_is_redacted_before_it_is_stored() -> None:
    """The write boundary runs before the claim check: the store never holds a token."""
    runner = LocalRunner(app)
    run = runner.start("token-holder")
    runner.run_until_idle()
    objects = runner.payloads.objects  # type: ignore[attr-defined]
    assert objects, "the step's result went to the store"
    for data, _ in objects.values():
        assert TOKEN_TEXT.search(data.decode()) is None
        assert "<callback token redacted>" in data.decode()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING


def test_purge_deletes_a_runs_objects_with_its_leftovers() -> None:
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), retention=timedelta(hours=2))
    runner = LocalRunner(app, config=config)
    kept = runner.start("hold", {"blob": "k" * BIG})  # still waiting when the other expires
    run = runner.start("big-result", BIG)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    objects = runner.payloads.objects  # type: ignore[attr-defined]
    assert any(k.startswith(f"{run.run_id}/") for k in objects)
    runner.clock.advance(timedelta(hours=3))
    assert run.run_id in runner.expire()
    assert not any(k.startswith(f"{run.run_id}/") for k in objects)
    assert any(k.startswith(f"{kept.run_id}/") for k in objects)  # another run's stay


def test_a_tampered_object_is_refused_not_decoded() -> None:
    runner = LocalRunner(app)
    run = runner.start("echo", {"blob": "t" * BIG})
    objects = runner.payloads.objects  # type: ignore[attr-defined]
    [key] = objects
    objects[key] = (b'{"blob":"evil"}', objects[key][1])
    fresh = ClaimCheck(runner.memory_ledger, runner.payloads)
    with pytest.raises(StorageError, match="does not match its hash"):
        fresh.get_run(run.run_id)


def test_small_values_stay_in_the_item_and_the_store_is_never_called() -> None:
    runner = LocalRunner(app)
    run = runner.start("big-result", 10)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.result(run.run_id) == 10
    assert runner.payloads.objects == {}  # type: ignore[attr-defined]
    assert runner.call_count("payloads.put") == runner.call_count("payloads.get") == 0


def test_a_crash_after_the_put_loses_nothing() -> None:
    """The object is written before the ledger write that references it: a worker that
    dies between the two leaves an object nothing names (the purge removes it with the
    run's), and the retry writes the value again, under a key of its own."""
    runner = LocalRunner(app)
    runner.crash_at("payloads.put", call=1, when="after")
    run = runner.start("big-result", BIG)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=10))
    assert runner.crashes and runner.result(run.run_id) == BIG
    assert len(runner.payloads.objects) == 2  # type: ignore[attr-defined]
    assert stored_step(runner, run.run_id, "big_text").status == StepStatus.DONE


def test_the_engine_on_every_ledger_keeps_large_values_aside(ledger: Any) -> None:
    """The claim check wraps whatever ledger the engine is given: memory, moto's
    DynamoDB, DynamoDB Local and LocalStack (by tier)."""
    clock = FakeClock()
    store = MemoryPayloads(clock)
    invoker = MemoryInvoker()
    engine = Engine(
        app,
        ledger,
        invoker,
        MemoryEffectStore(),
        clock=clock,
        config=EngineConfig(inprocess_wait_threshold=timedelta(0)),
        payloads=store,
    )
    run = engine.start("echo", {"blob": "e" * BIG})
    engine.resume(run.run_id, Invocation())
    clock.advance(timedelta(minutes=2))
    engine.resume(run.run_id, Invocation())
    done = engine.ledger.get_run(run.run_id)
    assert done is not None and done.status == RunStatus.SUCCEEDED
    assert json.loads(done.output or "") == {"blob": "e" * BIG}
    assert is_reference(ledger.get_run(run.run_id).output)
    assert len(store.objects) == 2  # the input and the output, an object each


# --- the stores -----------------------------------------------------------------------


def test_the_folder_store_round_trips_deletes_by_age_and_refuses_a_path(tmp_path: Path) -> None:
    clock = FakeClock()
    store = FolderPayloads(tmp_path, clock)
    store.put("01RUN/abc", b"one")
    clock.advance(timedelta(hours=2))
    store.put("01RUN/def", b"two")
    assert store.get("01RUN/abc") == b"one"
    assert store.delete_older("01RUN/", clock.now() - timedelta(hours=1)) == 1
    with pytest.raises(StorageError, match="missing"):
        store.get("01RUN/abc")
    assert store.get("01RUN/def") == b"two"
    for bad in ("../etc/passwd", "01RUN/../../x", "a/b/c"):
        with pytest.raises(StorageError, match="not <run id>/<sha256>"):
            store.put(bad, b"x")
    assert store.delete_older("../", clock.now()) == 0


def test_a_fork_copies_large_values_under_its_own_run() -> None:
    """A fork's copied records are written through the claim check again: their objects
    live under the fork's id, so the original's purge cannot take them away."""
    runner = LocalRunner(app)
    run = runner.start("big-result", BIG)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    forked = runner.fork(run.run_id, 2)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.result(forked.run_id) == BIG
    owners = {key.split("/")[0] for key in runner.payloads.objects}  # type: ignore[attr-defined]
    assert owners == {run.run_id, forked.run_id}


@app.step()
def slow_export(n: int) -> int:
    """Checkpoints a large state, then fails once: its retry's record carries the state."""
    step = current_step()
    if step.checkpoint_state is None:
        step.checkpoint({"rows": "r" * n})
        raise ConnectionError("the export service dropped the connection")
    return len(step.checkpoint_state["rows"])


@app.workflow(name="export", version=1)
def export(ctx: Context, n: int) -> int:
    return ctx.step(slow_export, n)


@app.workflow(name="grow", version=1)
def grow(ctx: Context, n: int) -> int:
    state = ctx.wait_for_condition(
        lambda s: s + "g" * n,
        timedelta(minutes=1),
        initial_state="",
        until=lambda s: len(s) >= 3 * n,
        name="grow",
    )
    return len(state)


def test_a_pending_record_with_a_large_state_stays_the_engines_own() -> None:
    """Found in review: a write whose record was offloaded came back as a resolved copy,
    so the engine took its own pending record for another worker's and raised LeaseLost
    (three takeovers, then the run FAILED). A large checkpoint state and a growing
    condition state park and resume with no takeover."""
    runner = LocalRunner(app)
    run = runner.start("export", BIG)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=10))
    assert runner.result(run.run_id) == BIG
    assert runner.get_run(run.run_id).takeovers == 0
    grown = runner.start("grow", 30_000)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=30))
    assert runner.result(grown.run_id) == 90_000
    assert runner.get_run(grown.run_id).takeovers == 0


def test_a_keyed_restart_keeps_its_values_when_the_old_run_is_purged() -> None:
    """Found in review: with keys derived from the value's hash, a keyed restart with the
    same input wrote the same key that the expired run's purge was about to delete. Each
    put is an object of its own now: the purge deletes the old run's, never the new's."""
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), retention=timedelta(hours=2))
    runner = LocalRunner(app, config=config)
    payload = {"blob": "k" * BIG}
    first = runner.start("echo", payload, idempotency_key="nightly")
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(first.run_id).status == RunStatus.SUCCEEDED
    runner.clock.advance(timedelta(hours=3))
    runner.memory_ledger.expire(runner.clock.now())  # TTL; the stream's purge comes later
    again = runner.start("echo", payload, idempotency_key="nightly")
    assert again.run_id == first.run_id
    runner.engine.purge_expired(first.run_id)  # the old run's purge, late
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.result(again.run_id) == payload


def test_an_engine_without_a_store_refuses_to_read_a_reference_as_a_value() -> None:
    """Found in review: check-deploy without --payload-bucket decoded the reference itself
    (a false failure, or a silent wrong pass with Any). A read that meets one now fails
    saying what to configure."""
    runner = LocalRunner(app)
    run = runner.start("echo", {"blob": "n" * BIG})
    bare = Engine(app, runner.memory_ledger, MemoryInvoker(), MemoryEffectStore())
    with pytest.raises(StorageError, match="DURABLE_PAYLOAD_BUCKET"):
        bare.ledger.get_run(run.run_id)
    assert bare.peek_run(run.run_id) is not None  # the state, without the value


def test_reading_a_run_for_its_state_fetches_no_value() -> None:
    """The listing's waiting reason and a scoped route's workflow check read the run item
    for its state: no object is fetched for them."""
    from durable.adapters.nonces import MemoryNonceStore
    from durable.api.service import ApiService

    runner = LocalRunner(app)
    run = runner.start("hold", {"blob": "w" * BIG})
    runner.run_until_idle()
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    before = runner.call_count("payloads.get")
    assert api.of_workflow("hold", run.run_id) == run.run_id
    listed = api.list_runs(
        workflow="hold", status=None, needs_attention=None, version=None, limit=10, cursor=None
    )
    assert [r.run_id for r in listed.runs] == [run.run_id]
    assert runner.call_count("payloads.get") == before


@app.workflow(name="measure", version=1)
def measure(ctx: Context, text: str) -> int:
    return ctx.step(length, text)


@app.workflow(name="measure-all", version=1)
def measure_all(ctx: Context, n: int) -> list[int]:
    texts = [str(i) * (100 * 1024) for i in range(n)]
    return ctx.map("measure", texts, distributed=True).values()


def test_children_with_large_inputs_start_together_with_their_inputs_aside() -> None:
    """A distributed map's children start in one atomic write (``start_children``) with
    their large inputs in the store; none is started one by one."""
    runner = LocalRunner(app)
    run = runner.start("measure-all", 3)
    runner.run_until_idle()
    assert runner.result(run.run_id) == [100 * 1024] * 3
    assert runner.call_count("ledger.start_children") >= 1
    assert runner.call_count("ledger.start_child") == 0
    owners = {key.split("/")[0] for key in runner.payloads.objects}  # type: ignore[attr-defined]
    assert len(owners - {run.run_id}) == 3  # each child's input under its own id


def test_a_broken_reference_is_an_error_that_is_not_retried() -> None:
    """A reference the store cannot honour (malformed, or an object whose bytes do not
    match its hash) is corruption, not a passing fault: retrying cannot help."""
    runner = LocalRunner(app)
    run = runner.start("echo", {"blob": "m" * BIG})
    stored = runner.memory_ledger.get_run(run.run_id)
    assert stored is not None
    reader = ClaimCheck(runner.memory_ledger, runner.payloads)
    for broken in (MARK + '{"object":"../x","sha256":"00"}}', MARK + "not json"):
        stored.input = broken
        with pytest.raises(StorageError) as refused:
            reader.resolve(stored)
        assert refused.value.retryable is False and "malformed" in str(refused.value)


def test_the_cache_drops_the_least_recently_used_text_first() -> None:
    cache = _Cache(limit=10)
    cache.add("a", "aaaa", 4)
    cache.add("b", "bbbb", 4)
    assert cache.get("a") == "aaaa"  # a is now the most recent
    cache.add("c", "cccc", 4)  # over the limit: b goes, not a
    assert cache.get("b") is None
    assert cache.get("a") == "aaaa" and cache.get("c") == "cccc"
    cache.add("huge", "x" * 11, 11)  # larger than the whole cache: never kept
    assert cache.get("huge") is None and cache.get("c") == "cccc"


def _stack() -> tuple[FakeClock, MemoryPayloads, MemoryLedger, Callable[[], Engine]]:
    """One ledger and payload store, and engines over them, each with a cache of its own."""
    clock, store, ledger = FakeClock(), MemoryPayloads(FakeClock()), MemoryLedger()

    def engine() -> Engine:
        return Engine(
            app, ledger, MemoryInvoker(), MemoryEffectStore(), clock=clock, payloads=store
        )

    return clock, store, ledger, engine


def _erase_at_next_read(
    store: MemoryPayloads, ledger: MemoryLedger, run_id: str, *, take_over: bool = True
) -> None:
    """The store's next read hangs past the reader's lease: meanwhile another worker takes
    the run over (unless not ``take_over``) and the run is ended and erased, its objects
    with it; then the read comes back."""
    read = store.get

    def stalled(key: str) -> bytes:
        if take_over:
            later = "2100-01-01T00:00:00.000Z"
            assert ledger.claim(run_id, "other", now=later, lease_until=later, stale_before=later)
        store.objects.clear()
        return read(key)

    store.get = stalled  # type: ignore[method-assign]


def _taken_while_reading(erase_only: bool = False, at: str = "claim") -> tuple[Engine, str]:
    """A worker whose first read of one of a run's objects is ``_erase_at_next_read``'s
    (explorer seed 657). ``at``: the object is the run's input, read by the claim, or a
    step's result, read by the load of a later invocation."""
    clock, store, ledger, engine = _stack()
    if at == "claim":
        run = engine().start("echo", {"blob": "s" * BIG})  # the API's engine
    else:
        run = engine().start("big-result", BIG)  # a small input, a large step result
        assert engine().resume(run.run_id, Invocation()).result == "suspended"
        clock.advance(timedelta(minutes=2))
    _erase_at_next_read(store, ledger, run.run_id, take_over=not erase_only)
    return engine(), run.run_id  # a worker of its own: nothing cached


@pytest.mark.parametrize("at", ["claim", "load"])
def test_a_worker_whose_run_was_taken_and_erased_while_it_read_leaves_quietly(at: str) -> None:
    """A zombie's read of an object the erasure deleted is not an error of the run: the
    invocation ends as a lost lease, raising nothing for Lambda to retry or alarm on."""
    engine, run_id = _taken_while_reading(at=at)
    assert engine.resume(run_id, Invocation()).result == "lease_lost"


@pytest.mark.parametrize("at", ["claim", "load"])
def test_a_missing_object_of_a_run_still_held_is_raised(at: str) -> None:
    """The same read with the run still this worker's is a lost object, and says so."""
    engine, run_id = _taken_while_reading(erase_only=True, at=at)
    with pytest.raises(PayloadMissing, match="missing from the payload store"):
        engine.resume(run_id, Invocation())


def test_a_zombie_reloading_after_a_refused_suspension_leaves_quietly() -> None:
    """The reload after a refused suspension is a read of the same kind: a large signal
    lands while the worker suspends (its suspension is refused for the inbox it moved);
    while the reload fetches the signal's value, the run is taken over, ended and erased.
    The invocation ends as a lost lease."""
    _, store, ledger, engine = _stack()
    outside, worker = engine(), engine()
    run = outside.start("listen")
    suspend = ledger.update_run

    def racing(run_id: str, guard: Any, changes: Any) -> Any:
        if changes.get("status") == "WAITING" and not store.objects:
            send_signal(outside, run.run_id, "data", "d" * BIG)  # moves the inbox
            _erase_at_next_read(store, ledger, run.run_id)
        return suspend(run_id, guard, changes)

    ledger.update_run = racing  # type: ignore[method-assign]
    assert worker.resume(run.run_id, Invocation()).result == "lease_lost"


def test_a_claim_that_fails_for_another_reason_is_raised_whoever_holds_the_run() -> None:
    """Only a missing object is taken for a zombie's: a claim refused by the store (its
    own write, not a value's read) says nothing of who holds the run, and is raised
    even though the run is not this worker's lease."""
    _, _, ledger, engine = _stack()
    worker = engine()
    run = worker.start("echo", {"blob": "small"})

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("claiming the run failed: ValidationException", retryable=False)

    ledger.claim = refused  # type: ignore[method-assign]
    with pytest.raises(StorageError, match="ValidationException"):
        worker.resume(run.run_id, Invocation())
