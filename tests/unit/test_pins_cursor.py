"""Pins for ``durable.engine.cursor``: which positions belong to a cursor's level (the mutants
of ``python -m tests.mutation --module cursor`` each test kills are named)."""

from __future__ import annotations

from durable.engine.cursor import Cursor, bind_cursor, bound_cursor


def test_a_new_cursor_starts_before_its_first_position_with_nothing_replayed() -> None:
    # cursor-552432ba (frontier 0 -> 1)
    cursor = Cursor()
    assert (cursor.counter, cursor.frontier, cursor.limit) == (0, 0, None)
    assert cursor.path(1) == "0001" and Cursor(prefix=(4, 2)).path(3) == "0004.0002.0003"


def test_own_index_is_the_index_at_the_cursors_level_of_positions_under_it() -> None:
    # cursor-efcf9cb8 (or -> and), cursor-ee737f55 (len(key) <= depth -> <)
    branch = Cursor(prefix=(1,))
    assert branch.own_index("0001.0003") == 3
    assert branch.own_index("0001.0003.0002") == 3  # a nested batch's record: its call's
    assert branch.own_index("0002.0001") is None  # another batch's branch
    assert branch.own_index("0001") is None  # the batch itself, one level up
    assert Cursor().own_index("0007.0001") == 7


def test_last_index_is_zero_without_a_position_of_its_own() -> None:
    # cursor-70c1e2a8 (default 0 -> 1)
    branch = Cursor(prefix=(5, 2))
    assert branch.last_index([]) == 0
    assert branch.last_index(["0005", "0005.0001.0004"]) == 0
    assert branch.last_index(["0005.0002.0001", "0005.0002.0003.0001.0001"]) == 3


def test_a_bound_cursor_is_found_only_for_its_own_execution() -> None:
    owner, other, cursor = object(), object(), Cursor(prefix=(1, 1))
    assert bound_cursor(owner) is None
    with bind_cursor(owner, cursor):
        assert bound_cursor(owner) is cursor and bound_cursor(other) is None
    assert bound_cursor(owner) is None


def test_halted_looks_up_through_the_batches_a_branch_is_nested_in() -> None:
    outer = Cursor(prefix=(1, 1))
    inner = Cursor(prefix=(1, 1, 1, 2), parent=outer)
    assert not inner.halted()
    outer.stopped = True
    assert inner.halted() and outer.halted()
