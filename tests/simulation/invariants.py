"""The invariants, one named check each, so each can be tuned or left out (``--sim-skip``).

Most are plain functions over the final ledger (``Final.histories``), the journal and the
event log. Two watch the schedule as it runs: ``FinishedRunMonitor`` (a finished run is
never written again) and the actors themselves (errors that escape ``resume``, ``sweep``
or an API call; a handed-out callback token refused while its wait is pending).

Names of all checks, for ``--sim-skip``: see ``ALL_CHECKS``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any

from durable.core.config import EngineConfig
from durable.core.model import (
    RunHistory,
    RunRecord,
    RunStatus,
    StepKind,
    StepRecord,
    StepStatus,
    parse_time,
)
from durable.core.retention import visible_history
from durable.core.serde import decode
from durable.core.tokens import token_hash
from tests.simulation.journal import Journal, Stamp
from tests.simulation.programs import REFUSED, progress_note

# Checked while the schedule runs (recorded by actors and the monitor).
RUNTIME_CHECKS = (
    "skip_schedule_one_chain_at_a_time",
    "ambiguous_wait_answered",
    "map_window_kept",
    "gate_limit_holds",
    "resume_raises_nothing",
    "sweep_raises_nothing",
    "api_errors_are_typed",
    "issued_tokens_honoured",
    "never_stuck",
    "finished_run_item_unchanged",
    "finished_run_records_unchanged",
    "finished_run_late_step_result",
    "progress_never_goes_back",
)


# Checks that report what the engine's design allows on purpose, left out by default (see
# ``--sim-skip``), each with the reason. docs/architecture.md states the same.
ALLOWED_BY_DESIGN = {
    "finished_run_late_step_result": (
        "a step body that started on a lease its worker vouched for may record its result "
        "after the run ended (a cancel or a takeover meanwhile): the body did run, so the "
        "record is the truth; fencing results against the run item would double the cost "
        "of every step, and nothing else may land on a finished run"
    ),
}


@dataclass
class Final:
    histories: dict[str, RunHistory]
    journal: Journal
    config: EngineConfig
    # ``Engine.run_by_key`` of the schedule's engine (``key_names_latest_run``); None in
    # tests that build a ``Final`` by hand.
    run_by_key: Callable[[str, str], RunRecord | None] | None = None


def _key(h: RunHistory) -> str:
    from durable.core.retention import incarnation

    return f"{h.run.run_id}.{incarnation(h.run)}"


# --- at quiescence --------------------------------------------------------------------


def no_stuck_runs(histories: dict[str, RunHistory], journal: Journal, armed: set[str]) -> list[str]:
    """When every actor is idle, an unfinished run is due (``due_at``) or waits on a
    pending wait whose wake-up is armed: a timer, or a token or signal the outside world
    can still send (a valid token not yet used; no signal of that name left unconsumed)."""
    problems = [stuck(h, journal, armed, histories.get) for _, h in sorted(histories.items())]
    return [p for p in problems if p is not None]


def stuck(
    h: RunHistory,
    journal: Journal,
    armed: set[str],
    load: Callable[[str], RunHistory | None] | None = None,
) -> str | None:
    """Why run ``h`` can never be woken without a new outside event, or None."""
    run = h.run
    if run.terminal or run.due_at is not None:
        return None
    waits = [s for s in h.steps.values() if s.status == StepStatus.WAITING]
    where = f"run {run.run_id} ({run.status.value}, inbox {run.inbox}, no due time)"
    if run.status != RunStatus.WAITING or run.lease_owner is not None or not waits:
        done = sorted(f"{p}:{s.name}={s.status.value}" for p, s in h.steps.items())[-3:]
        return f"{where} has no pending wait; last steps {done}"
    wait = max(waits, key=lambda s: s.position)
    if "." not in wait.position:
        return _wait_problem(h, journal, armed, wait, where, load)
    # An open batch: its branches wait side by side, and one of them that can still be
    # woken moves the run (the latest by position may be a wait its branch gave up on).
    batch = wait.position.split(".", 1)[0] + "."
    problems = [
        _wait_problem(h, journal, armed, w, where, load)
        for w in sorted(waits, key=lambda s: s.position, reverse=True)
        if w.position.startswith(batch)
    ]
    return None if None in problems else problems[0]


def _wait_problem(
    h: RunHistory,
    journal: Journal,
    armed: set[str],
    wait: StepRecord,
    where: str,
    load: Callable[[str], RunHistory | None] | None = None,
) -> str | None:
    """Why ``wait`` can never end without a new outside event, or None."""
    run = h.run
    if wait.kind == StepKind.CHILD:
        child_id = str((wait.detail or {}).get("child"))
        child = load(child_id) if load is not None else None
        if child is not None and not child.run.terminal:
            return None  # the child's own waits are checked as its own run's
        state = "missing" if child is None else f"ended {child.run.status.value}"
        return f"{where} waits on child run {child_id} at {wait.position}, which is {state}"
    if wait.kind == StepKind.CALLBACK:
        live = [
            t
            for t, m in journal.mailbox.items()
            if m.run_id == run.run_id
            and m.position == wait.position
            and t not in journal.answered
            and token_hash(t) == wait.token_hash
        ]
        if live:
            return None
        return (
            f"{where} waits on callback {wait.name!r} at {wait.position} but no valid token "
            "for it is outstanding"
        )
    if wait.kind == StepKind.SIGNAL:
        buffered = [s for s in h.signals if s.name == wait.name and s.consumed_by is None]
        if not buffered:
            return None
        return (
            f"{where} waits on signal {wait.name!r} at {wait.position} while "
            f"{len(buffered)} such signal(s) sit unconsumed"
        )
    if run.run_id in armed:
        return None
    return f"{where} waits on {wait.kind} at {wait.position}, no timer armed"


# --- after the schedule settled -------------------------------------------------------


def at_most_once_body_per_attempt(f: Final) -> list[str]:
    counts = Counter(
        (b.run, b.position, b.attempt)
        for b in f.journal.bodies
        if b.kind == "step" and b.semantics == "at_most_once_per_attempt"
    )
    return [
        f"body of run {run} at {position} attempt {attempt} started {n} times, by "
        + ", ".join(
            f"{b.stamp.actor}{' (zombie)' if b.stamp.zombie else ''}@{b.stamp.seq}"
            for b in f.journal.bodies
            if (b.run, b.position, b.attempt, b.kind) == (run, position, attempt, "step")
        )
        for (run, position, attempt), n in sorted(counts.items())
        if n > 1
    ]


def _effects_twice(f: Final, *, zombies: bool) -> list[str]:
    problems = []
    for key, calls in sorted(f.journal.effects.items()):
        counted = [c for c in calls if zombies or not c.zombie]
        if len(counted) > 1:
            who = ", ".join(
                f"{c.actor}{' (zombie)' if c.zombie else ''}@{c.seq} {c.at[11:19]}" for c in calls
            )
            problems.append(f"effect {key} ran {len(calls)} times, by {who}")
    return problems


def effect_once_per_key(f: Final) -> list[str]:
    """An effect's call runs at most once per key among workers holding the lease."""
    return _effects_twice(f, zombies=False)


