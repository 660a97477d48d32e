"""``durable check-deploy``: every unfinished run replayed against the new code, before
the deploy, with nothing run and nothing written."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.engine.deploy_check import CheckWrote, ReadOnlyLedger, check_deploy
from durable.engine.engine import Engine
from durable.testing import LocalRunner
from tests.unit import deploy_apps
from tests.unit.test_ledger_wrappers import call_with_placeholders


def _in_flight() -> tuple[LocalRunner, list[str]]:
    """Three orders asleep after two steps, one finished, all on the old code."""
    runner = LocalRunner(deploy_apps.old)
    waiting = [runner.start("order", f"o{i}").run_id for i in range(3)]
    runner.run_until_idle()
    done = runner.start("order", "o9").run_id
    runner.run_until_idle()
    runner.advance(hours=1)  # every sleep ends: the four finish...
    for i in range(3):  # ...then three new ones start and sleep
        waiting[i] = runner.start("order", f"n{i}").run_id
    runner.run_until_idle()
    assert runner.get_run(done).status == RunStatus.SUCCEEDED
    return runner, waiting


def _check(runner: LocalRunner, new: App, *names: str) -> Any:
    engine = Engine(new, ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore())
    return check_deploy(engine, names or [w.name for w in new.workflows()])


def _snapshot(runner: LocalRunner) -> Any:
    ledger = runner.memory_ledger
    return {run_id: ledger.load(run_id) for run_id in ledger.all_run_ids()}


def test_unchanged_code_replays_every_unfinished_run_cleanly() -> None:
    runner, waiting = _in_flight()
    report = _check(runner, deploy_apps.same)
    assert sorted(r.run_id for r in report.runs) == sorted(waiting)  # finished ones skipped
    assert {r.verdict for r in report.runs} == {"ok"} and report.broken == []


def test_a_renamed_step_names_each_run_it_would_break_and_where() -> None:
    runner, _ = _in_flight()
    before = _snapshot(runner)
    report = _check(runner, deploy_apps.renamed)
    assert len(report.broken) == 3
    first = report.broken[0]
    assert (first.verdict, first.position) == ("nondeterministic", "0002")
    assert "charge" in (first.recorded or "") and "bill" in (first.called or "")
    assert "new version" in first.advice
    assert report.summary() == {("order", 1): {"nondeterministic": 3}}
    assert _snapshot(runner) == before  # nothing written, nothing run


def test_a_dropped_version_is_reported_and_keeping_it_passes() -> None:
    runner, _ = _in_flight()
    dropped = _check(runner, deploy_apps.only_v2)
    assert [r.verdict for r in dropped.runs] == ["unregistered"] * 3
    assert "keep version 1" in dropped.runs[0].advice
    kept = _check(runner, deploy_apps.both)
    assert [r.verdict for r in kept.runs] == ["ok"] * 3


def test_a_workflow_the_new_code_no_longer_defines_is_checked_when_named() -> None:
    runner, _ = _in_flight()
    empty = App()
    assert _check(runner, empty, "order").broken != []
    assert _check(runner, empty, "nothing-by-this-name").runs == []


def test_the_ledger_given_to_a_check_cannot_be_written() -> None:
    runner, waiting = _in_flight()
    read_only = ReadOnlyLedger(runner.memory_ledger)
    assert read_only.get_run(waiting[0]) is not None  # reads pass
    for write in ("write_step", "update_run", "claim", "operate", "create_run"):
        with pytest.raises(CheckWrote, match=write):
            call_with_placeholders(getattr(read_only, write))


def test_the_report_as_json_for_ci() -> None:
    runner, _ = _in_flight()
    data = _check(runner, deploy_apps.renamed).to_json()
    assert (data["checked"], data["broken"]) == (3, 3)
    assert json.loads(json.dumps(data))["runs"][0]["position"] == "0002"


def test_the_cli_checks_a_ledger_table_and_fails_the_deploy_that_would_break_runs(
    mock_aws_session: None,
    make_tables: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from durable import cli
    from durable.adapters.dynamodb import DynamoLedger
    from durable.core.clock import FakeClock
    from tests.conftest import aws_client

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = aws_client("dynamodb", None)
    table, _ = make_tables(client)
    engine = Engine(
        deploy_apps.old,
        DynamoLedger(client, table),
        MemoryInvoker(),
        MemoryEffectStore(),
        clock=FakeClock(),
    )
    for order in ("a", "b"):
        assert engine.resume(engine.start("order", order).run_id).result == "suspended"
    app = "tests.unit.deploy_apps:"
    assert cli.main(["check-deploy", "--app", app + "same", "--table", table]) == 0
    out = capsys.readouterr().out
    assert "checked 2 unfinished runs" in out and "replays cleanly" in out
    assert cli.main(["check-deploy", "--app", app + "renamed", "--table", table]) == 1
    out = capsys.readouterr().out
    assert "2 run(s) would break" in out and "at 0002" in out
    assert cli.main(["check-deploy", "--app", app + "renamed", "--table", table, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["broken"] == 2
    assert cli.main(["check-deploy", "--app", "tests.unit.deploy_apps:nothing"]) == 1
    assert "cannot load --app" in capsys.readouterr().err


def test_a_run_with_sealed_values_checked_without_keys_is_unchecked_not_ok() -> None:
    """The check cannot open a sealed input without the stack's key service: it must not
    vouch for the run (the gate and the CLI fail on unchecked runs)."""
    from tests.unit.test_secrets import payment_app

    runner = LocalRunner(payment_app([]))
    runner.start("pay", {"customer": "c1", "card": "tok_4242"})
    runner.run_until_idle()  # asleep after its first step, the card sealed in the input
    engine = Engine(
        payment_app([]), ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
    )
    report = check_deploy(engine, ["pay"])
    assert [r.verdict for r in report.runs] == ["unchecked"]
    assert report.unchecked and not report.broken
    assert "SecretsNeedKeys" in (report.runs[0].called or "")
    assert "tok_4242" not in json.dumps(report.to_json())


def test_a_retyped_input_fails_the_runs_that_stored_the_old_one() -> None:
    runner, waiting = _in_flight()
    report = _check(runner, deploy_apps.retyped)
    assert sorted(r.run_id for r in report.broken) == sorted(waiting)
    assert {r.verdict for r in report.runs} == {"fails"}
    assert "ValidationError" in (report.runs[0].called or "")
    assert "new version" in report.runs[0].advice


def _callback_then_step(step_name: str) -> App:
    app = App()

    @app.workflow(name="flow")
    def flow(ctx: Context) -> str:
        approval = ctx.create_callback("approval")  # does not wait: the code goes on
        ctx.step(lambda: "sent", name=step_name)
        result: str = approval.result()
        return result

    return app


def test_a_pending_callback_does_not_end_the_check_before_the_records_after_it() -> None:
    """GIVEN a run that created a callback (still pending at 0001) and then recorded a
    step (0002) WHEN the step is renamed THEN the check replays past the pending callback
    and names the divergence at 0002; the same code passes."""
    runner = LocalRunner(_callback_then_step("notify"))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()

    def check(app: App) -> Any:
        engine = Engine(
            app, ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
        )
        return check_deploy(engine, ["flow"])

    (renamed,) = check(_callback_then_step("notify-v2")).runs
    assert (renamed.run_id, renamed.verdict, renamed.position) == (
        run_id,
        "nondeterministic",
        "0002",
    )
    assert [r.verdict for r in check(_callback_then_step("notify")).runs] == ["ok"]


def test_a_caught_failure_does_not_end_the_check_before_the_records_after_it() -> None:
    """A step failed for good, the workflow caught it and went on: the check replays the
    failure into the code (which catches it again) and checks what follows."""
    from durable import RetryPolicy, StepFailed

    def make(second: str) -> App:
        app = App()

        def broken() -> None:
            raise ValueError("no")

        @app.workflow(name="flow")
        def flow(ctx: Context) -> str:
            with contextlib.suppress(StepFailed):
                ctx.step(broken, retry=RetryPolicy(max_attempts=1))
            ctx.step(lambda: "ok", name=second)
            ctx.sleep(timedelta(hours=1))
            return "done"

        return app

    runner = LocalRunner(make("after"))
    runner.start("flow")
    runner.run_until_idle()
    engine = Engine(
        make("later"), ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
    )
    (verdict,) = check_deploy(engine, ["flow"]).runs
    assert (verdict.verdict, verdict.position) == ("nondeterministic", "0002")
