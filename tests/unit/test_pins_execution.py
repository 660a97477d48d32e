"""Pins on one invocation's replay (durable/engine/execution.py): each test names the mutants it
kills (ids of ``python -m tests.mutation --module durable/engine/execution.py --list``)."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from durable import (
    App,
    Context,
    EngineConfig,
    RetryPolicy,
    RunStatus,
    StepFailed,
    StepStatus,
    current_step,
)
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.core.model import format_time, parse_time
from durable.engine.deploy_check import ReadOnlyLedger, check_deploy
from durable.engine.engine import Engine
from durable.errors import InvalidState, NonDeterminismError, RunCanceled
from durable.testing import LocalRunner, SimulatedCrash


def run_once(app: App, **runner_options: Any) -> tuple[LocalRunner, str]:
    runner = LocalRunner(app, **runner_options)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    return runner, run_id


# --- positions and replay ---------------------------------------------------------------


def test_a_run_with_no_waits_cancels_no_timers_and_one_that_slept_does() -> None:
    """GIVEN a run of steps only, and one that slept WHEN each finishes THEN only the one
    that armed a timer asks the timer service to cancel the run's timers (a Scheduler
    request saved on every run that never waited).

    Kills execution-32201d97 (``self.armed = False`` -> True)."""
    plain = App()

    @plain.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(lambda: "ok", name="work")

    runner, run_id = run_once(plain)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert runner.call_count("timers.cancel_run") == 0

    napping = App()

    @napping.workflow(name="flow")
    def nap(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=1))
        return "rested"

    runner, run_id = run_once(napping)
    runner.advance(minutes=1)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert runner.call_count("timers.cancel_run") == 1


def test_an_undecorated_step_is_recorded_as_version_one() -> None:
    """GIVEN a plain function run with ctx.step WHEN it is recorded THEN its step_version is
    1 (the default a decorated step has too).

    Kills execution-0b698d7d (``version=... else 1`` -> 0)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(lambda: "ok", name="work")

    runner, run_id = run_once(app)
    (step,) = runner.history(run_id)
    assert (step.position, step.step_version) == ("0001", 1)


def test_a_replayed_failure_keeps_its_error_type() -> None:
    """GIVEN a step that failed for good (ValueError), caught by the workflow, then a sleep
    WHEN the run wakes and replays the failure THEN StepFailed carries "ValueError" again.

    Kills execution-347174b8 (``rec.error_type or "Error"`` -> ``and``)."""
    app = App()

    def broken() -> str:
        raise ValueError("bad input")

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            ctx.step(broken, name="broken")
        except StepFailed as failed:
            kind = failed.error_type
        ctx.sleep(timedelta(hours=1))
        return kind

    runner, run_id = run_once(app)
    runner.advance(hours=1)
    assert runner.get_run(run_id).output == '"ValueError"'