def effect_once_per_key_with_zombies(f: Final) -> list[str]:
    """The same, counting zombies too: a worker stalled past its lease between the key's
    record and the call cannot be stopped by the engine; an API that dedupes by the key
    can."""
    return _effects_twice(f, zombies=True)


def runs_finish(f: Final) -> list[str]:
    """After the settle phase (timers on time, every callback answered, signals sent,
    the clock moved on), every run has finished."""
    problems = []
    for run_id, h in sorted(f.histories.items()):
        if not h.run.terminal:
            pending = sorted(
                f"{p}:{s.kind.value}:{s.status.value}"
                for p, s in h.steps.items()
                if not s.status.final
            )
            problems.append(
                f"run {run_id} is still {h.run.status.value} (due {h.run.due_at}, lease "
                f"{h.run.lease_owner and h.run.lease_until}); unfinished steps {pending}"
            )
    return problems


def sleeps_end_after_their_wake_time(f: Final) -> list[str]:
    """No sleep is recorded DONE before its wake time (one clock in the simulation): the
    end of a sleep kept on the run item (``durable.core.sleeps``) is written without the
    run's fence, by whichever worker the wake-up reached first, zombies included."""
    return [
        f"run {run_id}: sleep {p} ({rec.name}) DONE at {rec.updated_at}, due {rec.wake_at}"
        for run_id, h in sorted(f.histories.items())
        for p, rec in sorted(h.steps.items())
        if rec.kind == StepKind.SLEEP
        and rec.status == StepStatus.DONE
        and (rec.wake_at is None or rec.updated_at < rec.wake_at)
    ]


def events_consumed(f: Final) -> list[str]:
    """Every accepted callback completion and signal is consumed, or its run finished."""
    problems = []
    for e in f.journal.events:
        h = f.histories.get(e.run_id or "")
        if e.outcome != "ok" or h is None or h.run.terminal or _key(h) != e.run:
            continue
        if e.kind == "callback":
            step = h.steps.get(e.detail["position"])
            name = step.name if step is not None else ""
            text = name[2:] if name[:2] == "cb" else ""
            if ".m." in text:  # a name every branch of a map shares: its branch's op
                i, k = text.split(".m.")
                text = f"{i}.{int(e.detail['position'].split('.')[1])}.{k}"
            index: int | str = int(text) if text.isdigit() else text  # "3.1.2" in a branch
            if (e.run, index) not in f.journal.observed and not _in_canceled_branch(
                h, e.detail["position"]
            ):
                problems.append(
                    f"the answer to callback {e.detail['position']} of run {e.run_id} "
                    f"(seq {e.stamp.seq}) was never seen by the workflow"
                )
        elif e.kind == "signal":
            signal = next((s for s in h.signals if s.signal_id == e.detail["signal_id"]), None)
            if signal is not None and signal.consumed_by is None:
                problems.append(
                    f"signal {e.detail['name']!r} {signal.signal_id} to run {e.run_id} "
                    f"(seq {e.stamp.seq}) was never consumed"
                )
    return problems


