"""A business key a recurring job reuses (issue 46, item 2).

A nightly import keyed each supplier's run by the supplier: night 2 got night 1's run
back (same input: nothing ran) or ``IdempotencyConflict`` (another input), because a key
named one run for its retention. ``reuse="after_end"`` starts a new run under the key
once the key's run has ended (the ended one stays readable by its id); lookups and
signals by key name the newest. The default stays ``"never"``."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.core.ids import derived_run_id
from durable.engine.engine import Engine
from durable.engine.keys import read_slot
from durable.errors import IdempotencyConflict, InvalidInput
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

KEY = "supplier-42"


def nightly_app() -> App:
    app = App()

    @app.workflow
    def price_import(ctx: Context, supplier: str) -> str:
        ctx.wait_for_signal("go")  # holds the run until the test says
        return ctx.step(lambda: f"imported {supplier}", name="fetch")

    @app.workflow
    def nightly(ctx: Context, night: int) -> str:
        out: str = ctx.run_child(price_import, KEY, id=KEY, reuse="after_end")
        return f"night {night}: {out}"

    @app.workflow
    def nightly_never(ctx: Context, night: int) -> str:
        out: str = ctx.run_child(price_import, KEY, id=KEY)
        return f"night {night}: {out}"

    return app


def finish(runner: LocalRunner, run_id: str) -> None:
    runner.run_until_idle()
    runner.signal(run_id, "go")
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED


def test_after_end_starts_a_new_run_under_a_key_whose_run_ended() -> None:
    runner = LocalRunner(nightly_app())
    first = runner.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    # The first run of a key has the id derived from it, as every keyed run had: runs
    # started before reuse existed are found where they always were.
    assert first.run_id == derived_run_id("price_import", KEY)
    finish(runner, first.run_id)
    second, created = runner.engine.start_or_get(
        "price_import", KEY, idempotency_key=KEY, reuse="after_end"
    )
    assert created and second.run_id != first.run_id
    assert second.idempotency_key == KEY
    # the ended run stays readable; the key names the newest
    assert runner.get_run(first.run_id).output == '"imported supplier-42"'
    assert runner.run_by_key("price_import", KEY).run_id == second.run_id
    # a signal by key (what ``durable signal key:...`` resolves) reaches the newest
    finish(runner, runner.run_by_key("price_import", KEY).run_id)
    third = runner.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    assert len({first.run_id, second.run_id, third.run_id}) == 3
    assert runner.run_by_key("price_import", KEY).run_id == third.run_id


def test_never_stays_the_default_and_says_how_to_reuse() -> None:
    runner = LocalRunner(nightly_app())
    first = runner.start("price_import", KEY, idempotency_key=KEY)
    finish(runner, first.run_id)
    again, created = runner.engine.start_or_get("price_import", KEY, idempotency_key=KEY)
    assert (again.run_id, created) == (first.run_id, False)  # nothing ran
    with pytest.raises(IdempotencyConflict, match='reuse="after_end"'):
        runner.start("price_import", "other", idempotency_key=KEY)


@pytest.mark.parametrize("reuse", ["never", "after_end"])
def test_while_the_key_runs_fail_refuses_another_input_and_attach_takes_it(reuse: Any) -> None:
    runner = LocalRunner(nightly_app())
    first = runner.start("price_import", KEY, idempotency_key=KEY, reuse=reuse)
    runner.run_until_idle()  # waiting for its signal: still running
    with pytest.raises(IdempotencyConflict, match='if_running="attach"'):
        runner.start("price_import", "other", idempotency_key=KEY, reuse=reuse)
    # the same start repeated (a retry) gets its run back, as before
    same, created = runner.engine.start_or_get(
        "price_import", KEY, idempotency_key=KEY, reuse=reuse
    )
    assert (same.run_id, created) == (first.run_id, False)
    attached, created = runner.engine.start_or_get(
        "price_import", "other", idempotency_key=KEY, reuse=reuse, if_running="attach"
    )
    assert (attached.run_id, created) == (first.run_id, False)
    assert list(runner.memory_ledger.all_run_ids()) == [first.run_id]


def test_a_reuse_value_that_is_not_one_is_refused_naming_the_field() -> None:
    runner = LocalRunner(nightly_app())
    with pytest.raises(InvalidInput) as refused:
        runner.start("price_import", KEY, idempotency_key=KEY, reuse="always")
    assert refused.value.field == "reuse"
    # a sender's keys name one delivery each: they cannot be reused
    with pytest.raises(InvalidInput) as scoped:
        runner.start("price_import", KEY, idempotency_key="m-1", key_scope="sqs", reuse="after_end")
    assert scoped.value.field == "reuse"
    assert runner.memory_ledger.all_run_ids() == []


def test_two_workers_starting_a_key_whose_run_ended_create_one_run() -> None:
    """GIVEN a key whose run has ended
    WHEN eight workers start it at once with reuse="after_end"
    THEN exactly one new run is created, and every worker gets it"""
    app = nightly_app()
    runner = LocalRunner(app)
    first = runner.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    finish(runner, first.run_id)
    workers = 8
    barrier = threading.Barrier(workers)
    answers: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def start() -> None:
        engine = Engine(
            app, runner.memory_ledger, runner.invoker, runner.effect_store, clock=runner.clock
        )
        barrier.wait()
        run, created = engine.start_or_get(
            "price_import", KEY, idempotency_key=KEY, reuse="after_end"
        )
        with lock:
            answers.append((run.run_id, created))

    threads = [threading.Thread(target=start) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(created for _, created in answers) == 1
    assert len({run_id for run_id, _ in answers}) == 1
    assert len(runner.memory_ledger.all_run_ids()) == 2


class _Interleaved:
    """A ledger that runs ``meanwhile`` once, right before its first ``method`` call:
    another worker's whole start between two writes of this one's."""

    def __init__(self, inner: Any, method: str, meanwhile: Any) -> None:
        self._inner, self._method, self._meanwhile = inner, method, meanwhile

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name != self._method or self._meanwhile is None:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
            return value(*args, **kwargs)

        return call


@pytest.mark.parametrize("between", ["create_run", "write_gate"])
def test_a_start_that_loses_the_race_at_either_write_gets_the_winners_run(between: str) -> None:
    app = nightly_app()
    runner = LocalRunner(app)
    first = runner.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    finish(runner, first.run_id)
    won: list[tuple[str, bool]] = []

    def other() -> None:
        run, created = runner.engine.start_or_get(
            "price_import", KEY, idempotency_key=KEY, reuse="after_end"
        )
        won.append((run.run_id, created))

    ledger = _Interleaved(runner.memory_ledger, between, other)
    slow = Engine(app, ledger, runner.invoker, runner.effect_store, clock=runner.clock)
    run, created = slow.start_or_get("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    assert won and won[0][1] is True
    assert (run.run_id, created) == (won[0][0], False)
    assert len(runner.memory_ledger.all_run_ids()) == 2


def test_a_start_that_died_between_its_two_writes_leaves_the_key_usable() -> None:
    """The slot item moved on, the run was never created: the key still names the ended
    run, and the next start creates the run in the slot."""
    app = nightly_app()
    runner = LocalRunner(app)
    first = runner.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    finish(runner, first.run_id)
    runner.crash_at("ledger.create_run", call=runner.call_count("ledger.create_run") + 2)
    with pytest.raises(BaseException, match="crash before"):
        runner.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    slot = read_slot(runner.memory_ledger, "price_import", KEY)
    assert slot.after == first.run_id and runner.memory_ledger.get_run(slot.run_id) is None
    assert runner.run_by_key("price_import", KEY).run_id == first.run_id
    again, created = runner.engine.start_or_get(
        "price_import", KEY, idempotency_key=KEY, reuse="after_end"
    )
    assert created and again.run_id == slot.run_id
    assert runner.run_by_key("price_import", KEY).run_id == again.run_id


def test_a_keyed_child_reused_each_night_starts_a_new_child() -> None:
    runner = LocalRunner(nightly_app())
    night1 = runner.start("nightly", 1)
    runner.run_until_idle()
    child1 = runner.run_by_key("price_import", KEY)
    finish(runner, child1.run_id)
    assert runner.result(night1.run_id) == "night 1: imported supplier-42"
    runner.advance(days=1)
    night2 = runner.start("nightly", 2)
    runner.run_until_idle()
    child2 = runner.run_by_key("price_import", KEY)
    assert child2.run_id != child1.run_id and not child2.terminal
    finish(runner, child2.run_id)
    assert runner.result(night2.run_id) == "night 2: imported supplier-42"
    assert runner.get_run(child1.run_id).status == RunStatus.SUCCEEDED


def test_a_keyed_child_by_default_adopts_the_ended_runs_outcome() -> None:
    """``reuse="never"`` (the default): night 2 runs nothing and reports night 1's."""
    runner = LocalRunner(nightly_app())
    night1 = runner.start("nightly_never", 1)
    runner.run_until_idle()
    finish(runner, runner.run_by_key("price_import", KEY).run_id)
    runner.advance(timedelta(days=1))
    night2 = runner.start("nightly_never", 2)
    runner.run_until_idle()
    assert runner.get_run(night2.run_id).status == RunStatus.SUCCEEDED
    assert runner.result(night1.run_id) == "night 1: imported supplier-42"
    assert len(runner.memory_ledger.all_run_ids()) == 3


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"id": "hook:other/k", "reuse": "after_end"}, "'hook:'"),  # a sender's namespace
        ({"id": "k", "reuse": "sometimes"}, 'reuse is "never"'),  # no such reuse
    ],
)
def test_a_bad_child_key_is_refused_before_anything_is_read(
    options: dict[str, Any], says: str
) -> None:
    app = App()

    @app.workflow
    def child(ctx: Context) -> int:
        return 1

    @app.workflow
    def parent(ctx: Context) -> int:
        value: int = ctx.run_child(child, **options)
        return value

    runner = LocalRunner(app)
    run = runner.start("parent")
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED and failed.error is not None
    assert failed.error.type == "InvalidInput" and says in failed.error.message
    assert runner.history(run.run_id) == []  # refused before any child was started