def test_a_replay_reads_recorded_values_without_writing_them_again() -> None:
    """GIVEN a workflow that recorded ctx.now() and ctx.uuid() and then slept
    WHEN it replays after the sleep THEN it gets the recorded values and writes nothing:
    not the values again, nor the sleep's end (the claim that woke it ended it,
    ``durable.core.sleeps``).

    Kills execution-55356e78 (``rec.status == DONE`` negated: the replay would make new
    values and lose the write race to the recorded ones, a request each)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        stamp, ident = ctx.now(), ctx.uuid()
        ctx.sleep(timedelta(hours=1))
        return f"{stamp.isoformat()} {ident}"

    runner, run_id = run_once(app)
    writes = runner.call_count("ledger.write_step")
    first = runner.history(run_id)
    runner.advance(hours=1)
    assert runner.call_count("ledger.write_step") == writes
    assert runner.history(run_id)[:2] == first[:2]


def test_recording_a_value_renews_the_lease_only_when_under_the_safety_margin() -> None:
    """GIVEN a 3 s lease and a step (budget 0.5 s) that takes 0.5 s, leaving 2.5 s of lease
    WHEN the workflow then records ctx.now() THEN the lease is not renewed: a value needs no
    time, only the 2 s safety margin, which 2.5 s covers. After another 1 s it is renewed.

    Kills execution-517a8d29 (record_value's ``ensure_lease(timedelta(0))`` -> 1 s) and
    execution-04965008 (the renewal deleted)."""
    app = App()
    runner: LocalRunner

    def work() -> str:
        runner.clock.advance(timedelta(milliseconds=500))
        return "ok"

    def wait() -> str:
        runner.clock.advance(timedelta(seconds=1))
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(work, timeout=timedelta(milliseconds=500))
        ctx.now()
        marks.append(runner.call_count("ledger.update_run"))
        ctx.step(wait, timeout=timedelta(milliseconds=100))
        ctx.now()
        marks.append(runner.call_count("ledger.update_run"))
        return "done"

    marks: list[int] = []
    config = EngineConfig(lease=timedelta(seconds=3), cancel_check_interval=timedelta(seconds=5))
    runner = LocalRunner(app, config=config)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert marks == [0, 1]


def test_invalid_step_options_fail_the_run() -> None:
    """GIVEN ctx.step with a zero timeout WHEN the workflow calls it THEN the run fails with
    the option's error and the body never runs.

    Kills execution-78da7bf1 (``check_step_options(...)`` deleted from call_step)."""
    app = App()
    bodies: list[int] = []

    def work() -> str:
        bodies.append(1)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work, name="work", timeout=timedelta(0))

    runner, run_id = run_once(app)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert "timeout= must be a positive" in run.error.message
    assert bodies == []


# --- non-determinism and cancellation ---------------------------------------------------

CALLS = {"n": 0}


def test_code_that_caught_non_determinism_cannot_replay_another_step() -> None:
    """GIVEN a workflow that, on replay, meets a renamed step, catches the NonDeterminismError
    and calls its next (recorded) step WHEN it replays THEN that call raises the error
    again: the workflow code after it never runs, even though the step has a recorded
    result, and the run is parked FAILED for attention.

    Kills execution-88b0d063 (next_position's ``raise self.nondeterminism`` deleted: a
    recorded result would be handed back; only new work checks again)."""
    app = App()
    CALLS["n"] = 0
    after_other: list[str] = []

    @app.workflow
    def flow(ctx: Context) -> str:
        CALLS["n"] += 1
        with contextlib.suppress(NonDeterminismError):
            ctx.step(lambda: "work", name=f"work-{CALLS['n']}")
        other = ctx.step(lambda: "other", name="other")
        after_other.append(other)
        if CALLS["n"] == 1:
            ctx.sleep(timedelta(hours=1))
        return other

    runner, run_id = run_once(app)
    assert after_other == ["other"]
    runner.advance(hours=1)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.needs_attention
    assert after_other == ["other"]


def test_a_run_canceled_before_its_first_step_never_runs_it() -> None:
    """GIVEN a started run whose worker has not run yet WHEN it is canceled THEN it is
    CANCELED and its first step's body never runs (the replay stops at the first position
    that would do new work, even with a fresh lease).

    Kills execution-7ca43222 (``self.check_cancel()`` before new work deleted)."""
    app = App()
    bodies: list[int] = []

    def work() -> str:
        bodies.append(1)
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work, name="work")

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.cancel(run_id, reason="changed my mind")
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert bodies == []


def test_a_cancel_stops_a_sleeping_run_at_once() -> None:
    """GIVEN a run sleeping for a day WHEN it is canceled THEN it is CANCELED right away
    (the replay stops at the pending sleep), not when the sleep ends.

    Pins the cancel check at a pending record (recorded(), for waits)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.sleep(timedelta(days=1))
        return "rested"

    runner, run_id = run_once(app)
    runner.cancel(run_id, reason="not needed")
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.CANCELED
    assert run.error is not None and run.error.message == "not needed"