def _in_canceled_branch(h: RunHistory, position: str) -> bool:
    """Whether ``position`` lies in a branch its batch's decision canceled: an answer to
    a wait there is accepted and never seen, by design."""
    parts = position.split(".")
    for depth in range(1, len(parts) - 1, 2):
        batch = h.steps.get(".".join(parts[:depth]))
        if batch is None or batch.kind != StepKind.BATCH or not batch.output:
            continue
        items = json.loads(batch.output)["items"]
        if items[int(parts[depth]) - 1]["s"] == "canceled":
            return True
    return False


def replay_values_equal(f: Final) -> list[str]:
    """What a durable call returned on replay equals (type included) the first value."""
    problems = []
    for (run, index), seen in sorted(f.journal.observed.items(), key=str):
        first, first_stamp = seen[0]
        for value, stamp in seen[1:]:
            if value != first:
                problems.append(
                    f"run {run} op {index}: first {first[:120]} (seq {first_stamp.seq}), "
                    f"then {value[:120]} (seq {stamp.seq}, {stamp.actor})"
                )
                break
    return problems


def no_body_after_cancel(f: Final) -> list[str]:
    """A canceled run starts no step body once the cancel is acknowledged plus the
    documented bound (a running owner sees it within ``cancel_check_interval``);
    compensations (undo bodies) are the exception. A later operator retry resets it."""
    bound = f.config.cancel_check_interval
    problems = []
    acks = [e for e in f.journal.events if e.kind == "cancel" and e.outcome == "ok"]
    for ack in acks:
        retried = [
            e.stamp.seq
            for e in f.journal.events
            if e.kind == "retry" and e.outcome == "ok" and e.run == ack.run
        ]
        for b in f.journal.bodies:
            if b.run != ack.run or b.kind == "undo" or b.stamp.seq <= ack.done.seq:
                continue
            if any(ack.done.seq < r < b.stamp.seq for r in retried):
                continue
            if parse_time(b.stamp.at) - parse_time(ack.done.at) > bound:
                zombie = " (zombie)" if b.stamp.zombie else ""
                problems.append(
                    f"run {ack.run_id}: {b.kind} body at {b.position or 'poll'} started at "
                    f"{b.stamp.at} by {b.stamp.actor}{zombie} (seq {b.stamp.seq}), cancel "
                    f"acknowledged at {ack.done.at} (seq {ack.done.seq})"
                )
    return problems


def successor_only_of_succeeded(f: Final) -> list[str]:
    """A continue-as-new successor exists only for a run that succeeded naming it: a
    canceled or failed run starts no successor."""
    problems = []
    for run_id, h in sorted(f.histories.items()):
        parent_id = h.run.continued_from
        parent = f.histories.get(parent_id or "")
        if parent is None or parent.run.created_at > h.run.created_at:
            continue  # gone, or a later run under the parent's id (a keyed restart)
        output = decode(parent.run.output) if parent.run.output else None
        named = isinstance(output, dict) and output.get("continued_as_new") == run_id
        if parent.run.status != RunStatus.SUCCEEDED or not named:
            problems.append(
                f"run {run_id} ({h.run.status.value}, {len(h.steps)} steps) continues run "
                f"{parent_id}, which is {parent.run.status.value} "
                f"(cancel requested: {parent.run.cancel_requested})"
            )
    return problems


# --- features that do not know about each other (issue 43) ----------------------------


# A continuation's output: the successor's id, and now and then how many signals it
# handed over (``carried_signals``); nothing else.
MARKER_FIELDS = frozenset({"continued_as_new", "carried_signals"})


def successor_named(output: str | None) -> str | None:
    """The successor a run's output names when the run continued as new, else None."""
    if not output or "continued_as_new" not in output:
        return None
    try:
        value = decode(output)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) - MARKER_FIELDS:
        return None
    successor = value.get("continued_as_new")
    return successor if isinstance(successor, str) else None


def chain_of(get_run: Callable[[str], RunRecord | None], run: RunRecord) -> list[RunRecord]:
    """``run`` and the runs that continued it, in order, as far as they still exist (a
    successor expired ends the list early). A link counts only when the run it names
    says it continues this one (``continued_from``): a workflow may return the marker's
    shape itself."""
    chain = [run]
    while run.status == RunStatus.SUCCEEDED and (following := successor_named(run.output)):
        found = get_run(following)
        if found is None or found.continued_from != run.run_id or found in chain:
            break
        chain.append(found)
        run = found
    return chain


