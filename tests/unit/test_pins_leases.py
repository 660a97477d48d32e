"""Pins on the lease rules (durable/core/leases.py): each test names the mutants it kills.

Mutant ids are those of ``python -m tests.mutation --module durable/core/leases.py --list``;
``--show ID`` prints one. The ledger-level tests run on every backend (memory and moto in the
unit tier), so they pin the memory ledger's guard check and the DynamoDB condition too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable.core.leases import (
    IMMUTABLE_RUN_FIELDS,
    apply_changes,
    claim_kind,
    guard_holds,
    normalize_changes,
)
from durable.core.model import RunError, RunRecord, RunStatus, StepStatus
from durable.core.ports import ConditionFailed, RunGuard
from tests.support.records import make_run, make_step, t

# A run held by w1 under fence 3, inbox 2, RUNNING, no cancel request: the guard below holds.
HELD = make_run(status=RunStatus.RUNNING, lease_owner="w1", lease_until=t(60), fence=3, inbox=2)
GOOD = RunGuard(fence=3, owner="w1", inbox=2, statuses=("RUNNING",), no_cancel=True)

# One clause wrong at a time: (what is wrong, the guard, the run).
WRONG: list[tuple[str, RunGuard, RunRecord]] = [
    ("fence", replace(GOOD, fence=2), HELD),
    ("owner", replace(GOOD, owner="w2"), HELD),
    ("inbox", replace(GOOD, inbox=1), HELD),
    ("status", replace(GOOD, statuses=("COMPENSATING",)), HELD),
    ("cancel", GOOD, replace(HELD, cancel_requested=True)),
]


# --- guard_holds ------------------------------------------------------------------------


def test_the_guard_holds_when_every_clause_holds() -> None:
    """GIVEN the run's own fence, owner, inbox and status and no cancel request
    WHEN the guard is checked THEN it holds; and the clauses left out (no inbox, no status
    list, no_cancel off) hold whatever the run says.

    Kills: leases-c65461b3 / 247fa0f4 / 5462ec81 (a failed clause's ``return False`` ->
    ``True`` is caught with the wrong cases below), leases-2ab21ccf (return None),
    leases-7ab47030 (``not`` removed), leases-3a7d5f57 (no_cancel ``and`` -> ``or``),
    leases-65d57379 / 2b33fa93 (``and`` -> ``or`` on the optional clauses)."""
    assert guard_holds(HELD, GOOD) is True
    loose = RunGuard(fence=3, owner="w1")
    other = replace(HELD, inbox=9, status=RunStatus.COMPENSATING, cancel_requested=True)
    assert guard_holds(other, loose) is True
    assert guard_holds(replace(HELD, cancel_requested=True), loose) is True


@pytest.mark.parametrize(("wrong", "guard", "run"), WRONG, ids=[w[0] for w in WRONG])
def test_the_guard_fails_on_any_one_wrong_clause(wrong: str, guard: RunGuard, run: Any) -> None:
    """GIVEN a guard with exactly one clause that does not match the run (fence, owner,
    inbox, status or a cancel request) WHEN it is checked THEN it fails.

    Kills every break of ``guard_holds``: leases-674d4df8 / 21a5f3d2 / b5ee41fd / 5be50560
    (fence and owner), leases-96997b0d / 16f991cf / f9a275b7 (inbox), leases-a2822e79 /
    ff21296a (status), leases-c65461b3 / 247fa0f4 / 5462ec81 (``False`` -> ``True``)."""
    assert guard_holds(run, guard) is False, wrong


@pytest.mark.parametrize(("wrong", "guard", "run"), WRONG, ids=[w[0] for w in WRONG])
def test_a_write_under_a_wrong_guard_changes_nothing(
    ledger: Any, wrong: str, guard: RunGuard, run: RunRecord
) -> None:
    """GIVEN a held run and a guard with one wrong clause
    WHEN the owner updates the run, or checkpoints a step (the fenced write), under it
    THEN both raise ConditionFailed with the stored run, and neither item changes.

    On the memory ledger this kills the negated or dropped guard check in
    ``MemoryLedger.update_run`` / ``write_step_fenced``; on moto, the DynamoDB guard
    condition's clauses (``_guard_condition``)."""
    ledger.create_run(run)
    with pytest.raises(ConditionFailed) as info:
        ledger.update_run(run.run_id, guard, {"status": "SUCCEEDED", "updated_at": t(5)})
    assert info.value.current == run
    step = make_step(status=StepStatus.RUNNING, output=None, checkpoint={"state": "1"})
    with pytest.raises(ConditionFailed) as fenced:
        ledger.write_step_fenced(step, guard, {"lease_until": t(500)})
    assert fenced.value.current == run
    assert ledger.get_run(run.run_id) == run, wrong
    assert ledger.load(run.run_id).steps == {}


def test_a_write_under_the_right_guard_lands(ledger: Any) -> None:
    """GIVEN a held run WHEN the owner writes under a guard that holds THEN both writes land
    (the wrong-guard cases above fail for the clause, not for any guard).

    Kills the guard check turned always-failing (``guard_holds`` -> ``not guard_holds``)."""
    ledger.create_run(HELD)
    step = make_step(status=StepStatus.RUNNING, output=None, checkpoint={"state": "1"})
    assert ledger.write_step_fenced(step, GOOD, {"lease_until": t(500)}) is True
    new = ledger.update_run("RUN1", GOOD, {"status": "WAITING", "updated_at": t(5)})
    assert (new.status, new.lease_until) == (RunStatus.WAITING, t(500))