def test_the_cancel_signal_carries_the_reason() -> None:
    """GIVEN a run whose cancel (reason "customer asked") lands while a step runs
    WHEN the replay after the next wake-up stops at the pending sleep THEN the RunCanceled
    raised there carries the reason (what a traceback or a ``finally`` sees).

    Kills execution-ad06e0ba (``cancel_reason or "canceled"`` -> ``and``)."""
    app = App()
    seen: list[str] = []
    runner: LocalRunner

    def first() -> str:
        runner.memory_ledger.patch_run(
            run_id, {"cancel_requested": True, "cancel_reason": "customer asked"}
        )
        return "first"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(first, name="first")
        try:
            ctx.sleep(timedelta(seconds=1))
            return ctx.step(lambda: "second", name="second")
        except RunCanceled as canceled:
            seen.append(str(canceled))
            raise

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(seconds=2)
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert seen == ["customer asked"]


def test_a_decorated_step_called_after_a_run_is_a_plain_call() -> None:
    """GIVEN a run that has finished WHEN test or application code then calls a decorated
    step directly THEN it is a plain function call: the workflow's context did not outlive
    the workflow.

    Kills execution-8fb0a3f5 (``reset_context(token)`` deleted from run_workflow)."""
    app = App()

    @app.step
    def greet(who: str) -> str:
        return f"hello {who}"

    @app.workflow
    def flow(ctx: Context) -> str:
        return greet("run")

    runner, run_id = run_once(app)
    assert runner.get_run(run_id).output == '"hello run"'
    assert greet("caller") == "hello caller"
    assert len(runner.history(run_id)) == 1


# --- the invocation's budget ------------------------------------------------------------


@pytest.mark.parametrize(("remaining", "runs"), [(12.0, True), (11.9, False)])
def test_a_step_runs_when_the_invocation_has_exactly_its_budget_and_margin(
    remaining: float, runs: bool
) -> None:
    """GIVEN a step with timeout=10 s (plus the 2 s safety margin) in a fresh invocation
    WHEN 12 s are left THEN it runs; with 11.9 s it fails for good saying so.

    Kills execution-241aab45 (``budget + safety_margin`` -> ``-``) and execution-7e246dbe
    (``remaining >= needed`` -> ``>``)."""
    app = App()
    bodies: list[int] = []

    def work() -> str:
        bodies.append(1)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work, name="work", timeout=timedelta(seconds=10))

    runner, run_id = run_once(app, remaining_seconds=lambda: remaining)
    run = runner.get_run(run_id)
    assert bodies == ([1] if runs else [])
    assert run.status == (RunStatus.SUCCEEDED if runs else RunStatus.FAILED)


# --- the upgrade check (a dry-run replay) -----------------------------------------------


class Bug:
    fixed = False


def upgradable_app(new_work: list[str]) -> App:
    app = App()

    def charge() -> str:
        return "ch_1"

    def export() -> str:
        if not Bug.fixed:
            raise KeyError("export column")
        return "exported"

    @app.workflow(name="flow", version=1)
    def v1(ctx: Context) -> str:
        return ctx.step(charge, name="charge") + ctx.step(export, name="export")

    def invoice() -> str:
        new_work.append("invoice")
        return "inv"

    @app.workflow(name="flow", version=2)
    def v2(ctx: Context) -> str:
        charged = ctx.step(charge, name="charge")
        try:
            exported = ctx.step(export, name="export")
        except StepFailed:
            exported = "-not-exported-"
        ctx.sleep(timedelta(minutes=1))
        return charged + exported + ctx.step(invoice, name="invoice")

    @app.workflow(name="flow", version=3)
    def v3(ctx: Context) -> str:
        return ctx.step(charge, name="charge") + ctx.step(export, name="export-v3")

    return app