def _history_run(f: Final) -> Callable[[str], RunRecord | None]:
    def get(run_id: str) -> RunRecord | None:
        h = f.histories.get(run_id)
        return h.run if h is not None else None

    return get


def skip_chains_going(get_run: Callable[[str], RunRecord | None], run_ids: list[str]) -> list[str]:
    """Of the runs an ``overlap="skip"`` schedule started before (``run_ids``), those
    whose chain (the run, or a continue-as-new successor of it) is still going: at the
    moment a fire of that schedule starts a run, there must be none (issue 43). Called
    by the fire's actor right after the start (``skip_schedule_one_chain_at_a_time``)."""
    problems = []
    for run_id in dict.fromkeys(run_ids):
        run = get_run(run_id)
        if run is None:
            continue
        chain = chain_of(get_run, run)
        end = chain[-1]
        if not end.terminal:
            via = f" (continued as new as {end.run_id})" if len(chain) > 1 else ""
            problems.append(f"run {run_id} of the schedule is still going{via}: {end.status}")
    return problems


def attached_result_is_chain_end(f: Final) -> list[str]:
    """A run's child record never holds a continue-as-new marker as the child's result
    (a child cannot continue as new, so a marker comes from a run it attached to or
    adopted by key, whose chain went on under another id); an attached record that
    settled DONE holds what the chain's end returned (issue 43)."""
    problems = []
    get = _history_run(f)
    for run_id, h in sorted(f.histories.items()):
        for position, rec in sorted(h.steps.items()):
            if rec.kind != StepKind.CHILD or rec.status != StepStatus.DONE:
                continue
            # (A settled record no longer says it was attached: any run that continued as
            # new was not this run's child, which cannot.)
            target = str((rec.detail or {}).get("child"))
            successor = successor_named(rec.output)
            if successor is not None:
                problems.append(
                    f"run {run_id} at {position} took {{'continued_as_new': {successor}}} as "
                    f"the result of run {target}, not the result of its chain's end"
                )
                continue
            attached = f.histories.get(target)
            if attached is None:
                continue
            if _later_run(f, h, position, rec, attached.run, tie=False):
                continue  # a later run under that key (restarted after its retention)
            chain = chain_of(get, attached.run)
            end = chain[-1]
            retried = any(op.get("action") == "retry" for r in chain for op in r.operations)
            if len(chain) == 1 or not end.terminal or retried:
                continue
            if end.status != RunStatus.SUCCEEDED or end.output != rec.output:
                problems.append(
                    f"run {run_id} at {position} (run {target}, which continued as new) holds "
                    f"{(rec.output or '')[:80]}, but the chain ended with run {end.run_id} "
                    f"{end.status.value}: {(end.output or '')[:80]}"
                )
    return problems


def signals_survive_continue_as_new(f: Final) -> list[str]:
    """A signal a run accepted (a send answered ok, a keyed repeat included; sent by the
    id of a run that had continued, wherever the engine put it) that was not consumed by
    the run holding it before that run continued as new is carried on: a later run of the
    chain holds it (the same signal, or one of its name and payload). A run that ended
    any other way may leave signals unconsumed (``events_consumed``) (issue 43)."""
    problems = []
    get = _history_run(f)
    for e in f.journal.events:
        h = f.histories.get(e.run_id or "")
        if e.kind != "signal" or e.outcome != "ok" or h is None or _key(h) != e.run:
            continue
        chain = chain_of(get, h.run)
        held = [
            (n, signal)
            for n, link in enumerate(chain)
            if (lh := f.histories.get(link.run_id)) is not None
            for signal in lh.signals
            if signal.signal_id == e.detail["signal_id"]
        ]
        if not held:
            continue  # kept nowhere this check can see (a link's retention ended)
        n, signal = held[0]
        if signal.consumed_by is not None or n == len(chain) - 1:
            continue  # consumed, or held by the chain's end (``events_consumed``'s)
        carried = any(
            s.signal_id == signal.signal_id or (s.name, s.payload) == (signal.name, signal.payload)
            for later in chain[n + 1 :]
            if (lh := f.histories.get(later.run_id)) is not None
            for s in lh.signals
        )
        if not carried:
            keyed = " (keyed)" if signal.key_hash else ""
            problems.append(
                f"signal {signal.name!r}{keyed} {signal.signal_id} sent to run {e.run_id} "
                f"(seq {e.stamp.seq}) was lost: run {chain[n].run_id} continued as new "
                f"without consuming it, and no later run of its chain has it"
            )
    return problems


