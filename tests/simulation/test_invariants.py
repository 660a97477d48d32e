"""Each invariant fires on the violation it names and stays quiet otherwise."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from durable.core.config import EngineConfig
from durable.core.ids import next_keyed_run_id
from durable.core.model import (
    RunHistory,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
)
from durable.core.serde import canonical_json
from durable.core.tokens import token_hash
from tests.simulation.invariants import (
    Final,
    FinishedRunMonitor,
    ProgressMonitor,
    StuckMonitor,
    _key,
    at_most_once_body_per_attempt,
    attached_result_is_chain_end,
    child_reports_match,
    effect_once_per_key,
    effect_once_per_key_with_zombies,
    key_names_latest_run,
    no_body_after_cancel,
    no_stuck_runs,
    progress_is_the_runs_own,
    replay_values_equal,
    signals_survive_continue_as_new,
    skip_chains_going,
    successor_only_of_succeeded,
)
from tests.simulation.journal import BodyStart, Event, Journal, Mail, Stamp, typed
from tests.simulation.programs import progress_note

T0 = "2026-01-01T00:00:00.000Z"
TOKEN = "R" * 26 + ".0001." + "x" * 43


def stamp(seq: int, at: str = T0, actor: str = "w1", zombie: bool = False) -> Stamp:
    return Stamp(seq, at, actor, zombie)


def run(run_id: str = "R1", **fields: Any) -> RunRecord:
    base = RunRecord(run_id, "sim", 1, RunStatus.WAITING, "{}", "h", T0, T0)
    return replace(base, **fields)


def step(position: str, kind: StepKind, status: StepStatus, **fields: Any) -> StepRecord:
    return StepRecord("R1", position, f"n{position}", kind, status, T0, **fields)


def history(r: RunRecord, *steps: StepRecord, signals: list[SignalRecord] | None = None) -> Any:
    return RunHistory(r, {s.position: s for s in steps}, signals or [])


def final(journal: Journal, *histories: RunHistory) -> Final:
    return Final({h.run.run_id: h for h in histories}, journal, EngineConfig())


def test_a_waiting_run_with_its_signal_unconsumed_is_stuck() -> None:
    """GIVEN a run WAITING without a due time on a signal wait
    WHEN a signal of that name sits unconsumed (or none does)
    THEN it is stuck (or it waits for the outside world, which may still send one)"""
    wait = replace(step("0002", StepKind.SIGNAL, StepStatus.WAITING), name="siga")
    signal = SignalRecord("R1", "siga", "S1", "1", T0)
    assert no_stuck_runs({"R1": history(run(), wait, signals=[signal])}, Journal(), set())
    assert not no_stuck_runs({"R1": history(run(), wait)}, Journal(), set())


def test_a_callback_wait_needs_a_valid_token_outstanding() -> None:
    """GIVEN a run WAITING without a due time on a callback
    WHEN the outside world holds its token unanswered / only a token of another hash
    THEN it is armed / stuck"""
    wait = step("0001", StepKind.CALLBACK, StepStatus.WAITING, token_hash=token_hash(TOKEN))
    journal = Journal(mailbox={TOKEN: Mail(stamp(1), "R1", "R1.x", "0001", "cb0")})
    assert not no_stuck_runs({"R1": history(run(), wait)}, journal, set())
    other = replace(wait, token_hash="0" * 64)
    assert no_stuck_runs({"R1": history(run(), other)}, journal, set())


def test_an_open_batch_is_stuck_only_when_none_of_its_branches_can_wake() -> None:
    """GIVEN a run WAITING without a due time in a batch: branch 1 waits on a callback
    whose token is outstanding, branch 2 left a callback its code gave up on
    WHEN the invariant looks (the latest wait by position is branch 2's)
    THEN it is not stuck; with branch 1's token gone too, it is"""
    token = "R" * 26 + ".0002.0001.0003." + "x" * 43
    live = step(
        "0002.0001.0003", StepKind.CALLBACK, StepStatus.WAITING, token_hash=token_hash(token)
    )
    abandoned = step("0002.0002.0001", StepKind.CALLBACK, StepStatus.WAITING, token_hash="0" * 64)
    journal = Journal(mailbox={token: Mail(stamp(1), "R1", "R1.x", "0002.0001.0003", "cb")})
    assert not no_stuck_runs({"R1": history(run(), live, abandoned)}, journal, set())
    problems = no_stuck_runs({"R1": history(run(), live, abandoned)}, Journal(), set())
    assert problems and "0002.0002.0001" in problems[0]


def test_a_run_waiting_on_nothing_is_stuck_unless_due() -> None:
    """GIVEN a WAITING run whose last step is DONE
    THEN it is stuck without a due time, fine with one"""
    done = step("0001", StepKind.CALLBACK, StepStatus.DONE)
    assert no_stuck_runs({"R1": history(run(), done)}, Journal(), set())
    assert not no_stuck_runs({"R1": history(run(due_at=T0), done)}, Journal(), set())


def test_a_value_of_another_type_on_replay_is_reported() -> None:
    """GIVEN workflow code that got 1 first and 1.0 on replay
    THEN the values differ (types included)"""
    journal = Journal(observed={("R1.x", 0): [(typed(1), stamp(1)), (typed(1.0), stamp(9))]})
    assert replay_values_equal(final(journal))
    same = Journal(observed={("R1.x", 0): [(typed((1, "a")), stamp(1))] * 2})
    assert not replay_values_equal(final(same))


def test_an_attempt_started_twice_is_reported() -> None:
    """GIVEN an at-most-once body started twice in attempt 1 / in attempts 1 and 2
    THEN the first is reported, the second is fine"""
    body = BodyStart(stamp(1), "R1.x", "0001", 1, "step", "at_most_once_per_attempt")
    twice = Journal(bodies=[body, replace(body, stamp=stamp(5, actor="w2"))])
    assert at_most_once_body_per_attempt(final(twice))
    retried = Journal(bodies=[body, replace(body, attempt=2)])
    assert not at_most_once_body_per_attempt(final(retried))


def test_a_zombie_repeating_an_effect_has_its_own_check() -> None:
    """GIVEN an effect called by the owner and again by a zombie
    THEN only the check that counts zombies fires"""
    journal = Journal(effects={"k": [stamp(1), stamp(2, actor="w2", zombie=True)]})
    assert not effect_once_per_key(final(journal))
    assert effect_once_per_key_with_zombies(final(journal))


def test_a_body_after_the_cancel_bound_is_reported() -> None:
    """GIVEN a cancel acknowledged at T0
    WHEN a body starts 3 s later, 30 s later, or an undo 30 s later
    THEN only the body 30 s later is beyond the bound (cancel_check_interval, 5 s)"""
    ack = Event(stamp(1), "cancel", "R1", "R1.x", "ok", stamp(2, actor="outside"))
    late = "2026-01-01T00:00:30.000Z"
    bodies = [
        BodyStart(stamp(3, "2026-01-01T00:00:03.000Z"), "R1.x", "0001", 1, "step", "x"),
        BodyStart(stamp(4, late), "R1.x", "0002", 1, "undo", "x"),
    ]
    assert not no_body_after_cancel(final(Journal(bodies=bodies, events=[ack])))
    bodies.append(BodyStart(stamp(5, late), "R1.x", "0003", 1, "step", "x"))
    assert no_body_after_cancel(final(Journal(bodies=bodies, events=[ack])))


def test_a_successor_of_a_canceled_run_is_reported() -> None:
    parent = run("P", status=RunStatus.CANCELED)
    child = run("C", status=RunStatus.SUCCEEDED, continued_from="P")
    assert successor_only_of_succeeded(final(Journal(), history(parent), history(child)))
    named = replace(
        parent, status=RunStatus.SUCCEEDED, output=canonical_json({"continued_as_new": "C"})
    )
    assert not successor_only_of_succeeded(final(Journal(), history(named), history(child)))


class OneRunLedger:
    def __init__(self, h: RunHistory) -> None:
        self.h = h

    def load(self, run_id: str) -> RunHistory:
        return self.h


def test_a_write_to_a_finished_run_is_reported() -> None:
    """GIVEN a run seen finishing
    WHEN a later port call leaves a new step record in it
    THEN the monitor reports it, as a late result if its body started before"""
    finished = history(run(status=RunStatus.SUCCEEDED))
    ledger, journal = OneRunLedger(finished), Journal()
    monitor = FinishedRunMonitor(ledger, journal, lambda: stamp(7))
    monitor.observe("ledger.update_run", ("R1",), finished.run)
    ledger.h = history(finished.run, step("0003", StepKind.SLEEP, StepStatus.DONE))
    monitor.observe("ledger.write_step", (ledger.h.steps["0003"],), None)
    assert [v.name for v in journal.violations] == ["finished_run_records_unchanged"]


class StoredRun:
    def __init__(self, h: RunHistory) -> None:
        self.h = h

    def get_run(self, run_id: str) -> RunRecord:
        return self.h.run

    def load(self, run_id: str) -> RunHistory:
        return self.h


def test_a_run_stuck_after_a_write_is_reported_once() -> None:
    """GIVEN a run that suspended WAITING on a signal whose signal sits unconsumed
    WHEN ledger writes on it are observed (twice)
    THEN never_stuck reports it once, even if a later event would rescue it"""
    wait = replace(step("0002", StepKind.SIGNAL, StepStatus.WAITING), name="siga")
    signal = SignalRecord("R1", "siga", "S1", "1", T0)
    journal = Journal()
    stored = StoredRun(history(run(), wait, signals=[signal]))
    monitor = StuckMonitor(stored, journal, set, lambda: stamp(3))
    monitor.observe("ledger.update_run", ("R1",), None)
    monitor.observe("ledger.write_step", (wait,), None)
    assert [v.name for v in journal.violations] == ["never_stuck"]


# --- issue 43: features that do not know about each other ---------------------------------


def _continued(run_id: str, successor: str, **fields: Any) -> RunRecord:
    """A run that continued as new into ``successor``."""
    marker = canonical_json({"continued_as_new": successor})
    return run(run_id, status=RunStatus.SUCCEEDED, output=marker, **fields)


def test_a_parent_holding_the_marker_of_a_run_it_attached_to_is_reported() -> None:
    """GIVEN a keyed run K that continued as new into S, which ended with its own result
    WHEN a parent's settled child record names K with K's marker / with S's result
    THEN it is reported / not (the chain's end's result is the work's)"""
    k = _continued("K", "S")
    s = run("S", status=RunStatus.SUCCEEDED, output='{"iteration":1}', continued_from="K")
    held = step("0001", StepKind.CHILD, StepStatus.DONE, detail={"child": "K"}, output=k.output)
    parent = run("P", status=RunStatus.SUCCEEDED)
    reported = attached_result_is_chain_end(
        final(Journal(), history(parent, held), history(k), history(s))
    )
    assert len(reported) == 1
    assert "continued_as_new" in reported[0]
    good = replace(held, output=s.output)
    assert not attached_result_is_chain_end(
        final(Journal(), history(parent, good), history(k), history(s))
    )
    other = replace(held, output='{"iteration":0}')
    assert attached_result_is_chain_end(
        final(Journal(), history(parent, other), history(k), history(s))
    )


def test_a_signal_left_behind_at_continue_as_new_is_reported_unless_carried() -> None:
    """GIVEN a signal run R accepted and never consumed before R continued as new into S
    WHEN S holds no such signal / holds it (the same payload and name)
    THEN it is reported / not; a run that ended otherwise may leave it (events_consumed)"""
    r = _continued("R", "S")
    s = run("S", status=RunStatus.SUCCEEDED, continued_from="R")
    signal = SignalRecord("R", "siga", "S1", "5", T0)
    sent = Event(stamp(3), "signal", "R", _key(history(r)), "ok", stamp(4), {"signal_id": "S1"})
    journal = Journal(events=[sent])
    lost = signals_survive_continue_as_new(final(journal, history(r, signals=[signal]), history(s)))
    assert len(lost) == 1
    assert "was lost" in lost[0]
    carried = SignalRecord("S", "siga", "S2", "5", T0, consumed_by="0001")
    assert not signals_survive_continue_as_new(
        final(journal, history(r, signals=[signal]), history(s, signals=[carried]))
    )
    ended = run("R", status=RunStatus.SUCCEEDED, output="{}")
    assert not signals_survive_continue_as_new(final(journal, history(ended, signals=[signal])))
    consumed = replace(signal, consumed_by="0002")
    assert not signals_survive_continue_as_new(
        final(journal, history(r, signals=[consumed]), history(s))
    )


def test_a_key_shown_by_a_run_that_names_another_run_is_reported() -> None:
    """GIVEN a sender's run showing ``sqs/m1`` and an operator's run keyed ``sqs/m1``
    WHEN run_by_key of that key returns the operator's run
    THEN the sender's run is reported, the operator's not"""
    sender = run("SENDER", idempotency_key="sqs/m1")
    operator = run("OPERATOR", idempotency_key="sqs/m1", status=RunStatus.SUCCEEDED)
    plain = run("PLAIN")

    def by_key(workflow: str, key: str) -> RunRecord | None:
        return operator if key == "sqs/m1" else None

    f = final(Journal(), history(sender), history(operator), history(plain))
    f.run_by_key = by_key
    assert [p.split()[1] for p in key_names_latest_run(f)] == ["SENDER"]
    f.run_by_key = None  # a Final built without an engine checks no lookup
    assert key_names_latest_run(f) == []


def test_a_reused_key_must_name_its_latest_run_and_hold_one_unfinished() -> None:
    """GIVEN a key of one's own reused once its run ended (issue 46): an ended run N1,
    then N2
    WHEN run_by_key names N2 / names N1 / N1 is still going too
    THEN nothing is reported / N2 is / the two unfinished runs are"""
    n1 = run("N1", idempotency_key="supplier-7", status=RunStatus.SUCCEEDED)
    n2 = run(next_keyed_run_id("sim", "supplier-7", "N1"), idempotency_key="supplier-7")
    f = final(Journal(), history(n1), history(n2))
    f.run_by_key = lambda workflow, key: n2
    assert key_names_latest_run(f) == []
    f.run_by_key = lambda workflow, key: n1
    assert [p.split()[1] for p in key_names_latest_run(f)] == [n2.run_id]
    f = final(Journal(), history(replace(n1, status=RunStatus.WAITING)), history(n2))
    f.run_by_key = lambda workflow, key: n2
    (problem,) = key_names_latest_run(f)
    assert problem.startswith("key 'supplier-7' of sim names 2 unfinished runs")


def test_a_skip_schedule_run_still_going_through_its_successor_is_reported() -> None:
    """GIVEN an earlier run of a skip schedule that continued as new into S
    WHEN S is still waiting / has ended
    THEN a fire that starts a run now is reported / is not"""
    a = _continued("A", "S")
    s = run("S", continued_from="A")
    runs = {"A": a, "S": s}
    assert skip_chains_going(runs.get, ["A"]) == [
        "run A of the schedule is still going (continued as new as S): WAITING"
    ]
    runs["S"] = replace(s, status=RunStatus.SUCCEEDED)
    assert skip_chains_going(runs.get, ["A"]) == []
    # A run whose output only looks like a marker (the named run does not continue it).
    runs["S"] = run("S")
    assert skip_chains_going(runs.get, ["A"]) == []


# --- issue 46: a run that reports its progress ----------------------------------------------


def test_progress_shown_by_a_run_must_be_its_own() -> None:
    """GIVEN runs of ``sim`` with two ops each
    THEN a run showing its own round's note passes; one showing its predecessor's (or
    another run's) note, another total or a count past it is reported."""
    spec = canonical_json({"ops": [{"op": "value"}, {"op": "value"}], "iteration": 1})
    own = {"done": 2, "total": 2, "note": progress_note("R1", 1), "at": T0}
    assert not progress_is_the_runs_own(final(Journal(), history(run(input=spec, progress=own))))
    for wrong in (
        {**own, "note": progress_note("R1", 0)},  # the predecessor's round
        {**own, "note": progress_note("R2", 1)},  # another run's
        {**own, "total": 3},
        {**own, "done": 3},
    ):
        reported = progress_is_the_runs_own(
            final(Journal(), history(run(input=spec, progress=wrong)))
        )
        assert reported and "R1" in reported[0]


def test_progress_that_goes_back_after_a_write_is_reported() -> None:
    journal = Journal()
    stored = StoredRun(history(run(progress={"done": 2, "at": T0})))
    monitor = ProgressMonitor(stored, journal, lambda: stamp(4))
    monitor.observe("ledger.update_run", ("R1",), None)
    stored.h = history(run(progress={"done": 2, "at": T0}))
    monitor.observe(
        "ledger.write_step_fenced", (step("0002", StepKind.STEP, StepStatus.RUNNING),), None
    )
    assert journal.violations == []
    stored.h = history(run(progress={"done": 1, "at": T0}))
    monitor.observe("ledger.update_run", ("R1",), None)
    assert [v.name for v in journal.violations] == ["progress_never_goes_back"]
    # Another incarnation of the id (a keyed restart after expiry) starts again from none.
    stored.h = history(run(progress={"done": 1, "at": T0}, created_at="2026-02-01T00:00:00.000Z"))
    monitor.observe("ledger.update_run", ("R1",), None)
    assert len(journal.violations) == 1


def test_a_later_run_under_a_childs_key_is_judged_by_when_the_record_was_started() -> None:
    """GIVEN a parent's record for keyed child K, started at T0 and settled ChildGone at
    T2 (its look found the run under K to be a later one), and that later run, created at
    T1 between the two and SUCCEEDED
    WHEN the invariant looks
    THEN the later run is not the record's child (it came after the record was started),
    though it came before the record's last write; without the start on record, only the
    last write is known and the mismatch is reported (explorer seed 289)"""
    t1, t2 = "2026-01-01T01:00:00.000Z", "2026-01-01T02:00:00.000Z"
    gone = replace(
        step("0001", StepKind.CHILD, StepStatus.TERMINAL_FAILED, detail={"child": "K"}),
        error_type="ChildGone",
        updated_at=t2,
    )
    later = run("K", status=RunStatus.SUCCEEDED, created_at=t1, parent=None, idempotency_key="k")
    parent = run(status=RunStatus.FAILED)
    journal = Journal(child_starts={("R1", T0, "0001", "K"): (T0, None)})
    assert not child_reports_match(final(journal, history(parent, gone), history(later)))
    problems = child_reports_match(final(Journal(), history(parent, gone), history(later)))
    assert problems and "TERMINAL_FAILED" in problems[0]
    # Where the journal saw which run was under K when the record was written, that
    # decides, whatever the times: a run of another creation is a later one ...
    seen = Journal(child_starts={("R1", T0, "0001", "K"): (T0, T0)})
    assert not child_reports_match(final(seen, history(parent, gone), history(later)))
    # ... and the run the record was about is held to what it ended with.
    same = replace(later, created_at=T0)
    problems = child_reports_match(final(seen, history(parent, gone), history(same)))
    assert problems and "TERMINAL_FAILED" in problems[0]