def failed_run(new_work: list[str]) -> tuple[LocalRunner, str]:
    Bug.fixed = False
    runner = LocalRunner(upgradable_app(new_work))
    run_id = runner.start("flow", version=1).run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.FAILED
    return runner, run_id


def test_an_upgrade_that_adds_work_after_the_failed_step_is_accepted_without_running_it() -> None:
    """GIVEN a run failed at its second step WHEN it is retried on a version that keeps both
    recorded steps, catches the second one's failure and goes on to sleep and a third step
    THEN the check accepts it and writes nothing (it stops at the failed step, where the
    retry resumes); the retry then runs the fixed step, the sleep and the new step.

    (It no longer kills execution-0d9b16d4 or execution-ac45df80: every write is fenced
    now, so the new work those mutants reach is refused by the lease check and nothing is
    written either way. test_a_dry_replay_runs_no_step_body_under_a_live_lease kills
    them.)"""
    new_work: list[str] = []
    runner, run_id = failed_run(new_work)
    Bug.fixed = True
    runner.retry(run_id, upgrade_to=2)
    assert [s.position for s in runner.history(run_id)] == ["0001", "0002"]
    assert new_work == []
    runner.run_until_idle()
    runner.advance(minutes=1)
    run = runner.get_run(run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, '"ch_1exportedinv"')
    assert new_work == ["invoice"]


def test_an_upgrade_renaming_the_failed_step_is_refused_at_its_position() -> None:
    """GIVEN a run failed at its second step WHEN it is retried on a version that calls a
    different step there THEN the check refuses it, naming position 0002; nothing changes.

    Kills execution-7f8aed04 / ec088f74 / 6ae17396 (the dry run stopping at the first,
    recorded step), execution-e7ad9019 / 24c5aa7f (the name/kind check at the stop),
    execution-9e9108fb / 6ad8762f (the error not built or not raised)."""
    runner, run_id = failed_run([])
    with pytest.raises(InvalidState, match="position 0002"):
        runner.retry(run_id, upgrade_to=3)
    assert runner.get_run(run_id).status == RunStatus.FAILED


def test_a_dry_replay_runs_no_step_body_under_a_live_lease() -> None:
    """GIVEN a run whose worker died inside its second step, after a checkpoint (a
    RUNNING record), so its lease still runs for a minute; and new code whose second step
    (timeout 1 s: that lease covers it) notes every body run
    WHEN check-deploy replays the run right away THEN the verdict is "ok" and no body ran:
    the dry replay stops at the pending record, before any new work.

    Kills execution-0d9b16d4 (the stop test ``or`` -> ``and``: a pending record is not a
    stop) and execution-ac45df80 (``raise DryRunComplete()`` deleted): both go on into the
    step, whose lease check finds the dead worker's lease long enough and fresh, so the
    body runs (its result then fails to write, but the side effect happened)."""
    old = App()

    @old.step(name="pull")
    def pull_old() -> str:
        current_step().checkpoint({"page": 1})
        raise SimulatedCrash("the worker died mid-body")

    @old.workflow(name="flow")
    def flow_old(ctx: Context) -> str:
        return ctx.step(lambda: "a", name="first") + pull_old()

    runner, run_id = run_once(old)
    stored = runner.history(run_id)
    assert runner.get_run(run_id).status == RunStatus.RUNNING
    assert [(s.name, s.status.value) for s in stored] == [("first", "DONE"), ("pull", "RUNNING")]

    new = App()
    bodies: list[str] = []

    @new.step(name="pull", timeout=timedelta(seconds=1))
    def pull_new() -> str:
        bodies.append("pull")
        return "b"

    @new.workflow(name="flow")
    def flow_new(ctx: Context) -> str:
        return ctx.step(lambda: "a", name="first") + pull_new()

    engine = Engine(
        new,
        ReadOnlyLedger(runner.memory_ledger),
        MemoryInvoker(),
        MemoryEffectStore(),
        clock=runner.clock,
    )
    report = check_deploy(engine, ["flow"])
    assert [(r.run_id, r.verdict) for r in report.runs] == [(run_id, "ok")]
    assert bodies == []