def key_names_latest_run(f: Final) -> list[str]:
    """A key names at most one unfinished run (a chain that continued as new counts as
    its first run), and ``Engine.run_by_key(workflow, key)`` names the latest run that
    shows it, whoever keyed it (an operator, a sender in its namespace, a schedule's fire,
    a parent's ``id=``) (issues 43 and 46). A key of one's own reused once its run ended
    (``reuse="after_end"``) is shown by its earlier runs too: those are older than the run
    it names (each incarnation's id derives from the one before: a clock that stands
    still can give them one creation time). A key in a sender's namespace names exactly
    the one run that shows it."""
    from durable.core.ids import next_keyed_run_id, reserved_prefix
    from durable.engine.lineage import follow

    def earlier(workflow: str, key: str, run_id: str, latest: str) -> bool:
        """Whether ``latest`` is an incarnation of ``key`` after ``run_id`` (the ones
        between may have expired: the ids are derived, not read)."""
        for _ in range(len(f.histories) + 1):
            run_id = next_keyed_run_id(workflow, key, run_id)
            if run_id == latest:
                return True
        return False

    def get(run_id: str) -> RunRecord | None:
        h = f.histories.get(run_id)
        return h.run if h is not None else None

    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for h in f.histories.values():
        if h.run.idempotency_key is not None:
            groups.setdefault((h.run.workflow, h.run.idempotency_key), []).append(h.run)
    problems = []
    for (workflow, key), runs in sorted(groups.items()):
        runs.sort(key=lambda r: (r.created_at, r.run_id))
        going = [
            r.run_id for r in runs if not (end := follow(get, r)).whole or not end.run.terminal
        ]
        if len(going) > 1:
            problems.append(
                f"key {key!r} of {workflow} names {len(going)} unfinished runs: {going}"
            )
        if f.run_by_key is None:
            continue
        try:
            found = f.run_by_key(workflow, key)
        except Exception as error:  # any refusal of a key a run shows is the finding
            problems.append(f"run {runs[-1].run_id} shows key {key!r}; run_by_key raised {error!r}")
            continue
        other = "no run" if found is None else f"run {found.run_id}"
        reused = reserved_prefix(key) is None
        for r in runs:
            if found is not None and r.run_id == found.run_id:
                continue
            if reused and found is not None and earlier(workflow, key, r.run_id, found.run_id):
                continue  # an earlier run of a key reused since
            problems.append(f"run {r.run_id} shows key {key!r}, which names {other}")
    return problems


def _fork_chain(f: Final, run_id: str) -> list[str]:
    """``run_id`` and the runs it was forked from: a fork copies its source's settled
    records, a child's among them (the child still names the run that started it)."""
    chain = [run_id]
    while (h := f.histories.get(chain[-1])) is not None and h.run.forked_from:
        chain.append(h.run.forked_from.rpartition("@")[0])
    return chain


def _later_run(
    f: Final, h: RunHistory, position: str, rec: StepRecord, child: RunRecord, *, tie: bool
) -> bool:
    """Whether ``child``, the run now under the id ``rec`` names, came after the run the
    record was about (a keyed id outlives its run: expired, then started again). Known
    exactly where the journal saw the record written (the run then under the id); a
    fork's copies were not written here: judged by the record's last write, ``tie`` at
    the same millisecond (the clock did not move between the two writes)."""
    key = (h.run.run_id, h.run.created_at, position, str((rec.detail or {}).get("child")))
    started = f.journal.child_starts.get(key)
    if started is not None and started[1] is not None:
        return child.created_at != started[1]
    at = started[0] if started is not None else rec.updated_at
    return child.created_at > at or (child.created_at == at and tie)


def child_reports_match(f: Final) -> list[str]:
    """A parent's settled child record says what its child ended with: DONE with the
    child's output for a SUCCEEDED child, TERMINAL_FAILED for a FAILED or CANCELED one
    (unless an operator retried the child after its parent took the failure: the
    parent keeps what it saw); and every child names, as its parent, a record that
    started it (the run's own, or one a fork copied from its source), unless it is a
    keyed run the parent adopted finished."""
    problems = []
    for run_id, h in sorted(f.histories.items()):
        for position, rec in sorted(h.steps.items()):
            if rec.kind != StepKind.CHILD:
                continue
            child_id = str((rec.detail or {}).get("child"))
            child = f.histories.get(child_id)
            if child is None:  # expired (its retention ended): only a waiting parent minds
                if not rec.status.final and not h.run.terminal:
                    problems.append(f"run {run_id} waits at {position} on a missing child")
                continue
            mine = {f"{r}@{position}" for r in _fork_chain(f, run_id)}
            # (At the same millisecond, a run this parent did not start is the later one.)
            if _later_run(f, h, position, rec, child.run, tie=child.run.parent not in mine):
                # A keyed child's id outlives it: expired, then started again under its
                # key (an operator's ``durable start --key``), it is a later run the
                # parent's record never saw.
                continue
            # A keyed child (``id=``) that was there already, finished, is adopted: it
            # names whoever started it (another parent, or none: an operator).
            if child.run.parent not in mine and child.run.idempotency_key is None:
                problems.append(f"child {child_id} names parent {child.run.parent!r}")
            if not rec.status.final:
                continue
            if any(op.get("action") == "retry" for op in child.run.operations):
                continue  # a child retried after its parent took its failure: by design
            if successor_named(child.run.output) is not None:
                continue  # a run that continued as new: ``attached_result_is_chain_end``
            ok = rec.status == StepStatus.DONE
            if not child.run.terminal or ok != (child.run.status == RunStatus.SUCCEEDED):
                problems.append(
                    f"run {run_id} recorded child {child_id} at {position} as "
                    f"{rec.status.value}, but the child is {child.run.status.value}"
                )
            elif ok and rec.output != child.run.output:
                problems.append(f"run {run_id} at {position}: child output differs")
    return problems


