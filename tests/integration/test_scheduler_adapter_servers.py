"""The Scheduler timer adapter on real servers over HTTP: moto's server (integration tier) and
LocalStack's Scheduler API (localstack tier).

The scenarios are the unit suite's own (``tests/unit/test_scheduler_adapter.py``, moto
in-process), collected again here: every test there that talks to a server (it takes ``client``
or ``timers``) runs here once per server, with only the ``client`` fixture replaced. New
scenarios there are covered here without copying them. The servers differ where it matters to
the adapter: a duplicate name must come back as ``ConflictException`` (arming is idempotent by
it), LocalStack validates the ``at()`` expression, and both answer a missing group with a 500.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import scheduler_client_on
from tests.unit import test_scheduler_adapter as unit_suite

# The unit suite's `timers` fixture, bound here so that it resolves `client` below.
timers = unit_suite.timers
GROUP = "durable-test"


@pytest.fixture(
    params=[
        pytest.param("moto-server", marks=pytest.mark.integration),
        pytest.param("localstack", marks=pytest.mark.localstack),
    ]
)
def client(request: pytest.FixtureRequest) -> Any:
    scheduler = scheduler_client_on(request.param, request)
    scheduler.create_schedule_group(Name=GROUP)
    return scheduler


def _talks_to_a_server(test: Callable[..., Any]) -> bool:
    return bool({"client", "timers"} & set(inspect.signature(test).parameters))


for _name, _test in vars(unit_suite).copy().items():
    if _name.startswith("test_") and callable(_test) and _talks_to_a_server(_test):
        globals()[_name] = _test


def test_the_unit_scenarios_are_collected_here() -> None:
    # Guards the re-collection above: an import or filter change must not quietly drop them.
    collected = [n for n in globals() if n.startswith("test_") and n in vars(unit_suite)]
    assert len(collected) >= 4, collected


def test_a_duplicate_name_is_a_conflict_on_the_server(client: Any) -> None:
    # GIVEN a schedule
    request: dict[str, Any] = {
        "Name": "RUN-0001",
        "GroupName": GROUP,
        "ScheduleExpression": "at(2030-01-01T00:00:00)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {"Arn": unit_suite.TARGET, "RoleArn": unit_suite.ROLE, "Input": "{}"},
    }
    client.create_schedule(**request)
    # WHEN the same name is created again THEN the server says ConflictException, the code
    # SchedulerTimers.arm treats as "already armed"
    with pytest.raises(Exception) as info:
        client.create_schedule(**request)
    assert info.value.response["Error"]["Code"] == "ConflictException"  # type: ignore[attr-defined]


def test_an_armed_timer_round_trips_through_the_server(timers: Any, client: Any) -> None:
    # GIVEN a wake-up in the future WHEN armed THEN the server holds exactly what arm sent
    timers.arm(unit_suite.RUN, "0002", datetime(2030, 5, 6, 7, 8, 9, 1, tzinfo=UTC))
    got = client.get_schedule(Name=f"{unit_suite.RUN}-0002", GroupName=GROUP)
    assert got["ScheduleExpression"] == "at(2030-05-06T07:08:10)"
    assert got["State"] == "ENABLED"