# --- patches (ctx.changed) ------------------------------------------------------------


def test_a_patch_marker_is_not_written_for_a_run_canceled_meanwhile() -> None:
    """GIVEN a run whose first step took 6 s (past ``cancel_check_interval``), during which
    an operator asked to cancel it
    WHEN the workflow then reaches ``ctx.changed("fix")`` for the first time THEN the
    marker's lease check reads the run again, sees the cancel and the run is canceled:
    no marker is recorded and the new code is not taken.

    Kills execution-0ffe1606 (the ``ensure_lease`` before the marker deleted: the marker is
    written on the stale view of the run)."""
    app = App()
    box: list[LocalRunner] = []

    @app.step(name="first")
    def first() -> str:
        runner = box[0]
        run_id = current_step().run_id
        runner.memory_ledger.patch_run(run_id, {"cancel_requested": True, "cancel_reason": "stop"})
        runner.clock.advance(timedelta(seconds=6))
        return "a"

    @app.workflow
    def flow(ctx: Context) -> str:
        first()
        return "new" if ctx.changed("fix") else "old"

    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert [s.name for s in runner.history(run_id)] == ["first"]


def test_a_patch_marker_is_json_true_and_does_not_stretch_the_lease() -> None:
    """GIVEN a workflow that takes a patch and then runs a 1 s step noting the run's lease
    WHEN it runs THEN the marker is stored as the JSON value ``true`` (readers of the
    history decode every output as JSON), and the marker's lease check asked for no time
    of its own: the lease the step sees is the claim's, about a minute, not a day.

    Kills execution-df6ad0ac (the marker's output ``"true"`` -> ``""``: not JSON) and
    execution-2825acf3 (``ensure_lease(timedelta(0))`` -> ``timedelta(1)``, one day: the
    marker would renew the lease for a day, so a dead worker's run waits a day for its
    takeover)."""
    app = App()
    box: list[LocalRunner] = []
    seen: list[timedelta] = []

    @app.step(name="after", timeout=timedelta(seconds=1))
    def after() -> str:
        runner = box[0]
        until = runner.get_run(current_step().run_id).lease_until
        assert until is not None
        seen.append(parse_time(until) - runner.clock.now())
        return "b"

    @app.workflow
    def flow(ctx: Context) -> str:
        return after() if ctx.changed("fix") else "old"

    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    marker = runner.history(run_id)[0]
    assert marker.name == "changed:fix" and marker.output is not None
    assert json.loads(marker.output) is True
    assert len(seen) == 1 and timedelta(0) < seen[0] <= timedelta(minutes=2)


# --- the run's data key (secret-typed values) -----------------------------------------

API_KEY = "sk-live-correct-horse-battery"


class Vault(BaseModel):
    api_key: SecretStr


def late_secret_app(box: list[LocalRunner], used: list[str], *, steal: bool = False) -> App:
    """``flow`` (plain input): a step returns a secret, the run sleeps, and a step after
    the sleep (on replay) uses it. With ``steal``, another worker takes the run over
    while the first step runs."""
    app = App()

    @app.step(name="fetch")
    def fetch() -> Vault:
        if steal:
            box[0].memory_ledger.patch_run(
                current_step().run_id, {"fence": 99, "lease_owner": "w2"}
            )
        return Vault(api_key=SecretStr(API_KEY))

    @app.step(name="use")
    def use(key: str) -> str:
        used.append(key)
        return "used"

    @app.workflow
    def flow(ctx: Context) -> str:
        vault = fetch()
        ctx.sleep(timedelta(minutes=5))
        return use(vault.api_key.get_secret_value())

    return app


