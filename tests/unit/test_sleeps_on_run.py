"""A sleep that suspends the run is recorded on the run item, in the suspension's own
write (``durable.core.sleeps``, issue 35): no step item, no transaction for its start;
its end is one plain conditional put. These pin the layout and its promises on the memory
ledger (the engine's path) and on DynamoDB (moto in-process: the items as stored)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus, StepStatus
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_items import run_pk, run_to_item
from durable.adapters.dynamodb_units import item_size
from durable.core.history_cache import CachingLedger
from durable.core.model import StepKind, StepRecord, format_time, parse_time
from durable.core.ports import ConditionFailed, RunGuard
from durable.core.sleeps import (
    MAX_ENTRIES,
    MAX_NAME,
    kept_sleeps,
    overflow,
    sleep_entry,
    with_sleeps,
)
from durable.testing import LocalRunner
from tests.support.records import make_run, make_step, t


def _napping_app() -> App:
    app = App()

    @app.workflow(name="flow")
    def flow(ctx: Context) -> str:
        ctx.step(lambda: 1, name="before")
        ctx.sleep(timedelta(hours=1), name="nap")
        ctx.step(lambda: 2, name="after")
        return "rested"

    return app


def _runner(app: App, *, sleeps_on_run: bool = True) -> LocalRunner:
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), sleeps_on_run=sleeps_on_run)
    return LocalRunner(app, config=config)


# --- the pure rule ------------------------------------------------------------------------


def test_a_loaded_history_presents_each_kept_sleep_as_its_record() -> None:
    """GIVEN a run item keeping three sleeps (woken up to t100 by its latest claim), one
    of which also has a step item, and a leftover item of an earlier run at another
    WHEN ``with_sleeps`` presents them THEN the one woken is DONE (ended at its wake
    time), the one still due WAITING as the engine wrote it, the step item stands, the
    leftover is replaced; applying it twice changes nothing."""

    def waiting(position: str, wake: int) -> StepRecord:
        return StepRecord(
            run_id="RUN1",
            position=position,
            name="nap",
            kind=StepKind.SLEEP,
            status=StepStatus.WAITING,
            updated_at=t(5),
            wake_at=t(wake),
            fence=3,
        )

    entries = {p: sleep_entry(waiting(p, w)) for p, w in (("0002", 100), ("0004", 101))}
    entries["0006"] = sleep_entry(waiting("0006", 50))
    entries["0008"] = sleep_entry(waiting("0008", 50))
    run = make_run(created_at=t(0), sleeps=entries, woke_at=t(100))
    done = make_step(position="0006", kind=StepKind.SLEEP, updated_at=t(60), output=None)
    leftover = make_step(position="0008", updated_at="2025-01-01T00:00:00.000Z")
    steps = with_sleeps(run, {"0006": done, "0008": leftover})
    assert steps["0006"] is done
    assert steps["0004"] == waiting("0004", 101)
    over = steps["0002"]
    assert (over.status, over.updated_at, over.wake_at) == (StepStatus.DONE, t(100), t(100))
    assert steps["0008"].status == StepStatus.DONE and steps["0008"].kind == StepKind.SLEEP
    assert with_sleeps(run, dict(steps)) == steps
    # no stamp yet: nothing is over
    fresh = with_sleeps(make_run(sleeps=entries), {})
    assert {r.status for r in fresh.values()} == {StepStatus.WAITING}
    # a suspension writes back every kept sleep, over or waiting, as the run item held
    # it, and a sleep this invocation recorded from its record
    steps["0010"] = waiting("0010", 200)
    assert kept_sleeps(run, steps, ["0002", "0004", "0009", "0010"]) == {
        "0002": sleep_entry(waiting("0002", 100)),
        "0004": sleep_entry(waiting("0004", 101)),
        "0010": sleep_entry(waiting("0010", 200)),
    }


def test_an_item_is_a_leftover_only_when_written_before_the_run_and_never_in_a_fork() -> None:
    """GIVEN a kept sleep and a final step item at its position written before the run
    was created (an earlier run's, under a reused id), or exactly when it was
    WHEN presented THEN the earlier one is replaced by the sleep, the other stands; in a
    fork (its copied records are older by design) an older item stands too."""
    entry = {"name": "nap", "wake_at": t(100), "at": t(5), "fence": 1}
    older = make_step(position="0002", updated_at=t(0))
    same = make_step(position="0002", updated_at=t(1))
    run = make_run(created_at=t(1), sleeps={"0002": entry})
    assert with_sleeps(run, {"0002": older})["0002"].kind == StepKind.SLEEP
    assert with_sleeps(run, {"0002": same})["0002"] is same
    fork = make_run(created_at=t(1), sleeps={"0002": entry}, forked_from="R0@0003")
    assert with_sleeps(fork, {"0002": older})["0002"] is older
    # the record it stands for carries the entry's fence, 0 when it has none
    bare = make_run(sleeps={"0004": {"name": "n", "wake_at": t(100), "at": t(5)}})
    assert with_sleeps(bare, {})["0004"].fence == 0
    assert with_sleeps(run, {})["0002"].fence == 1


def test_beyond_the_cap_the_oldest_ended_sleeps_leave_the_map() -> None:
    """GIVEN more kept sleeps than ``MAX_ENTRIES`` WHEN a suspension writes the map
    THEN the oldest that are over are the ones to write as step items; one still waiting
    never is."""
    steps = {
        f"{i:04d}": make_step(
            position=f"{i:04d}",
            kind=StepKind.SLEEP,
            status=StepStatus.WAITING if i == 1 else StepStatus.DONE,
            wake_at=t(i),
            output=None,
        )
        for i in range(1, MAX_ENTRIES + 4)
    }
    entries = kept_sleeps(make_run(), steps, steps)
    assert overflow(entries, steps) == ["0002", "0003", "0004"]
    assert overflow(dict(list(entries.items())[:MAX_ENTRIES]), steps) == []


# --- the engine's path (memory ledger) ----------------------------------------------------


def test_a_suspending_sleep_writes_no_step_item_and_no_fenced_transaction() -> None:
    """GIVEN a run that sleeps an hour between two steps
    WHEN it suspends THEN the sleep is on the run item (with its wake time), no step
    record was written for it and no fenced step write was sent; a load shows it WAITING
    WHEN the timer wakes it THEN the claim's stamp ends it: no write for it at all."""
    runner = _runner(_napping_app())
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.WAITING
    assert run.sleeps is not None and list(run.sleeps) == ["0002"]
    entry = run.sleeps["0002"]
    assert entry["name"] == "nap" and entry["wake_at"] == run.due_at
    assert "0002" not in runner.memory_ledger._steps[run_id]  # no step item
    fenced = runner.call_count("ledger.write_step_fenced")
    history = runner.engine.load(run_id)
    assert history.steps["0002"].status == StepStatus.WAITING
    assert history.steps["0002"].wake_at == entry["wake_at"]
    writes = runner.call_count("ledger.write_step")
    runner.advance(hours=1)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.woke_at is not None and run.woke_at >= entry["wake_at"]
    assert runner.call_count("ledger.write_step_fenced") == fenced
    assert runner.call_count("ledger.write_step") == writes + 1  # "after" only
    assert "0002" not in runner.memory_ledger._steps[run_id]  # its end: the claim's stamp
    ended = runner.engine.load(run_id).steps["0002"]
    assert (ended.kind, ended.status, ended.updated_at) == (
        StepKind.SLEEP,
        StepStatus.DONE,
        entry["wake_at"],
    )


def test_with_the_setting_off_a_sleep_is_a_step_item_as_before() -> None:
    """GIVEN ``sleeps_on_run`` off (a stack whose older workers may still run)
    WHEN a run sleeps THEN its WAITING record is a step item and the run item holds no
    sleeps: a worker of the version before reads it."""
    runner = _runner(_napping_app(), sleeps_on_run=False)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).sleeps is None
    assert runner.memory_ledger._steps[run_id]["0002"].status == StepStatus.WAITING
    runner.advance(hours=1)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED


def test_a_run_slept_by_the_old_layout_finishes_under_the_new_one() -> None:
    """GIVEN a run that suspended on a sleep written as a step item (setting off)
    WHEN a worker with the setting on wakes it THEN it finishes, the sleep not repeated."""
    app = _napping_app()
    runner = _runner(app, sleeps_on_run=False)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.engine.config = EngineConfig(
        inprocess_wait_threshold=timedelta(0),
        sleeps_on_run=True,
        callback_secret=runner.config.callback_secret,
        sweep_grace=timedelta(0),
    )
    runner.advance(hours=1)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and not run.sleeps


def _branch_app(clock_of: list[Any], *, parallel: bool) -> App:
    """A 1-hour sleep beside 3 hours of work done one 20-minute step per invocation: in a
    parallel's branch, or in an async task beside another."""
    app = App()

    def chunk() -> int:
        clock_of[0].clock.advance(timedelta(minutes=20))
        return 1

    if parallel:

        @app.workflow(name="flow")
        def flow(ctx: Context) -> list[str]:
            def nap(c: Context) -> str:
                c.sleep(timedelta(hours=1), name="nap")
                return "nap"

            def work(c: Context) -> str:
                for _ in range(9):
                    c.step(chunk, name="chunk")
                return "work"

            return list(ctx.parallel(nap, work, name="p", max_concurrency=1).values())

    else:

        @app.step(name="chunk")
        async def step() -> int:
            return chunk()

        @app.workflow(name="flow")
        async def aflow(ctx: Context) -> str:
            async def nap() -> None:
                ctx.sleep(timedelta(hours=1), name="nap")

            async def work() -> None:
                for _ in range(9):
                    await step()

            await asyncio.gather(nap(), work())
            return "ok"

    return app


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "async"])
def test_a_branch_sleep_is_recorded_at_once_and_ends_on_time_beside_a_busy_sibling(
    parallel: bool,
) -> None:
    """GIVEN a 1-hour sleep in a branch (a parallel's, an async task's) beside a sibling
    that works for 3 hours, handing off after every step
    WHEN the run is driven THEN the sleep's wake time is the one it began with (t0 + 1 h)
    and the run finishes once the work is done: a branch's sleep is a step item, written
    when reached (a review found the first version kept it in memory until the run
    suspended, so each hand-off restarted it and it never ended)."""
    holder: list[Any] = [None]
    config = EngineConfig(
        inprocess_wait_threshold=timedelta(0), sleeps_on_run=True, steps_per_invocation=1
    )
    runner = LocalRunner(_branch_app(holder, parallel=parallel), config=config)
    holder[0] = runner
    t0 = runner.clock.now()
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    (nap,) = [r for r in runner.engine.load(run_id).steps.values() if r.kind == StepKind.SLEEP]
    assert nap.wake_at == format_time(t0 + timedelta(hours=1))
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert not runner.get_run(run_id).sleeps
    assert runner.memory_ledger._steps[run_id][nap.position].status == StepStatus.DONE


