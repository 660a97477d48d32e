"""``ctx.changed(id)``: a fix shipped to runs in flight without a new version."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable import App, Context, RunStatus
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.engine.deploy_check import ReadOnlyLedger, check_deploy
from durable.engine.engine import Engine
from durable.errors import InvalidInput
from durable.testing import LocalRunner

CALLS: list[str] = []


def _app(variant: str) -> App:
    """``order``: tax, sleep, ship. Variants change the tax step before the sleep or the
    ship step after it, with or without ``ctx.changed``."""
    app = App()

    def tax(amount: int) -> int:
        CALLS.append("tax")
        return amount // 10

    def tax_rounded(amount: int) -> int:
        CALLS.append("tax_rounded")
        return round(amount / 10)

    def ship(total: int) -> str:
        CALLS.append("ship")
        return f"shipped {total}"

    def ship_tracked(total: int) -> str:
        CALLS.append("ship_tracked")
        return f"shipped {total} with tracking"

    @app.workflow(name="order")
    def order(ctx: Context, amount: int) -> str:
        new_tax = variant == "tax-renamed" or (
            variant == "tax-patched" and ctx.changed("round-tax")
        )
        if new_tax:
            total = amount + ctx.step(tax_rounded, amount)
        else:
            total = amount + ctx.step(tax, amount)
        ctx.sleep(timedelta(hours=1))
        if variant == "ship-patched" and ctx.changed("tracking"):
            return ctx.step(ship_tracked, total)
        return ctx.step(ship, total)

    return app


def _asleep(variant: str = "old") -> tuple[LocalRunner, str]:
    runner = LocalRunner(_app(variant))
    run = runner.start("order", 95)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    return runner, run.run_id


def _deploy(runner: LocalRunner, variant: str) -> None:
    runner.engine.app = _app(variant)


def _broken(runner: LocalRunner, variant: str) -> int:
    engine = Engine(
        _app(variant), ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
    )
    return len(check_deploy(engine, ["order"]).broken)


def test_a_run_past_the_change_keeps_the_old_code_and_a_new_run_takes_the_new() -> None:
    runner, old_run = _asleep()
    assert _broken(runner, "tax-renamed") == 1  # without the patch, the deploy would break it
    assert _broken(runner, "tax-patched") == 0
    _deploy(runner, "tax-patched")
    new_run = runner.start("order", 95).run_id
    runner.run_until_idle()
    runner.advance(hours=1)
    assert runner.get_run(old_run).output == '"shipped 104"'  # 95 // 10 = 9: the old tax
    assert runner.get_run(new_run).output == '"shipped 105"'  # round(9.5) = 10: the new
    kinds = [(s.position, s.name) for s in runner.history(new_run)]
    assert kinds[0] == ("0001", "changed:round-tax")  # the marker takes a position
    assert runner.history(old_run)[0].name.endswith(".tax")  # no position used here


def test_a_run_that_reaches_the_change_after_the_deploy_takes_the_new_code_for_good() -> None:
    runner, run_id = _asleep()
    assert _broken(runner, "ship-patched") == 0
    _deploy(runner, "ship-patched")
    CALLS.clear()
    runner.advance(hours=1)
    assert runner.get_run(run_id).output == '"shipped 104 with tracking"'
    assert CALLS == ["ship_tracked"]
    positions = [(s.position, s.name) for s in runner.history(run_id)]
    assert positions[-2][1] == "changed:tracking" and positions[-2][0] == "0003"
    assert positions[-1][0] == "0004" and positions[-1][1].endswith("ship_tracked")
    # a replay finds its marker: True again, nothing runs twice, nothing diverges
    assert _broken(runner, "ship-patched") == 0


def test_a_patch_is_named_plainly() -> None:
    app = App()

    @app.workflow(name="bad")
    def bad(ctx: Context) -> bool:
        return ctx.changed("has spaces")

    runner = LocalRunner(app)
    run = runner.start("bad")
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and "fix-tax-rounding" in failed.error.message


def test_the_check_of_a_patch_at_the_frontier_writes_nothing() -> None:
    runner, run_id = _asleep()
    before = runner.memory_ledger.load(run_id)
    assert _broken(runner, "ship-patched") == 0
    assert runner.memory_ledger.load(run_id) == before


@pytest.mark.parametrize("bad", ["", "x" * 101, "-leading", "a b", "a/b"])
def test_patch_ids_are_checked(bad: str) -> None:
    from durable.engine.execution import check_patch_id

    with pytest.raises(InvalidInput, match=r"ctx\.changed"):
        check_patch_id(bad)
    assert check_patch_id("fix-tax.rounding_2") == "fix-tax.rounding_2"