def test_a_run_started_without_secrets_gets_its_data_key_with_its_first_secret() -> None:
    """GIVEN a run whose input holds no secret (so it starts without a data key) and whose
    first step returns a SecretStr
    WHEN the step's result is stored, and the run replays it after a sleep
    THEN the run item gets a data key at that point, the stored result is sealed (the
    plaintext is nowhere in the ledger) and the replay opens it whole.

    Kills the create branch of ``Execution.sealer``: execution-38af3a3d (``run_id = ...``
    deleted), execution-ff2d634a (``create`` negated), execution-18eaf67b / 3a4daf01 (the
    key not made, or its record not built), execution-60d69fc5 / 9af23e0a (the key not
    stored on the run, or under "": the replay cannot open the value),
    execution-784fee5c (the new sealer not kept: nothing to seal with)."""
    box: list[LocalRunner] = []
    used: list[str] = []
    runner = LocalRunner(late_secret_app(box, used))
    box.append(runner)
    run_id = runner.start("flow").run_id
    assert runner.get_run(run_id).data_key is None
    runner.run_until_idle()
    assert runner.get_run(run_id).data_key is not None
    stored = [s.output or "" for s in runner.history(run_id)]
    assert stored and not any(API_KEY in text for text in stored)
    runner.advance(minutes=6)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert used == [API_KEY]


def test_a_data_key_is_not_made_for_a_run_whose_lease_is_gone() -> None:
    """GIVEN a run without a data key, taken over by another worker while its step ran
    WHEN the step returns a secret (its data key must be stored first, a fenced write)
    THEN the lease is lost: the invocation ends and nothing is recorded (no value sealed
    under a key the run does not keep).

    Kills execution-833896a3 (``raise LeaseLost() from e`` deleted: the value is sealed
    under a key that was never stored, and the step's result is recorded)."""
    box: list[LocalRunner] = []
    runner = LocalRunner(late_secret_app(box, [], steal=True))
    box.append(runner)
    run_id = runner.start("flow").run_id
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["lease_lost"]
    assert runner.history(run_id) == []
    assert runner.get_run(run_id).data_key is None


def test_a_value_quoting_the_sealed_marker_makes_no_data_key() -> None:
    """GIVEN a run without secrets whose step returns text that contains "$sealed"
    WHEN the result is read back THEN it is the text, and the run still has no data key
    (reading a value never creates one: only sealing a secret does).

    Kills execution-a48d4a9a (``create: bool = False`` -> True: decoding the text would
    make and store a data key)."""
    app = App()

    @app.step(name="quote")
    def quote() -> str:
        return 'the marker is {"$sealed": "..."}'

    @app.workflow
    def flow(ctx: Context) -> str:
        return quote()

    runner, run_id = run_once(app)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert json.loads(run.output or "") == 'the marker is {"$sealed": "..."}'
    assert run.data_key is None


class CountingKeys:
    """A key service that counts how often a run's data key is opened."""

    def __init__(self, keys: Any) -> None:
        self.keys = keys
        self.opened = 0

    def new_data_key(self, run_id: str) -> tuple[bytes, str]:
        key, wrapped = self.keys.new_data_key(run_id)
        return key, wrapped

    def open_data_key(self, run_id: str, wrapped: str) -> bytes:
        self.opened += 1
        key: bytes = self.keys.open_data_key(run_id, wrapped)
        return key


def test_a_replay_opens_the_data_key_only_for_a_sealed_value() -> None:
    """GIVEN a run whose step may return a secret (``Vault | None``) and returned None, so
    the run has a data key but no sealed value
    WHEN the run replays that result after a sleep THEN the data key is never opened (a
    key-service call, KMS on AWS, is only made to open a sealed value).

    Kills execution-60779c3c (``text is not None and SEALED in text`` -> ``or``: every
    value read would open the key)."""
    app = App()

    @app.step(name="maybe")
    def maybe() -> Vault | None:
        return None

    @app.workflow
    def flow(ctx: Context) -> str:
        found = maybe()
        ctx.sleep(timedelta(minutes=5))
        return "none" if found is None else "some"

    runner = LocalRunner(app)
    keys = CountingKeys(runner.engine.keys)
    runner.engine.keys = keys
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).data_key is not None
    runner.advance(minutes=6)
    run = runner.get_run(run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, '"none"')
    assert keys.opened == 0