# Errors the engine raises about itself: a run must never end FAILED with one (a keyed
# child refused as "not a child run", a result decoded by another version's type).
# (The generated async workflow awaits only durable calls: failing with AwaitNotDurable,
# it would have been ended by an engine that took a busy loop for a quiet one.)
ENGINE_ERRORS = ("InvalidState", "ValidationError", "KeyError", "AwaitNotDurable")


def no_engine_error_fails_a_run(f: Final) -> list[str]:
    """A run fails with its workflow's error or a typed refusal, never with an error the
    engine raised about its own state (issue 31, holes 1 and 2)."""
    return [
        f"run {run_id} failed with {h.run.error.type}: {h.run.error.message[:200]}"
        for run_id, h in sorted(f.histories.items())
        if h.run.status == RunStatus.FAILED
        and h.run.error is not None
        and h.run.error.type in ENGINE_ERRORS
    ]


def _decisions(h: RunHistory) -> Iterable[tuple[str, StepRecord, dict[str, Any]]]:
    for position, rec in sorted(h.steps.items()):
        if rec.kind == StepKind.BATCH and rec.status == StepStatus.DONE and rec.output:
            yield position, rec, json.loads(rec.output)


def canceled_branches_leave_no_child(f: Final) -> list[str]:
    """A child run that a branch started and still waited for when its batch's rule
    canceled the branch does not run on to success: it is canceled with the branch (its
    report never settled the branch's record, since the batch went on without it). A
    child that ended before the decision reported it and is not counted (issue 31,
    hole 6)."""
    problems = []
    for run_id, h in sorted(f.histories.items()):
        for position, _, decision in _decisions(h):
            if decision.get("distributed"):
                continue
            canceled = tuple(
                f"{position}.{i:04d}."
                for i, item in enumerate(decision["items"], start=1)
                if item["s"] == "canceled"
            )
            for at, rec in sorted(h.steps.items()):
                if rec.kind != StepKind.CHILD or rec.status.final or not at.startswith(canceled):
                    continue
                if (rec.detail or {}).get("attached"):
                    continue  # another run's, taken with if_running="attach": left be
                child = f.histories.get(str((rec.detail or {}).get("child")))
                if child is not None and child.run.status == RunStatus.SUCCEEDED:
                    problems.append(
                        f"run {run_id}: the child {child.run.run_id} of canceled branch {at} "
                        "ran on to SUCCEEDED"
                    )
    return problems


def decided_maps_cover_their_items(f: Final) -> list[str]:
    """A distributed map decided over n items has no item record past n: a replay with
    fewer items than the children it had started is refused, not decided over the
    shorter list (issue 31, hole 3)."""
    problems = []
    for run_id, h in sorted(f.histories.items()):
        for position, _, decision in _decisions(h):
            if not decision.get("distributed"):
                continue
            beyond = [
                at
                for at in h.steps
                if at.startswith(position + ".")
                and at.count(".") == position.count(".") + 1
                and int(at.rsplit(".", 1)[1]) > decision["n"]
            ]
            if beyond:
                problems.append(
                    f"run {run_id}: the map at {position} was decided over {decision['n']} "
                    f"items, with item records at {sorted(beyond)}"
                )
    return problems


def fire_verdicts_hold(f: Final) -> list[str]:
    """Every delivery of one schedule fire gets the verdict its first got: a fire skipped
    (overlap, missed) never starts a run on a later delivery (issue 31, hole 7)."""
    problems = []
    verdicts: dict[str, str] = {}
    for key, result, run_id, manual in f.journal.fires:
        if manual:
            continue
        first = verdicts.setdefault(key, result)
        if first.startswith("skipped") and result == "started":
            problems.append(f"fire {key} was {first}, then a delivery started run {run_id}")
    return problems


def refused_maps_start_nothing(f: Final) -> list[str]:
    """A distributed map one of whose items lacks its gate key is refused before any child
    starts (issue 31, hole 4): no run ever has one of its other items' lanes."""
    return [
        f"run {run_id} started from a refused map (lane {lane!r}, parent {h.run.parent})"
        for run_id, h in sorted(f.histories.items())
        if isinstance(lane := json.loads(h.run.input or "{}").get("lane"), str)
        and lane.startswith(REFUSED)
    ]


