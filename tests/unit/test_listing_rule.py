"""Where a run sits in its workflow's listing (``durable.core.leases``: ``listing_key``,
``relisted``, ``reopening``, ``listing_phase``), the one rule both ledgers follow.

The listing index's key holds a run's phase and when it began: it moves when the run
ends and when a retry reopens it, and for nothing else (each move is a delete and a put
in the index); a listing by status reads the phase that holds the status."""

from __future__ import annotations

import pytest

from durable.core.leases import listing_key, listing_phase, relisted, reopening
from durable.core.model import RunStatus

OPEN = [s.value for s in RunStatus if not s.terminal]
ENDED = [s.value for s in RunStatus if s.terminal]


@pytest.mark.parametrize("status", OPEN)
def test_a_run_created_unfinished_is_keyed_by_its_creation(status: str) -> None:
    assert listing_key("R1", status, "c", "u") == "open#c#R1"


@pytest.mark.parametrize("status", ENDED)
def test_a_run_created_ended_is_keyed_by_its_end(status: str) -> None:
    assert listing_key("R1", status, "c", "u") == "done#u#R1"


@pytest.mark.parametrize("status", ENDED)
def test_an_end_moves_the_key(status: str) -> None:
    assert relisted("R1", {"status": status, "updated_at": "u"}) == "done#u#R1"
    assert relisted("R1", {"status": RunStatus(status), "updated_at": "u"}) == "done#u#R1"


@pytest.mark.parametrize("status", OPEN)
def test_a_change_within_the_open_phase_leaves_the_key(status: str) -> None:
    assert relisted("R1", {"status": status, "updated_at": "u"}) is None


def test_a_reopen_moves_the_key_back_and_nothing_else_does() -> None:
    assert relisted("R1", {"status": "PENDING", "updated_at": "u"}, reopens=True) == "open#u#R1"
    assert relisted("R1", {"status": "PENDING"}, reopens=True) is None  # no time: no key
    assert relisted("R1", {"updated_at": "u"}, reopens=True) is None
    assert relisted("R1", {"status": "SUCCEEDED"}) is None
    assert relisted("R1", {"lease_until": "u", "updated_at": "u"}) is None


def test_only_an_operation_on_ended_runs_that_opens_one_reopens() -> None:
    assert reopening(("FAILED",), {"status": "PENDING", "updated_at": "u"})
    assert reopening(("FAILED", "CANCELED"), {"status": RunStatus.PENDING})
    # a cancel (from open statuses to an ended one), an open run's nudge, an operation on
    # ended runs that keeps them ended, one that sets no status, one with no statuses
    assert not reopening(("RUNNING", "WAITING"), {"status": "CANCELED"})
    assert not reopening(("RUNNING", "WAITING"), {"status": "PENDING"})
    assert not reopening(("FAILED", "RUNNING"), {"status": "PENDING"})
    assert not reopening(("FAILED",), {"status": "FAILED"})
    assert not reopening(("FAILED",), {"needs_attention": False})
    assert not reopening((), {"status": "PENDING"})


def test_a_listing_reads_the_phase_that_holds_its_status() -> None:
    assert listing_phase(None) is None
    for status in OPEN:
        assert listing_phase(status) == "open#"
    for status in ENDED:
        assert listing_phase(status) == "done#"