def test_a_sleep_with_a_long_name_is_a_step_item() -> None:
    """GIVEN a top-level sleep named past ``MAX_NAME`` WHEN the run suspends on it THEN it
    is a step item, not an entry: the run item stays small whatever the names."""
    app = App()

    @app.workflow(name="flow")
    def flow(ctx: Context) -> str:
        ctx.sleep(timedelta(hours=1), name="n" * (MAX_NAME + 1))
        return "ok"

    runner = _runner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).sleeps is None
    assert runner.memory_ledger._steps[run_id]["0001"].status == StepStatus.WAITING


def test_a_polling_loop_keeps_its_run_item_within_one_write_unit() -> None:
    """GIVEN a loop that checks and sleeps 12 times WHEN it runs THEN the run item never
    holds more than ``MAX_ENTRIES`` sleeps nor passes 1 KB (a review measured 1,235 bytes
    with a cap of 8); the sleeps that left the map are step items; the run finishes."""
    app = App()

    @app.workflow(name="poll")
    def poll(ctx: Context) -> int:
        for _ in range(12):
            ctx.step(lambda: 1, name="check")
            ctx.sleep(timedelta(minutes=10))
        return 1

    runner = _runner(app)
    run_id = runner.start("poll").run_id
    sizes = []
    for _ in range(12):
        runner.run_until_idle()
        run = runner.memory_ledger._runs[run_id]
        sizes.append((len(run.sleeps or {}), item_size(run_to_item(run, 4))))
        runner.advance(minutes=10)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert max(n for n, _ in sizes) == MAX_ENTRIES
    assert max(size for _, size in sizes) <= 1024, sizes
    steps = runner.engine.load(run_id).steps.values()
    sleeps = [r for r in steps if r.kind == StepKind.SLEEP]
    assert len(sleeps) == 12 and all(r.status == StepStatus.DONE for r in sleeps)


