"""A declared lifetime (``@app.workflow(max_lifetime=...)``): every item of its runs is
written with its TTL, and no item of a live run may expire (``durable.core.lifetime``).

Each test drives the memory ledger, whose ``expire`` deletes every item whose TTL is due,
as DynamoDB's TTL does; the explorer does the same at every simulated moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.core.lifetime import ended_purge_at, items_purge_at, lifetime_end
from durable.core.model import RunRecord, parse_time
from durable.errors import InvalidState, RegistrationError
from durable.testing import LocalRunner

LIFETIME = timedelta(days=7)
RETENTION = timedelta(days=30)  # EngineConfig's default


def epoch(text: str, *more: timedelta) -> int:
    when = parse_time(text) + sum(more, timedelta(0))
    return int(when.timestamp())


def build(lifetime: timedelta | None = LIFETIME) -> App:
    app = App()

    @app.step
    def add(n: int) -> int:
        return n + 1

    @app.workflow(name="waits", max_lifetime=lifetime)
    def waits(ctx: Context, n: int) -> int:
        first = add(n)
        got = ctx.wait_for_signal("go")  # no timeout: only the lifetime bounds it
        return first + int(got or 0)

    @app.workflow(name="chain", max_lifetime=lifetime)
    def chain(ctx: Context, n: int) -> int:
        done = add(n)
        if done < 3:
            ctx.continue_as_new(done)
        return done

    @app.workflow(name="flaky", max_lifetime=lifetime)
    def flaky(ctx: Context, n: int) -> int:
        add(n)
        ctx.sleep(timedelta(hours=1))
        if n < 0:
            raise ValueError("no")
        return n

    return app


def items(runner: LocalRunner, run_id: str) -> list[Any]:
    ledger = runner.memory_ledger
    return [*ledger._steps.get(run_id, {}).values(), *ledger._signals.get(run_id, [])]


def test_every_item_of_a_declared_run_carries_the_runs_ttl() -> None:
    # GIVEN a workflow declaring a 7-day lifetime, with a step, a signal and a wait
    runner = LocalRunner(build())
    run = runner.start("waits", 1)
    runner.run_until_idle()
    runner.signal(run.run_id, "go", 2)
    runner.run_until_idle()
    # THEN the run, every step and every signal carry one TTL: start + lifetime + retention
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.SUCCEEDED
    due = epoch(run.created_at, LIFETIME, RETENTION)
    assert stored.items_purge_at == due
    kept = items(runner, run.run_id)
    assert len(kept) >= 3 and {item.purge_at for item in kept} == {due}
    # AND the ended run item expires with its retention, never after its items
    assert stored.purge_at is not None and stored.purge_at <= due


def test_a_workflow_without_a_lifetime_keeps_the_purge() -> None:
    runner = LocalRunner(build(None))
    run = runner.start("waits", 1)
    runner.run_until_idle()
    runner.signal(run.run_id, "go", 2)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).items_purge_at is None
    assert all(item.purge_at is None for item in items(runner, run.run_id))
    runner.advance(days=31)
    assert runner.expire() == [run.run_id]
    assert items(runner, run.run_id) == []  # the purge deleted them


def test_the_stream_purge_deletes_nothing_of_a_declared_run() -> None:
    # GIVEN a declared run that ended, and whose run item TTL deleted
    runner = LocalRunner(build())
    run = runner.start("waits", 1)
    runner.run_until_idle()
    runner.signal(run.run_id, "go", 2)
    runner.run_until_idle()
    runner.advance(days=31)
    assert runner.memory_ledger.expire(runner.clock.now()) == [run.run_id]
    # WHEN the purge the stream starts runs
    # THEN it deletes nothing (no write unit): the items go by their own TTL
    assert runner.engine.purge_expired(run.run_id) == 0
    left = items(runner, run.run_id)
    assert left
    runner.advance(LIFETIME)
    runner.memory_ledger.expire(runner.clock.now())
    assert items(runner, run.run_id) == []


def test_a_wait_without_timeout_ends_at_the_lifetime_before_any_item_expires() -> None:
    # GIVEN a declared run waiting for a signal that never comes
    runner = LocalRunner(build())
    run = runner.start("waits", 1)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.WAITING
    end = lifetime_end(stored, timedelta(days=365), RETENTION)
    assert stored.due_at is not None and parse_time(stored.due_at) > end
    written = len(items(runner, run.run_id))  # its step and its wait
    # WHEN time passes, TTL running at every step of the way, past the items' TTL
    # (37 days) had the run lived on
    ended = None
    for day in range(5, 45, 5):
        runner.advance(days=5)
        runner.memory_ledger.expire(runner.clock.now())
        current = runner.memory_ledger.get_run(run.run_id)
        assert current is not None, f"the run item vanished on day {day}"
        if not current.terminal:  # THEN no item of the live run expired
            assert len(items(runner, run.run_id)) == written
            continue
        ended = current
        break
    # THEN the run failed at its lifetime's end, with its items still there
    assert ended is not None and ended.status == RunStatus.FAILED
    assert ended.error is not None and ended.error.type == "LifetimeExceeded"
    assert len(items(runner, run.run_id)) >= written
    assert ended.purge_at == stored.items_purge_at  # capped by its items' TTL


def test_a_successor_has_its_own_lifetime_and_ttl() -> None:
    runner = LocalRunner(build())
    first = runner.start("chain", 0)
    runner.advance(hours=1)
    runs = [runner.memory_ledger.get_run(r) for r in runner.memory_ledger.all_run_ids()]
    chain = sorted((r for r in runs if r is not None), key=lambda r: r.created_at)
    assert len(chain) == 3 and chain[0].run_id == first.run_id
    for run in chain:
        due = epoch(run.created_at, LIFETIME, RETENTION)
        assert run.items_purge_at == due
        assert {item.purge_at for item in items(runner, run.run_id)} == {due}


def test_a_fork_writes_its_copied_steps_with_its_own_ttl() -> None:
    runner = LocalRunner(build())
    source = runner.start("flaky", -1)
    runner.advance(hours=2)
    assert runner.get_run(source.run_id).status == RunStatus.FAILED
    runner.advance(days=3)
    fork = runner.fork(source.run_id, 2)
    due = epoch(fork.created_at, LIFETIME, RETENTION)
    assert fork.items_purge_at == due > epoch(source.created_at, LIFETIME, RETENTION)
    copied = items(runner, fork.run_id)
    assert copied and {item.purge_at for item in copied} == {due}


def test_a_retry_keeps_the_runs_ttl_and_is_refused_past_its_lifetime() -> None:
    runner = LocalRunner(build())
    run = runner.start("flaky", -1)
    runner.advance(hours=2)
    assert runner.get_run(run.run_id).status == RunStatus.FAILED
    reopened = runner.retry(run.run_id)
    assert reopened.items_purge_at == epoch(run.created_at, LIFETIME, RETENTION)
    assert reopened.purge_at is None
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.FAILED
    # Past the lifetime, a retry would outlive the items' TTL: refused
    runner.advance(LIFETIME)
    with pytest.raises(InvalidState, match="max_run_lifetime"):
        runner.retry(run.run_id)


def test_a_keyed_restart_is_a_new_run_with_a_new_ttl() -> None:
    runner = LocalRunner(build())
    first = runner.start("flaky", 1, idempotency_key="k")
    runner.advance(hours=2)
    assert runner.get_run(first.run_id).status == RunStatus.SUCCEEDED
    runner.advance(days=31)
    assert runner.memory_ledger.expire(runner.clock.now()) == [first.run_id]
    # the first run's steps are still there (their TTL is later): leftovers
    assert items(runner, first.run_id)
    second = runner.start("flaky", 1, idempotency_key="k")
    assert second.run_id == first.run_id
    runner.advance(hours=2)
    assert runner.get_run(second.run_id).status == RunStatus.SUCCEEDED
    due = epoch(second.created_at, LIFETIME, RETENTION)
    assert {item.purge_at for item in items(runner, second.run_id)} == {due}


def test_the_rules() -> None:
    created = "2026-01-01T00:00:00.000Z"
    assert items_purge_at(created, None, RETENTION) is None
    assert items_purge_at(created, LIFETIME, RETENTION) == int(
        datetime(2026, 2, 7, tzinfo=UTC).timestamp()
    )
    run = RunRecord("r", "w", 1, RunStatus.RUNNING, "", "", created, created)
    run.items_purge_at = items_purge_at(created, LIFETIME, RETENTION)
    # a retention raised since the run began shortens the run, never its items' life
    assert lifetime_end(run, timedelta(days=365), RETENTION * 2) < parse_time(created) + LIFETIME
    assert lifetime_end(run, timedelta(days=1), RETENTION) == parse_time(created) + timedelta(1)
    late = parse_time(created) + LIFETIME + timedelta(hours=1)
    assert ended_purge_at(run, late, RETENTION) == run.items_purge_at


@pytest.mark.parametrize("bad", [timedelta(minutes=5), timedelta(days=4000), 7])
def test_max_lifetime_is_checked_at_registration(bad: Any) -> None:
    app = App()
    with pytest.raises(RegistrationError, match="max_lifetime"):

        @app.workflow(max_lifetime=bad)
        def w(ctx: Context) -> None:
            return None


def test_large_values_of_a_declared_run_expire_with_its_items() -> None:
    # GIVEN a declared run whose values all go to the payload store
    from durable.adapters.payload_stores import MemoryPayloads
    from durable.core.clock import FakeClock
    from durable.core.config import EngineConfig
    from durable.core.lifetime import lifecycle_days

    clock = FakeClock()
    store = MemoryPayloads(clock)
    runner = LocalRunner(
        build(), config=EngineConfig(payload_offload_bytes=1), clock=clock, payloads=store
    )
    run = runner.start("flaky", 12345)  # values of 5 bytes and more: all offloaded
    runner.advance(hours=2)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert store.objects and set(store.expire_days) == set(store.objects)
    # THEN each is tagged with the class that outlives the run's TTL, and the store's
    # lifecycle deletes it only once that TTL passed
    ttl = epoch(run.created_at, LIFETIME, RETENTION)
    for key, days in store.expire_days.items():
        written = store.objects[key][1]
        assert written.timestamp() + days * 86400 >= ttl
        assert days == lifecycle_days(ttl, written)
    runner.clock.set(datetime.fromtimestamp(ttl, UTC))
    runner.memory_ledger.expire(runner.clock.now())
    assert store.expire(runner.clock.now()) == 0  # the items went first
    last = max(store.objects[k][1] + timedelta(days=d) for k, d in store.expire_days.items())
    runner.clock.set(last)
    assert store.expire(runner.clock.now()) > 0 and not store.objects