# --- claim_kind -------------------------------------------------------------------------


def test_claim_kind_names_how_a_run_may_be_claimed() -> None:
    """GIVEN runs with no lease, the claimant's own lease, another's live or expired lease
    WHEN claim_kind is asked THEN "free", "free", None and "takeover".

    Kills leases-32a6b7f0 (``"free"`` -> ``""``: every caller only tests ``is None``)."""
    free = make_run(status=RunStatus.PENDING)
    assert claim_kind(free, "w1", t(100)) == "free"
    assert claim_kind(replace(HELD, lease_until=t(60)), "w1", t(100)) == "free"
    assert claim_kind(replace(HELD, lease_until=t(60)), "w2", t(30)) is None
    assert claim_kind(replace(HELD, lease_until=t(60)), "w2", t(100)) == "takeover"
    assert claim_kind(replace(HELD, status=RunStatus.SUCCEEDED), "w1", t(100)) is None


def test_a_lease_ending_exactly_at_the_stale_point_is_not_taken_over(ledger: Any) -> None:
    """GIVEN w1's lease ending at 60 s and a 5 s skew margin
    WHEN w2 claims at 65 s (stale_before = 60 s, exactly the lease's end) THEN the claim
    fails; one second later it takes over.

    Kills leases-68b2a37e (``lease_until < stale_before`` -> ``<=``)."""
    assert claim_kind(HELD, "w2", t(60)) is None
    ledger.create_run(make_run())
    ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    at_the_point = ledger.claim("RUN1", "w2", now=t(65), lease_until=t(125), stale_before=t(60))
    assert at_the_point is None
    assert ledger.get_run("RUN1").lease_owner == "w1"
    past = ledger.claim("RUN1", "w2", now=t(66), lease_until=t(126), stale_before=t(61))
    assert past is not None and past.took_over


# --- changes to the run item ------------------------------------------------------------


@pytest.mark.parametrize("field", sorted(IMMUTABLE_RUN_FIELDS))
def test_the_immutable_run_fields_never_change(ledger: Any, field: str) -> None:
    """GIVEN a held run WHEN its owner tries to change run_id, workflow, created_at, input or
    input_hash THEN the change is refused naming the field, and nothing is written.

    Kills leases-88d93f85 (``check_changes(changes)`` deleted from normalize_changes),
    leases-c9d4fd0b / 6e768fee / 4b7d18a4 (the frozen-field check), and each name in
    IMMUTABLE_RUN_FIELDS -> "": leases-58dfbdf8 (run_id), fceeafc8 (workflow), f7895945
    (created_at), 2479ad34 (input), 9fc960e3 (input_hash)."""
    with pytest.raises(ValueError, match=field):
        normalize_changes({field: "changed"})
    ledger.create_run(HELD)
    with pytest.raises(ValueError, match=field):
        ledger.update_run("RUN1", GOOD, {field: "changed", "updated_at": t(5)})
    assert ledger.get_run("RUN1") == HELD


def test_an_unknown_run_field_is_refused() -> None:
    """GIVEN a change to a field the run item does not have WHEN it is applied THEN
    ValueError names it.

    Kills leases-9ee556e2 (its ``raise`` deleted), leases-0c30490c / d5d376df / 1c07ae7a."""
    with pytest.raises(ValueError, match="colour"):
        apply_changes(HELD, {"colour": "red"})
    assert apply_changes(HELD, {"inbox": 4}).inbox == 4  # a known field passes


def test_an_error_dict_is_stored_as_a_run_error(ledger: Any) -> None:
    """GIVEN a change carrying the error in its wire form (a dict) WHEN it is applied, or
    written by the owner THEN the run holds a RunError with every field.

    Kills leases-0dbd6632 / 0ba77eba / ebbd8ab6 / 12a18ef0 / 9f02284f (the error dict not
    converted: a dict stays, or ``from_dict`` reads the wrong key)."""
    wire = {"type": "ValueError", "message": "bad", "retryable": True, "position": "0002"}
    expected = RunError("ValueError", "bad", True, "0002")
    assert apply_changes(HELD, {"error": wire}).error == expected
    ledger.create_run(HELD)
    stored = ledger.update_run("RUN1", GOOD, {"error": wire})
    assert stored.error == expected
    assert ledger.get_run("RUN1").error == expected


@pytest.mark.parametrize("flag", ["needs_attention", "cancel_requested", "cancel_compensate"])
def test_a_flag_set_to_none_is_stored_false(ledger: Any, flag: str) -> None:
    """GIVEN a run with a flag set WHEN a change sets it to None (remove) THEN it reads False,
    never None, on the record and in the ledger.

    Kills leases-2d8fe266 / 50c9755f / 9eed8720 (a flag's name -> ""), leases-786572ed
    (``out[flag] = False`` deleted), leases-235a39da (``False`` -> ``True``)."""
    flagged = apply_changes(HELD, {flag: True})
    assert getattr(apply_changes(flagged, {flag: None}), flag) is False
    ledger.create_run(flagged)
    stored = ledger.update_run("RUN1", RunGuard(3, "w1"), {flag: None})
    assert getattr(stored, flag) is False
    assert getattr(ledger.get_run("RUN1"), flag) is False