# --- fenced writes ---------------------------------------------------------------------


def test_a_step_failure_recorded_after_a_cancel_request_still_fails_the_run() -> None:
    """GIVEN a step (one attempt) during whose body an operator asks to cancel the run
    WHEN the body then raises THEN the step's failure is recorded and the run ends FAILED
    with it: only the mark an at-most-once body starts after is refused by a cancel
    request, not the record of what already happened.

    Kills execution-cc2df104 (``starts_body: bool = False`` -> True: every fenced write
    would be refused under a cancel request, so the failure would be lost and the run
    canceled instead)."""
    app = App()
    box: list[LocalRunner] = []

    @app.step(name="work", retry=RetryPolicy(max_attempts=1))
    def work() -> str:
        run_id = current_step().run_id
        box[0].memory_ledger.patch_run(run_id, {"cancel_requested": True, "cancel_reason": "stop"})
        raise ValueError("bad input")

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.position == "0001"
    assert [(s.name, s.status) for s in runner.history(run_id)] == [
        ("work", StepStatus.TERMINAL_FAILED)
    ]


def test_a_wait_timed_out_by_a_later_invocation_carries_that_invocations_fence() -> None:
    """GIVEN a callback wait (1 hour) recorded by the run's first invocation (fence 1)
    WHEN the timer's invocation (fence 2) times it out THEN the TIMED_OUT record carries
    fence 2: every record carries the fence of the worker that wrote it, even one made by
    copying an older record.

    Kills execution-ebceb59f (``rec.fence = self.run.fence`` deleted from write_fenced:
    the copy keeps the first invocation's fence)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        return ctx.create_callback("approval", timeout=timedelta(hours=1)).result()

    runner, run_id = run_once(app)
    assert [(s.status, s.fence) for s in runner.history(run_id)] == [(StepStatus.WAITING, 1)]
    runner.advance(hours=2)
    run = runner.get_run(run_id)
    assert (run.status, run.fence) == (RunStatus.FAILED, 2)
    assert [(s.status, s.fence) for s in runner.history(run_id)] == [(StepStatus.TIMED_OUT, 2)]


def cancel_landing_app(box: list[LocalRunner], undone: list[str], changes: dict[str, Any]) -> App:
    """``flow``: a compensable step whose body applies ``changes`` to the run item (another
    writer: an operator's cancel, a takeover), then an at-most-once step."""
    app = App()

    def undo(result: str) -> None:
        undone.append(result)

    @app.step(name="reserve")
    def reserve() -> str:
        box[0].memory_ledger.patch_run(current_step().run_id, changes)
        return "seat 12"

    @app.step(name="charge", semantics="at_most_once_per_attempt")
    def charge() -> str:
        return "charged"

    @app.workflow
    def flow(ctx: Context) -> str:
        seat = ctx.step(reserve, compensate=undo)
        return seat + ctx.step(charge)

    return app


def test_a_cancel_that_refuses_the_running_mark_compensates_as_requested() -> None:
    """GIVEN a compensable step during whose body an operator cancels the run with
    compensation and a reason (not yet seen by this worker: no lease renewal since)
    WHEN the next, at-most-once step's RUNNING mark is refused for the cancel request
    THEN the worker takes the run item from the refusal: the compensation runs and the
    run ends CANCELED with the operator's reason.

    Kills execution-13c72f29 (``self.run = current`` deleted: the worker goes on with its
    stale view, which asks for no compensation and has no reason)."""
    box: list[LocalRunner] = []
    undone: list[str] = []
    changes = {"cancel_requested": True, "cancel_reason": "budget cut", "cancel_compensate": True}
    runner = LocalRunner(cancel_landing_app(box, undone, changes))
    box.append(runner)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.CANCELED and run.error is not None
    assert run.error.message == "budget cut"
    assert undone == ["seat 12"]


def test_a_fenced_write_refused_because_the_run_item_is_gone_is_a_lost_lease() -> None:
    """GIVEN a run whose item disappears (deleted, expired) while its first step runs, and
    a workflow that wraps its next durable call (a sleep) in ``except Exception``
    WHEN the sleep's fenced write is refused with no run item to report
    THEN LeaseLost (not an Exception) ends the invocation: the workflow's handler never
    runs.

    Kills execution-6f368add (the cancel test's ``and`` -> ``or``: with no run item, the
    test reads ``current.fence`` of None and raises an AttributeError, which the workflow
    swallows and goes on) and execution-b2e41c11 (``raise LeaseLost() from e`` deleted:
    an UnboundLocalError instead, swallowed alike)."""
    app = App()
    box: list[LocalRunner] = []
    handled: list[str] = []

    @app.step(name="first")
    def first() -> str:
        del box[0].memory_ledger._runs[current_step().run_id]
        return "a"

    @app.workflow
    def flow(ctx: Context) -> str:
        first()
        try:
            ctx.sleep(timedelta(hours=1))
        except Exception as e:  # what careless workflow code does
            handled.append(type(e).__name__)
        return "done"

    runner = LocalRunner(app)
    box.append(runner)
    runner.start("flow")
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["lease_lost"]
    assert handled == []


def test_a_suspension_refused_after_a_takeover_is_a_lost_lease() -> None:
    """GIVEN a workflow that makes a callback, then runs a step during which another
    worker takes the run over (fence and owner changed), then waits for the callback
    WHEN this worker parks the run WAITING (the run item's update is refused: not its
    fence, not its owner) THEN the invocation ends as lease lost, not suspended, and the
    run item stays the new owner's.

    Kills execution-3b04adcb (``raise LeaseLost() from e`` deleted from ``suspend``: the
    refused suspension would be reported as a successful one)."""
    app = App()
    box: list[LocalRunner] = []

    @app.step(name="notify")
    def notify() -> str:
        box[0].memory_ledger.patch_run(current_step().run_id, {"fence": 99, "lease_owner": "w2"})
        return "sent"

    @app.workflow
    def flow(ctx: Context) -> Any:
        callback = ctx.create_callback("approval")
        notify()
        return callback.result()

    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["lease_lost"]
    run = runner.get_run(run_id)
    assert (run.status, run.fence, run.lease_owner) == (RunStatus.RUNNING, 99, "w2")


def test_a_sleep_past_the_run_lifetime_is_refused_naming_the_sleep() -> None:
    """GIVEN a run whose lifetime is one day WHEN it sleeps two days THEN the run fails
    with ValueError at the call, saying the sleep would end after the lifetime.

    Kills execution-b7253c41 (the "sleep" handed to ``check_lifetime`` -> "")."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.sleep(timedelta(days=2))
        return "woke"

    runner, run_id = run_once(app, config=EngineConfig(max_run_lifetime=timedelta(days=1)))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.type == "ValueError"
    assert run.error.message.startswith("this sleep would end at ")


def test_a_sleep_ending_exactly_at_the_run_lifetime_is_allowed() -> None:
    """GIVEN a run whose lifetime is one day WHEN it sleeps exactly one day from its
    creation THEN the sleep is recorded and the run waits: the bound is inclusive (a wait
    may end at the lifetime's end, not after it).

    Kills execution-2ee76899 (``until > lifetime_end`` -> ``>=``)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.sleep(timedelta(days=1))
        return "woke"

    runner, run_id = run_once(app, config=EngineConfig(max_run_lifetime=timedelta(days=1)))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.WAITING, run.error
    (sleep,) = runner.history(run_id)
    assert sleep.wake_at == format_time(parse_time(run.created_at) + timedelta(days=1))