def test_a_clock_far_ahead_does_not_end_later_sleeps_early() -> None:
    """GIVEN a run first claimed by a worker whose clock is an hour ahead (its stamp is
    then an hour ahead), which gives it back
    WHEN a worker with a right clock claims it, sleeps 30 minutes, and an event wakes it a
    minute later THEN the sleep still waits: a stamp further ahead than the clock-skew
    allowance is replaced by the claim's own time (``woke_stamp``), so one wrong clock does
    not end every later sleep early (a review found the first version kept the larger)."""
    app = App()

    @app.workflow(name="flow")
    def flow(ctx: Context) -> str:
        ctx.step(lambda: 1, name="before")
        ctx.sleep(timedelta(minutes=30), name="nap")
        return "done"

    runner = _runner(app)
    run_id = runner.start("flow").run_id
    runner.invoker.pop()  # the start's invocation reaches the worker whose clock is ahead
    ledger = runner.memory_ledger
    now = runner.clock.now()
    fast = now + timedelta(hours=1)
    taken = ledger.claim(
        run_id,
        "fast",
        now=format_time(fast),
        lease_until=format_time(fast + timedelta(minutes=1)),
        stale_before=format_time(fast - timedelta(seconds=5)),
    )
    assert taken is not None and taken.run.woke_at == format_time(fast)
    back = {"status": "PENDING", "lease_owner": None, "lease_until": None}
    ledger.update_run(run_id, RunGuard(taken.run.fence, "fast"), back | {"due_at": t(0)})
    runner.run_until_idle()
    assert runner.get_run(run_id).woke_at == format_time(now)
    runner.clock.advance(timedelta(minutes=1))
    runner.engine.resume(run_id, reason="signal")
    assert runner.get_run(run_id).status == RunStatus.WAITING
    (nap,) = [r for r in runner.engine.load(run_id).steps.values() if r.kind == StepKind.SLEEP]
    assert nap.status == StepStatus.WAITING


def test_an_early_wake_up_suspends_again_with_the_same_wake_time() -> None:
    """GIVEN a run sleeping an hour WHEN a timer (or a sweep) wakes it ten minutes early
    THEN it suspends again with the recorded wake time, not one computed anew."""
    runner = _runner(_napping_app())
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    wake_at = (runner.get_run(run_id).sleeps or {})["0002"]["wake_at"]
    runner.clock.advance(timedelta(minutes=50))
    runner.engine.resume(run_id, reason="timer")
    run = runner.get_run(run_id)
    assert run.status == RunStatus.WAITING
    assert (run.sleeps or {})["0002"]["wake_at"] == wake_at and run.due_at == wake_at
    runner.advance(minutes=10)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED


def test_a_worker_that_lost_its_lease_records_no_sleep() -> None:
    """GIVEN a worker whose lease was taken over WHEN it reaches a sleep THEN its
    suspension is refused and the run item holds no sleep of it (the entry rides the
    fenced write: no write, no entry)."""
    runner = _runner(_napping_app())
    run_id = runner.start("flow").run_id
    ledger = runner.memory_ledger
    claim = ledger.claim(run_id, "zombie", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None
    taken = ledger.claim(run_id, "new", now=t(100), lease_until=t(160), stale_before=t(95))
    assert taken is not None
    changes = {"sleeps": {"0002": {"name": "nap", "wake_at": t(3600), "at": t(1), "fence": 1}}}
    with pytest.raises(ConditionFailed):
        ledger.update_run(run_id, RunGuard(claim.run.fence, "zombie"), changes)
    after = ledger.get_run(run_id)
    assert after is not None and after.sleeps is None


def test_a_warm_containers_cached_view_shows_the_sleep_over_once_a_claim_woke_it() -> None:
    """GIVEN a warm container's cache whose kept view of the run shows its sleep WAITING
    (loaded after a claim that came ten minutes early)
    WHEN the run is claimed again at its wake time and loaded from that view
    THEN the sleep is over in the history the cache serves (the claim's stamp), not the
    WAITING record the view kept."""
    runner = _runner(_napping_app())
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    cache = CachingLedger(runner.memory_ledger)
    run = runner.get_run(run_id)
    wake = parse_time(run.due_at or "")

    def claim(at: timedelta) -> Any:
        now = wake + at
        taken = cache.claim(
            run_id,
            "w",
            now=format_time(now),
            lease_until=format_time(now + timedelta(minutes=1)),
            stale_before=format_time(now),
        )
        assert taken is not None
        return taken

    early = claim(-timedelta(minutes=10))
    loaded = cache.load(run_id)  # a real load: the view is kept
    assert loaded is not None and loaded.steps["0002"].status == StepStatus.WAITING
    guard = RunGuard(early.run.fence, "w")
    cache.update_run(run_id, guard, {"updated_at": early.run.updated_at})
    claim(timedelta(0))
    hit = cache.load(run_id)
    assert cache.hits == 1 and hit is not None
    assert hit.steps["0002"].status == StepStatus.DONE
    assert hit.steps["0002"].wake_at == run.due_at


# --- DynamoDB: the items as stored ----------------------------------------------------------


def test_dynamodb_stores_an_open_sleep_as_a_map_on_the_run_item(dynamo: tuple[Any, str]) -> None:
    """GIVEN a run item written with an open sleep WHEN it is read raw and loaded
    THEN the run item has a ``sleeps`` map the console shows (name, wake_at, at, fence),
    there is no STEP# item, and the load presents the WAITING record."""
    client, table = dynamo
    ledger = DynamoLedger(client, table)
    ledger.create_run(make_run(due_at=t(0)))
    claim = ledger.claim("RUN1", "w", now=t(1), lease_until=t(61), stale_before=t(1))
    assert claim is not None
    entry = {"name": "nap", "wake_at": t(3600), "at": t(2), "fence": claim.run.fence}
    changes: dict[str, Any] = {"status": "WAITING", "lease_owner": None, "lease_until": None}
    changes |= {"due_at": t(3600), "updated_at": t(2), "sleeps": {"0002": entry}}
    ledger.update_run("RUN1", RunGuard(claim.run.fence, "w"), changes)
    key = {"pk": {"S": run_pk("RUN1")}, "sk": {"S": "RUN"}}
    item = client.get_item(TableName=table, Key=key)["Item"]
    assert item["sleeps"] == {
        "M": {
            "0002": {
                "M": {
                    "name": {"S": "nap"},
                    "wake_at": {"S": t(3600)},
                    "at": {"S": t(2)},
                    "fence": {"N": str(claim.run.fence)},
                }
            }
        }
    }
    steps = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :s)",
        ExpressionAttributeValues={":pk": {"S": run_pk("RUN1")}, ":s": {"S": "STEP#"}},
    )["Items"]
    assert steps == []
    history = DynamoLedger(client, table).load("RUN1")
    assert history is not None
    rec = history.steps["0002"]
    assert (rec.kind, rec.status, rec.name, rec.wake_at) == (
        StepKind.SLEEP,
        StepStatus.WAITING,
        "nap",
        t(3600),
    )
    assert rec.fence == claim.run.fence
    # its end: the claim that wakes it stamps its time; a claim before the wake does not
    early = ledger.claim("RUN1", "w2", now=t(3000), lease_until=t(3060), stale_before=t(3000))
    assert early is not None and early.run.woke_at == t(3000)
    loaded = ledger.load("RUN1")
    assert loaded is not None and loaded.steps["0002"].status == StepStatus.WAITING
    ledger.update_run("RUN1", RunGuard(early.run.fence, "w2"), {"lease_owner": None})
    woken = ledger.claim("RUN1", "w3", now=t(3600), lease_until=t(3660), stale_before=t(3600))
    assert woken is not None and woken.run.woke_at == t(3600)
    again = ledger.load("RUN1")
    assert again is not None and again.steps["0002"].status == StepStatus.DONE
    # a claimer whose clock is behind by less than the skew allowance does not move the
    # stamp back; one further behind replaces it (that stamp came from a clock ahead)
    ledger.update_run("RUN1", RunGuard(woken.run.fence, "w3"), {"lease_owner": None})
    behind = ledger.claim("RUN1", "w4", now=t(3597), lease_until=t(3657), stale_before=t(3592))
    assert behind is not None and behind.run.woke_at == t(3600)
    assert DynamoLedger(client, table).get_run("RUN1").woke_at == t(3600)  # type: ignore[union-attr]
    ledger.update_run("RUN1", RunGuard(behind.run.fence, "w4"), {"lease_owner": None})
    far = ledger.claim("RUN1", "w5", now=t(3500), lease_until=t(3560), stale_before=t(3495))
    assert far is not None and far.run.woke_at == t(3500)
