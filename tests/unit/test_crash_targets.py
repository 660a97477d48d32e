"""Crash injection targets: a public list, and an unknown target refused by name.

A crash point on a method that does not exist (``ledger.write_steps``) used to be accepted
and never fired, so a test that relied on it passed without crashing anything.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from durable import App, Context
from durable.core.ports import CRASH_TARGETS, EffectStore, Invoker, Ledger, PayloadStore, Timers
from durable.errors import InvalidInput
from durable.settings import Settings
from durable.testing import LocalRunner

PORTS: dict[str, Any] = {
    "ledger": Ledger,
    "effects": EffectStore,
    "timers": Timers,
    "invoker": Invoker,
    "payloads": PayloadStore,
}
ENV = {
    "DURABLE_APP": "m:app",
    "DURABLE_LEDGER_TABLE": "led",
    "DURABLE_IDEMPOTENCY_TABLE": "idm",
}

app = App()


@app.step
def double(n: int) -> int:
    return n * 2


@app.workflow(name="twice", version=1)
def twice(ctx: Context, n: int) -> int:
    return double(double(n))


def test_the_targets_are_every_method_of_the_five_ports() -> None:
    """GIVEN the port protocols WHEN their public methods are listed THEN they are exactly
    CRASH_TARGETS (the constant cannot drift from the ports). The ledger's are declared
    by the Protocols it joins (``LedgerReads``, ``LedgerWrites``): its whole MRO counts."""
    methods = {
        f"{port}.{name}"
        for port, protocol in PORTS.items()
        for declaring in protocol.__mro__
        if declaring.__module__ == protocol.__module__
        for name, member in vars(declaring).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
    assert set(CRASH_TARGETS) == methods
    assert list(CRASH_TARGETS) == sorted(CRASH_TARGETS)


def test_every_port_call_a_run_makes_is_a_target() -> None:
    """GIVEN a run driven to its end WHEN the runner's call counts are read THEN each
    counted port method is one a crash can target."""
    runner = LocalRunner(app)
    runner.start("twice", 3)
    runner.run_until_idle()
    assert runner.call_count("ledger.write_step") >= 2
    assert set(runner.plan.counts) <= set(CRASH_TARGETS)


def test_local_runner_refuses_an_unknown_target_naming_the_valid_ones() -> None:
    runner = LocalRunner(app)
    with pytest.raises(ValueError) as info:
        runner.crash_at("ledger.write_steps", call=1)
    assert "unknown crash target 'ledger.write_steps'" in str(info.value)
    assert "ledger.write_step, " in str(info.value)
    assert all(target in str(info.value) for target in CRASH_TARGETS)
    assert runner.plan.points == []


def test_local_runner_refuses_a_call_number_below_one_and_an_unknown_moment() -> None:
    runner = LocalRunner(app)
    with pytest.raises(ValueError, match="call must be 1 or more"):
        runner.crash_at("ledger.write_step", call=0)
    with pytest.raises(ValueError, match="'before' or 'after'"):
        runner.crash_at("ledger.write_step", when="during")  # type: ignore[arg-type]


def test_a_known_target_still_fires() -> None:
    runner = LocalRunner(app)
    runner.crash_at("ledger.write_step", call=1, when="after")
    run = runner.start("twice", 3)
    runner.run_until_idle()
    assert [str(c) for c in runner.crashes] == ["crash after ledger.write_step"]
    runner.advance(minutes=10)  # past the dead worker's lease: another one takes over
    assert runner.get_run(run.run_id).output == "12"


def test_the_setting_refuses_an_unknown_target_naming_the_valid_ones() -> None:
    """GIVEN DURABLE_CRASH_AT on a well-formed but unknown method WHEN settings are read
    THEN the variable is refused with the list of targets (it used to pass and never fire)."""
    with pytest.raises(InvalidInput) as info:
        Settings.from_env({**ENV, "DURABLE_CRASH_AT": "ledger.write_steps:1:before"})
    assert info.value.field == "DURABLE_CRASH_AT"
    assert "unknown crash target 'ledger.write_steps'" in str(info.value)
    assert "ledger.write_step_fenced" in str(info.value)
    ok = Settings.from_env({**ENV, "DURABLE_CRASH_AT": "timers.arm:2:after:/tmp/once"})
    assert ok.crash_at == "timers.arm:2:after:/tmp/once"