def progress_is_the_runs_own(f: Final) -> list[str]:
    """A run's stored progress (``ctx.set_progress``) is one its own code set: the note
    names the run and its round (never a predecessor's or another run's), the total is its
    program's length and ``done`` is within it."""
    problems = []
    for run_id, h in sorted(f.histories.items()):
        progress = h.run.progress
        if progress is None:
            continue
        try:
            spec = json.loads(h.run.input or "{}")
            ops, iteration = len(spec["ops"]), int(spec.get("iteration", 0))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # an input kept in the payload store: not this check's to fetch
        want = {"note": progress_note(run_id, iteration), "total": ops}
        got = {"note": progress.get("note"), "total": progress.get("total")}
        if got != want or not 1 <= int(progress.get("done", 0)) <= ops:
            problems.append(f"run {run_id} shows progress {progress}, its own would be {want}")
    return problems


FINAL_CHECKS: dict[str, Callable[[Final], list[str]]] = {
    "attached_result_is_chain_end": attached_result_is_chain_end,
    "signals_survive_continue_as_new": signals_survive_continue_as_new,
    "key_names_latest_run": key_names_latest_run,
    "refused_maps_start_nothing": refused_maps_start_nothing,
    "no_engine_error_fails_a_run": no_engine_error_fails_a_run,
    "canceled_branches_leave_no_child": canceled_branches_leave_no_child,
    "decided_maps_cover_their_items": decided_maps_cover_their_items,
    "fire_verdicts_hold": fire_verdicts_hold,
    "at_most_once_body_per_attempt": at_most_once_body_per_attempt,
    "effect_once_per_key": effect_once_per_key,
    "effect_once_per_key_with_zombies": effect_once_per_key_with_zombies,
    "runs_finish": runs_finish,
    "sleeps_end_after_their_wake_time": sleeps_end_after_their_wake_time,
    "events_consumed": events_consumed,
    "replay_values_equal": replay_values_equal,
    "no_body_after_cancel": no_body_after_cancel,
    "successor_only_of_succeeded": successor_only_of_succeeded,
    "child_reports_match": child_reports_match,
    "progress_is_the_runs_own": progress_is_the_runs_own,
}
ALL_CHECKS = (*RUNTIME_CHECKS, "no_stuck_runs", *FINAL_CHECKS)


# --- while the schedule runs: a finished run is never written again -------------------

READS = {"ledger.get_run", "ledger.load", "ledger.get_step", "ledger.due_runs", "ledger.list_runs"}


def _run_id_of(args: tuple[Any, ...]) -> str | None:
    if not args:
        return None
    first = args[0]
    if isinstance(first, str):
        return first
    run_id = getattr(first, "run_id", None)
    return run_id if isinstance(run_id, str) else None


def _changed_fields(a: Any, b: Any) -> list[str]:
    return [x.name for x in fields(a) if getattr(a, x.name) != getattr(b, x.name)]


