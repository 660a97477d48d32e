"""Pins for ``durable.core.flow``'s edges: every bound of a limit's declaration, the key's
reading (dotted fields, objects, functions, the length cut), a gate with more holders
than its (lowered) limit, bookings kept in order against a clock that steps back, and
the longest line one gate item holds. Each kills a mutant the broader tests let by."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from durable import App, Concurrency, Context, RateLimit
from durable.core.flow import GateState, book, key_value, leave
from durable.core.model import RunStatus, format_time, parse_time
from durable.errors import InvalidInput, RegistrationError
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit
T0 = parse_time("2026-12-04T12:00:00.000Z")


def test_the_limits_bounds_are_inclusive() -> None:
    assert Concurrency(1000).limit == 1000 and Concurrency(1).limit == 1
    with pytest.raises(RegistrationError, match="concurrency limit must be an int from 1"):
        Concurrency(1001)
    assert RateLimit(1, timedelta(seconds=1)).limit == 1
    assert RateLimit(1000, timedelta(minutes=1)).limit == 1000
    with pytest.raises(RegistrationError, match="rate limit must be an int from 1 to 1000"):
        RateLimit(1001, timedelta(minutes=1))
    with pytest.raises(RegistrationError, match=r"^concurrency key must be a field name"):
        Concurrency(2, key="")
    with pytest.raises(RegistrationError, match=r"^rate limit key must be a field name"):
        RateLimit(2, timedelta(minutes=1), key="a.")


def test_a_key_is_read_from_fields_objects_or_a_function() -> None:
    order = {"customer": {"id": 42}, "note": "x"}
    assert key_value("customer.id", order, "w") == "42"
    assert key_value(lambda v: v["customer"]["id"] * 2, order, "w") == "84"
    assert key_value(None, order, "w") == ""
    typed = SimpleNamespace(customer=SimpleNamespace(id="acme"))
    assert key_value("customer.id", typed, "w") == "acme"
    assert key_value("customer.id", {"customer": typed.customer}, "w") == "acme"
    with pytest.raises(InvalidInput) as missing:
        key_value("items", {"a": 1}, "w")  # a dict's methods are not its fields
    assert missing.value.field == "input.items"
    assert key_value("k", {"k": "x" * 500}, "w") == "x" * 128


def test_leaving_a_gate_over_its_lowered_limit_wakes_nobody() -> None:
    crowded = GateState(holders=("a", "b", "c"), queue=("q",))
    assert leave(crowded, ("a",), 1) == (GateState(holders=("b", "c"), queue=("q",)), ())
    one_free = GateState(holders=("a", "b"), queue=("q1", "q2", "q3"))
    new, wake = leave(one_free, ("a",), 2)
    assert wake == ("q1",) and new is not None and new.queue == ("q1", "q2", "q3")


def test_bookings_stay_in_order_when_a_workers_clock_is_behind() -> None:
    later = format_time(T0 + timedelta(seconds=10))
    state = GateState(booked=(format_time(T0), later))
    new, at = book(state, T0, 5, timedelta(minutes=1))
    assert at == T0 + timedelta(seconds=10)
    assert new.booked == (format_time(T0), later, later)


def test_a_line_as_long_as_one_item_holds_takes_nobody_more() -> None:
    app = App()

    @app.workflow(name="one", concurrency=1)
    def one(ctx: Context, n: int) -> int:
        ctx.wait_for_signal("go")
        return n

    r = LocalRunner(app)
    first = r.start("one", 0).run_id
    r.run_until_idle()
    line = tuple(f"R{i:05d}" for i in range(5000))  # the documented cap
    assert r.memory_ledger.write_gate("C#one#", GateState(holders=(first,), queue=line, version=1))
    late = r.start("one", 1).run_id
    r.run_until_idle()
    run = r.get_run(late)
    assert run.status == RunStatus.PENDING and run.queued_at is None  # not in line
    assert run.due_at == format_time(r.clock.now() + r.config.slot_recheck)
    assert r.memory_ledger.read_gate("C#one#").queue == line


def test_no_two_workflow_and_key_pairs_share_a_gate() -> None:
    from durable.core.flow import gate_name

    assert gate_name("C", "a#b", "c") != gate_name("C", "a", "b#c")
    assert gate_name("C", "a%23b", "") != gate_name("C", "a#b", "")
    assert gate_name("C", "crm-sync v2/eu", "acme") == "C#crm-sync v2/eu#acme"  # readable


def test_a_key_functions_failure_names_what_it_looked_for_and_the_function() -> None:
    """The field is the key a KeyError names (``input.region``), else the input; the
    message names the function, or says "key function" for a callable without a name.
    Kills the ``e.args`` / ``isinstance(e, KeyError)`` and the name fallback mutants."""

    def by_region(job: dict[str, str]) -> str:
        return job["region"]

    def bare_key_error(job: object) -> str:
        raise KeyError

    def value_error(job: object) -> str:
        raise ValueError("region")

    class NoName:
        def __call__(self, job: object) -> str:
            raise KeyError("lane")

    cases: list[tuple[Any, str, str]] = [
        (by_region, "input.region", "by_region"),
        (bare_key_error, "input", "bare_key_error"),
        (value_error, "input", "value_error"),
        (NoName(), "input.lane", "key function"),
    ]
    for fn, field, named in cases:
        with pytest.raises(InvalidInput) as e:
            key_value(fn, {}, "w")
        assert e.value.field == field, (fn, e.value.field)
        assert f"the key {named} finds" in str(e.value)


def test_a_null_key_names_the_field_or_the_function() -> None:
    with pytest.raises(InvalidInput) as by_field:
        key_value("customer.id", {"customer": {"id": None}}, "w")
    assert by_field.value.field == "input.customer.id"
    assert "per 'customer.id', which is null" in str(by_field.value)

    def lane(job: object) -> None:
        return None

    with pytest.raises(InvalidInput) as by_fn:
        key_value(lane, {}, "w")
    assert by_fn.value.field == "input" and "per 'lane', which is null" in str(by_fn.value)
    with pytest.raises(InvalidInput, match="per 'key function', which is null"):
        key_value(type("Unnamed", (), {"__call__": lambda self, job: None})(), {}, "w")


def test_a_sealed_key_names_the_field_or_the_input() -> None:
    sealed = {"card": {"$sealed": "AAAA"}}
    with pytest.raises(InvalidInput) as by_field:
        key_value("card", sealed, "w")
    assert by_field.value.field == "input.card" and "per input.card, a secret" in str(
        by_field.value
    )
    with pytest.raises(InvalidInput) as by_fn:
        key_value(lambda job: job["card"], sealed, "w")
    assert by_fn.value.field == "input" and "per input, a secret" in str(by_fn.value)