class FinishedRunMonitor:
    """Snapshots a run's partition when it finishes; every later port call on it must
    leave it as it was. An operator's retry (the run is active again) and TTL end it.

    A step record that became final after the run finished, at a position whose body
    started before, is reported under its own name (``finished_run_late_step_result``):
    whether such a result may still land is a policy decision.
    """

    def __init__(self, ledger: Any, journal: Journal, stamp: Callable[[], Stamp]) -> None:
        self.ledger = ledger
        self.journal = journal
        self.stamp = stamp
        self.snapshots: dict[str, tuple[int, RunHistory]] = {}

    def forget(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            self.snapshots.pop(run_id, None)

    def observe(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        if method in READS or not method.startswith("ledger."):
            return
        run_id = _run_id_of(args)
        if run_id is None:
            return
        taken = self.snapshots.get(run_id)
        if taken is None:
            if isinstance(result, RunRecord) and result.terminal:
                history = visible_history(self.ledger.load(run_id))
                if history is not None:
                    self.snapshots[run_id] = (self.stamp().seq, history)
            return
        # What is the run's own: an expired earlier run's leftovers under the same id (and
        # their purge) are not this run's records.
        now = visible_history(self.ledger.load(run_id))
        if now is None:
            self.snapshots.pop(run_id, None)
            return
        if method == "ledger.operate" and not now.run.terminal:
            self.snapshots.pop(run_id, None)  # an operator's retry reopened it
            return
        self._compare(method, run_id, taken, now)
        self.snapshots[run_id] = (taken[0], now)

    def _compare(
        self, method: str, run_id: str, taken: tuple[int, RunHistory], now: RunHistory
    ) -> None:
        finished_seq, before = taken
        stamp = self.stamp()
        where = f"{method} by {stamp.actor} (seq {stamp.seq}) on finished run {run_id}"
        changed = _changed_fields(before.run, now.run)
        if changed:
            self.journal.violate(
                "finished_run_item_unchanged", f"{where} changed {changed}", stamp.seq
            )
        run_key = _key(now)
        for position, step in sorted(now.steps.items()):
            old = before.steps.get(position)
            if old == step:
                continue
            late = (old is None or not old.status.final) and step.status.final
            started_before = any(
                b.run == run_key and b.position == position and b.stamp.seq < finished_seq
                for b in self.journal.bodies
            )
            name = "finished_run_late_step_result" if late and started_before else None
            old_text = old.status.value if old else "absent"
            self.journal.violate(
                name or "finished_run_records_unchanged",
                f"{where}: step {position} {step.name!r} {old_text} -> {step.status.value}",
                stamp.seq,
            )
        if before.signals != now.signals:
            self.journal.violate(
                "finished_run_records_unchanged", f"{where}: its signals changed", stamp.seq
            )


# --- while the schedule runs: no run is ever stuck ----------------------------------


class StuckMonitor:
    """``no_stuck_runs`` at every moment, not only once all actors are idle: after each
    ledger write on a run that is WAITING without a due time or a lease, nothing already
    in the ledger can wake it, so it must wait on something still to come (a valid token
    outstanding, a signal not yet sent, an armed timer). Caught here, a stuck run is
    reported even when a later, unrelated event happens to rescue it (``never_stuck``)."""

    def __init__(
        self,
        ledger: Any,
        journal: Journal,
        armed: Callable[[], set[str]],
        stamp: Callable[[], Stamp],
    ) -> None:
        self.ledger = ledger
        self.journal = journal
        self.armed = armed
        self.stamp = stamp
        self.reported: set[str] = set()

    def observe(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        if method in READS or not method.startswith("ledger."):
            return
        run_id = _run_id_of(args)
        if run_id is None or run_id in self.reported:
            return
        run = self.ledger.get_run(run_id)
        if run is None or run.status != RunStatus.WAITING or run.due_at or run.lease_owner:
            return
        history = self.ledger.load(run_id)
        problem = stuck(history, self.journal, self.armed(), self.ledger.load) if history else None
        if problem is not None:
            stamp = self.stamp()
            self.reported.add(run_id)
            self.journal.violate(
                "never_stuck", f"after {method} by {stamp.actor}: {problem}", stamp.seq
            )


class WindowMonitor:
    """``map_window_kept``: after every start of a child, a distributed map has at most
    its ``max_concurrency`` children running (records under its position not yet
    settled), whatever crashes, zombies and replays came before. The window is read from
    the parent's program (its input), the records from the ledger."""

    def __init__(self, ledger: Any, journal: Journal, stamp: Callable[[], Stamp]) -> None:
        self.ledger = ledger
        self.journal = journal
        self.stamp = stamp

    def observe(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        if method not in ("ledger.start_children", "ledger.start_child"):
            return
        steps = args[0] if method == "ledger.start_children" else [args[0]]
        if not steps:
            return
        history = self.ledger.load(steps[0].run_id)
        if history is None:
            return
        try:
            ops = json.loads(history.run.input).get("ops", [])
        except (ValueError, AttributeError):
            return
        windows = [op["window"] for op in ops if isinstance(op, dict) and op.get("op") == "dmap"]
        # Only distributed maps put child records two levels deep (``P.i``), and the
        # program runs its maps in order: the k-th such P is the k-th map's.
        groups: dict[str, list[str]] = {}
        for position, rec in history.steps.items():
            if rec.kind == StepKind.CHILD and position.count(".") == 1:
                groups.setdefault(position.split(".")[0], []).append(position)
        for k, top in enumerate(sorted(groups, key=int)):
            running = [p for p in groups[top] if not history.steps[p].status.final]
            if k < len(windows) and len(running) > windows[k]:
                stamp = self.stamp()
                self.journal.violate(
                    "map_window_kept",
                    f"run {history.run.run_id}: map at {top} has {len(running)} children "
                    f"running, window {windows[k]} (after {method} by {stamp.actor})",
                    stamp.seq,
                )


# --- while the schedule runs: progress never goes back --------------------------------


class ProgressMonitor:
    """``progress_never_goes_back``: ``sim`` reports 1, 2, ... n after its ops, so after
    every ledger write the stored progress of a run (one incarnation of it) is never below
    one stored before: replays, crashes, zombies and reloads included (a replay does not
    take values again; a lost value is set again later, never an older one)."""

    def __init__(self, ledger: Any, journal: Journal, stamp: Callable[[], Stamp]) -> None:
        self.ledger = ledger
        self.journal = journal
        self.stamp = stamp
        self.seen: dict[tuple[str, str], int] = {}

    def observe(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        if method in READS or not method.startswith("ledger."):
            return
        run_id = _run_id_of(args)
        run = self.ledger.get_run(run_id) if run_id is not None else None
        if run is None or run.progress is None:
            return
        key, done = (run.run_id, run.created_at), int(run.progress["done"])
        before = self.seen.get(key, 0)
        if done < before:
            stamp = self.stamp()
            self.journal.violate(
                "progress_never_goes_back",
                f"run {run.run_id}: progress {done} after {before} ({method} by {stamp.actor})",
                stamp.seq,
            )
        self.seen[key] = max(before, done)
