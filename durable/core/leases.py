"""The run item's lease rules, shared by every ledger so they cannot drift.

A ledger applies these atomically (the memory ledger under a lock, DynamoDB as
condition expressions); keeping the decision in one pure function means the contract
suite tests one rule, not one per adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Literal

from durable.core.ids import key_shard
from durable.core.model import (
    RunError,
    RunRecord,
    RunStatus,
    StepKind,
    StepRecord,
    StepStatus,
    format_time,
    parse_time,
)
from durable.core.ports import ChildReport, RunGuard

ClaimKind = Literal["free", "takeover"]

# Only these may be claimed; COMPENSATING keeps its status through a claim.
CLAIMABLE = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.COMPENSATING)


def claim_kind(run: RunRecord, owner: str, stale_before: str) -> ClaimKind | None:
    """How ``owner`` may claim ``run`` now, or None (terminal or busy)."""
    if run.status not in CLAIMABLE:
        return None
    if run.lease_owner is None or run.lease_owner == owner:
        return "free"
    if run.lease_until is not None and run.lease_until < stale_before:
        return "takeover"
    return None


def claimed(
    run: RunRecord,
    owner: str,
    now: str,
    lease_until: str,
    kind: ClaimKind,
    due_at: str | None = None,
    *,
    stale_before: str | None = None,
) -> RunRecord:
    """``run`` as ``owner``'s claim leaves it (``stale_before``: the claim's, for the
    stamp's skew allowance: ``woke_stamp``)."""
    status = run.status if run.status == RunStatus.COMPENSATING else RunStatus.RUNNING
    takeover = due_at or lease_until
    keep = keeps_due(run.due_at, takeover)
    return replace(
        run,
        status=status,
        lease_owner=owner,
        lease_until=lease_until,
        due_at=run.due_at if keep else takeover,
        woke_at=woke_stamp(run.woke_at, now, stale_before or now),
        fence=run.fence + 1,
        takeovers=run.takeovers + (1 if kind == "takeover" else 0),
        updated_at=now,
    )


def woke_stamp(previous: str | None, now: str, stale_before: str) -> str:
    """The claim's stamp (``RunRecord.woke_at``; ``durable.core.sleeps``): its time, or
    the previous stamp when that is later by no more than the clock-skew allowance
    (``now - stale_before``), so a claimer whose clock is a little behind does not turn a
    sleep that was over back into one that waits. A stamp further ahead came from a
    clock that is wrong: this claim's time replaces it, and the sleeps that stamp ended
    early wait again, bounded by the allowance from then on."""
    if previous is None or previous <= now:
        return now
    ahead_limit = format_time(parse_time(now) + (parse_time(now) - parse_time(stale_before)))
    return previous if previous <= ahead_limit else now


def keeps_due(due_at: str | None, takeover: str) -> bool:
    """Whether a claim leaves the run's due time as it is rather than moving it to the
    moment its lease can be taken over (``takeover``).

    Why: the due index is keyed by the due time, so each move of it is a delete and a put
    in the index (2 write units), and a run's claims are most of its moves. A due time no
    later than the takeover moment already makes the sweeper look at the run no later than
    it would for the takeover, and a look at a run whose lease is still live moves the due
    time to the takeover moment then, without invoking anyone (``sweep_trigger``): a dead
    owner is found no later than before. A claim that comes before a later due time (an
    event that woke a run waiting days), or to a run without one, must move it: the
    sweeper would find a dead owner only then, or never.
    """
    return due_at is not None and due_at <= takeover


def lease_changes(run: RunRecord, end: datetime, skew: timedelta) -> dict[str, Any]:
    """The run item's changes that set its lease to end at ``end`` (a renewal, a
    checkpoint). ``run`` is the holder's view of the item, whose due time may be older
    than the stored one: the sweeper, meeting the live lease, may have moved it to that
    lease's takeover moment. A lease that ends no earlier keeps a due time no later than
    its new takeover moment (``keeps_due``): the stored one is then either that one or
    the sweeper's, which is no later either. A lease cut shorter (a checkpoint inside an
    invocation whose claim leased all of it) always writes the new takeover moment: the
    sweeper's would be the longer lease's, and a dead owner would be found that late (a
    review found 13 minutes)."""
    until = format_time(end)
    changes: dict[str, Any] = {"lease_until": until}
    takeover = format_time(end + skew)
    shorter = run.lease_until is not None and until < run.lease_until
    if shorter or not keeps_due(run.due_at, takeover):
        changes["due_at"] = takeover
    return changes


def sweep_trigger(
    run: RunRecord | None, due_at: str, retrigger_at: str, stale_before: str, skew: timedelta
) -> tuple[bool, str | None]:
    """What the sweeper does with a run the due index shows due at ``due_at``: (invoke a
    worker, the run's new due time), or (False, None) to leave it (it ended, or its due
    time moved since the index was read).

    A run no worker holds (no lease, or a lease a claim may take over: ``claim_kind``) is
    invoked, due again at ``retrigger_at`` should that invocation be lost. A run whose
    lease is live is not invoked (the claim would fail): it becomes due at the moment its
    lease can be taken over, which a claim that kept an earlier due time did not write
    (``keeps_due``).
    """
    if run is None or run.terminal or run.due_at != due_at:
        return False, None
    if run.lease_owner is None or run.lease_until is None or run.lease_until < stale_before:
        return True, retrigger_at  # no lease, or one a claim may take over (``claim_kind``)
    return False, format_time(parse_time(run.lease_until) + skew)


# What a listing carries of each run (the API's RunSummary): the attention index projects
# these and nothing else (template.yaml, a test holds them equal), so a run's input,
# output, lease and operations are not copied into it on every write of the run item; a
# listing by workflow reads them from the run items of its page (``listing_partition``).
# Every ledger returns listed runs cut to these fields, whatever its server holds, so no
# caller can come to rely on more.
LISTED_FIELDS = (
    "run_id",
    "workflow",
    "version",
    "status",
    "needs_attention",
    "created_at",
    "updated_at",
    "requested_by",
    "idempotency_key",
    "cancel_requested",
    "continued_from",
    "parent",
    "error",
    "queued_at",
    "start_at",
)


# A listing by workflow reads its page's run items from the table (the listing index
# holds keys only), so it shows two fields no index projects: what a waiting run waits
# for, and the progress a run reported, kept once it ended. The attention index projects
# ``LISTED_FIELDS`` alone; a listing of it leaves these at None.
PAGE_FIELDS = (*LISTED_FIELDS, "waiting_for", "progress")


def listed(run: RunRecord) -> RunRecord:
    """``run`` as a listing shows it: the page's fields, every other one at its default
    (``input`` and ``input_hash`` empty)."""
    return RunRecord(input="", input_hash="", **{f: getattr(run, f) for f in PAGE_FIELDS})


# The kinds of wait a person answers: a run waiting on one wants a person.
PERSON_WAITS = frozenset({"callback"})
_WAIT_ORDER = ("callback", "signal", "condition", "child", "sleep", "retry")


def waiting_for(waits: list[tuple[str, str, str | None]]) -> str | None:
    """What a run parked on ``waits`` (kind, name, due or expiry) waits for, as the run
    item and the listing say it: a person's answer first (it is why someone looks), else
    the wait that ends first. ``callback approval until 2026-12-07T08:00:00.000Z (+1 more)``."""
    if not waits:
        return None
    first = min(
        waits,
        key=lambda w: (
            _WAIT_ORDER.index(w[0]) if w[0] in _WAIT_ORDER else len(_WAIT_ORDER),
            w[2] or "~",
        ),
    )
    kind, name, until = first
    text = f"{kind} {name}" + (f" until {until}" if until else "")
    return text + (f" (+{len(waits) - 1} more)" if len(waits) > 1 else "")


def waiting_for_extended(
    shown: str | None, name: str, before: str | None, after: str | None
) -> str | None:
    """The run item's ``waiting_for`` once a heartbeat moved callback ``name``'s expiry
    from ``before`` to ``after``, or None to leave it as it is.

    The text was written when the run parked, naming the wait that ends first with its
    expiry then; a heartbeat moves that expiry without waking the run, so without this
    the listing would go on showing the old time until the run parks again. Only a text
    that names this callback with its old expiry is rewritten (the same wait, the new
    time, the "(+N more)" kept): any other means the run parked since, and its worker
    wrote what is true now. The wait named stays the one a person answers; if another
    of the run's waits now ends first, the next park names it."""
    if shown is None or before is None or after is None or before == after:
        return None
    named = f"callback {name} until {before}"
    if shown != named and not shown.startswith(named + " (+"):
        return None
    return f"callback {name} until {after}" + shown[len(named) :]


def wants_a_person(status: RunStatus, needs_attention: bool, waiting: str | None) -> bool:
    """Whether a run is one a person should look at ("Needs attention"): the engine
    parked it for one (``needs_attention``), it FAILED, or it waits on a person's answer.
    The memory ledger lists by this rule; the DynamoDB ledger keeps the sparse attention
    index's key by it on every write that can change it (a claim always removes it: a
    claimable run is live, unflagged, and no longer waiting)."""
    if needs_attention or status == RunStatus.FAILED:
        return True
    return status == RunStatus.WAITING and (waiting or "").split(" ", 1)[0] in PERSON_WAITS


def positions_above(position: str) -> list[str]:
    """Every position that contains ``position`` (``0004.0002.0001`` -> ``0004``,
    ``0004.0002``): where a batch that owns it would be recorded."""
    parts = position.split(".")
    return [".".join(parts[:depth]) for depth in range(1, len(parts))]


def decided_batch_above(position: str, records: Mapping[str, StepRecord]) -> bool:
    """Whether a batch that contains ``position`` has decided: a wait left open in a
    branch decided without it (an approval beaten by an automatic one under
    ``first_successful``) is waited on by nobody. ``records`` holds at least the
    ``positions_above`` it: the worker's loaded history, or the API's one read of them."""
    return any(
        (above := records.get(p)) is not None
        and above.kind == StepKind.BATCH
        and above.status.final
        for p in positions_above(position)
    )


def check_listing(workflow: str | None, needs_attention: bool | None) -> None:
    """Listing is served by the listing or the attention index, never a table scan."""
    if not needs_attention and workflow is None:
        raise ValueError(
            "list_runs needs workflow= or needs_attention=True (served by an index, "
            "never a table scan)"
        )


# --- where a run sits in its workflow's listing -----------------------------------------
#
# A listing by workflow is served by an index sorted by ``list_sk``. Its first layout,
# ``<status>#<updated_at>``, moved the index entry on every transition (a claim, a
# suspension, a resume, the end), and DynamoDB bills a moved index key as a delete and a
# put. A key with no status at all never moves, but then a listing by status is a filter
# over every run the workflow ever had: a deploy check and an ``overlap=skip`` schedule
# list the unfinished ones, and read all the finished ones to find them.
#
# So the key holds the run's *phase* only: ``open#<created_at>#<run id>`` from its
# creation to its end, ``done#<ended at>#<run id>`` after. It moves once, when the run
# ends (and back when a retry reopens a failed run). Newest first within each phase, the
# open runs above the finished ones.
#
# The index projects the keys and nothing else: a projected ``status`` or ``updated_at``
# is rewritten in the index by every transition that changes it (a unit each: a claim, a
# suspension, the next claim), and an entry whose key and projection do not change costs
# nothing. A listing reads the run items of the page it lists (one BatchGetItem) for what
# it shows, and the status a filter wants is the one the run item holds.
#
# And the key is spread: one partition takes about 1,000 write units a second, and a sort
# key that grows with time keeps DynamoDB from splitting one for heat. Keyed by the
# workflow alone, every run of a workflow wrote its entries to one partition, so a
# workflow throttled near 1,000 / (units a run writes there) runs a second. The partition
# is the workflow and one of ``LISTING_SHARDS`` shards of the run id
# (``durable.core.ids.key_shard``); a listing reads the shards newest first and merges
# them, so its order is the one a single partition had. The attention index is spread the
# same way: a failure storm flags every failing run at once.

OPEN_LISTING, DONE_LISTING = "open#", "done#"
# Few enough that a listing's page merges them in one round of queries, enough that one
# workflow at 1,000 runs a second writes each about a third of a partition's limit
# (docs/performance.md, "Capacity"). Readers and writers must agree: never change it on a
# live table.
LISTING_SHARDS = 8
ATTENTION_SHARDS = 8


def listing_partition(workflow: str, run_id: str) -> str:
    """The listing index's partition of a run: ``WF#<shard>#<workflow>`` (the shard
    first, so no workflow name can spell another's)."""
    return f"WF#{key_shard(run_id, LISTING_SHARDS)}#{workflow}"


def listing_partitions(workflow: str) -> tuple[str, ...]:
    """Every partition a listing of ``workflow`` merges."""
    return tuple(f"WF#{shard}#{workflow}" for shard in range(LISTING_SHARDS))


def attention_partition(run_id: str) -> str:
    """The attention index's partition of a run that wants a person: ``ATTENTION#<shard>``."""
    return f"ATTENTION#{key_shard(run_id, ATTENTION_SHARDS)}"


def attention_partitions() -> tuple[str, ...]:
    return tuple(f"ATTENTION#{shard}" for shard in range(ATTENTION_SHARDS))


def listing_key(run_id: str, status: str, created_at: str, updated_at: str) -> str:
    """``list_sk`` of a run written whole (a create): its phase, and when it began."""
    if RunStatus(status).terminal:
        return f"{DONE_LISTING}{updated_at}#{run_id}"
    return f"{OPEN_LISTING}{created_at}#{run_id}"


def reopening(statuses: tuple[str, ...], changes: Mapping[str, Any]) -> bool:
    """Whether an operation allowed only on ended runs (``statuses``, all final) that
    sets an unfinished status reopens the run: a retry, with or without a step to reopen
    (a run that failed in its own code has none). The only writes from a final status
    back to an open one; every other write either cannot meet an ended run or keeps it
    ended."""
    if "status" not in changes or not statuses:
        return False
    opens = not RunStatus(str(changes["status"])).terminal
    return opens and all(RunStatus(status).terminal for status in statuses)


def relisted(run_id: str, changes: Mapping[str, Any], *, reopens: bool = False) -> str | None:
    """The new ``list_sk`` of an update by ``changes``, None when it stays.

    A change to a final status ends the run: ``done#<updated_at>``. A retry reopens a
    failed run (``reopens``: see ``reopening``): ``open#<updated_at>``, listed as if it
    began then. Every other change leaves the key, so it is written in place."""
    if "status" not in changes or "updated_at" not in changes:
        return None
    status = RunStatus(str(changes["status"]))
    if status.terminal:
        return f"{DONE_LISTING}{changes['updated_at']}#{run_id}"
    if reopens:
        return f"{OPEN_LISTING}{changes['updated_at']}#{run_id}"
    return None


def listing_phase(status: str | None) -> str | None:
    """The key range (a prefix of ``list_sk``) a listing of ``status`` reads; None: the
    whole workflow."""
    if status is None:
        return None
    return DONE_LISTING if RunStatus(status).terminal else OPEN_LISTING


def guard_holds(run: RunRecord, guard: RunGuard) -> bool:
    if run.fence != guard.fence or run.lease_owner != guard.owner:
        return False
    if guard.inbox is not None and run.inbox != guard.inbox:
        return False
    if guard.statuses and run.status.value not in guard.statuses:
        return False
    if guard.alive_at is not None and (run.lease_until is None or run.lease_until < guard.alive_at):
        return False
    return not (guard.no_cancel and run.cancel_requested)


def step_replaceable(stored: StepRecord | None, step: StepRecord) -> bool:
    """Whether writing ``step`` may replace ``stored`` at the same position.

    A final record is never replaced: first writer wins, and the loser adopts it. A
    pending record (WAITING, RUNNING, RETRYABLE_FAILED) may be replaced by its own
    worker's next write, but never by a worker holding an older fence: such a worker lost
    its lease to a newer owner whose pending wait (a callback whose URL is already out, a
    backoff already armed) must stand. This is the whole fence of a plain step write, in
    one item's condition; writes that need the run's lease itself add the run guard.

    A timeout (TIMED_OUT) replaces a wait only if the wait's stored expiry is not later
    than the one the writer timed out on: a callback's heartbeat moves its expiry on in
    the stored record, and a worker looking at an older view of it must not end it. The
    condition is on the wait's own item, so events elsewhere in the run (other callbacks'
    heartbeats, answers, signals) never hold a timeout back.
    """
    if stored is None:
        return True
    if stored.status.final or stored.fence > step.fence:
        return False
    return not (
        step.status == StepStatus.TIMED_OUT
        and stored.expires_at is not None
        and step.expires_at is not None
        and stored.expires_at > step.expires_at
    )


RUN_FIELDS = frozenset(RunRecord.__dataclass_fields__)
IMMUTABLE_RUN_FIELDS = frozenset({"run_id", "workflow", "created_at", "input", "input_hash"})


def check_changes(changes: dict[str, Any]) -> None:
    unknown = set(changes) - RUN_FIELDS
    if unknown:
        raise ValueError(f"unknown run fields {sorted(unknown)}")
    frozen = set(changes) & IMMUTABLE_RUN_FIELDS
    if frozen:
        raise ValueError(f"run fields {sorted(frozen)} never change")


def normalize_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """Coerce wire forms (status words, error dicts) to the record's types."""
    check_changes(changes)
    out = dict(changes)
    if "status" in out and out["status"] is not None:
        out["status"] = RunStatus(out["status"])
    if isinstance(out.get("error"), dict):
        out["error"] = RunError.from_dict(out["error"])
    for flag in ("needs_attention", "cancel_requested", "cancel_compensate"):
        if flag in out and out[flag] is None:
            out[flag] = False
    if "status" in out and "waiting_for" not in out:
        out["waiting_for"] = None  # a new status: what it waited for is over
    return out


def apply_changes(run: RunRecord, changes: dict[str, Any]) -> RunRecord:
    return replace(run, **normalize_changes(changes))


# What a child's report changes in its parent's WAITING record, and nothing else: the
# DynamoDB ledger writes these attributes in its update expression, the memory ledger
# calls ``settle_child_record``; the contract suite holds the two to the same record.
# (``detail`` only when the report names the child's version.)
CHILD_REPORT_FIELDS = ("status", "output", "error_type", "error_summary", "updated_at", "detail")


def settle_child_record(waiting: StepRecord, report: ChildReport, now: str) -> StepRecord:
    """The parent's record at ``report.position`` once its child's report is in: the
    child's result (DONE) or its error (TERMINAL_FAILED, error type and message), and
    ``detail`` naming the child and the version it ran (the result is decoded by that
    version's annotation); the rest of the record (its name, its fence) unchanged. A
    report without a version (a child of an older engine) leaves the detail as it was."""
    detail = waiting.detail
    if report.version is not None:
        detail = {"child": report.child_id, "version": report.version}
    return replace(
        waiting,
        status=report.status,
        output=report.output,
        error_type=report.error_type,
        error_summary=report.error_message,
        detail=detail,
        updated_at=now,
    )


def children_batch(steps: list[StepRecord], children: list[RunRecord]) -> str:
    """The parent's run id of a batch of child starts (``Ledger.start_children``), after
    the checks every ledger makes before writing any of it: a record per child, all in
    one parent, no more than one DynamoDB transaction holds, each item within its size."""
    from durable.core.limits import check_item_size, record_size
    from durable.core.ports import MAX_CHILDREN_PER_START, TRANSACTION_BYTES

    if not steps or len(steps) != len(children) or len(steps) > MAX_CHILDREN_PER_START:
        raise ValueError(
            f"start_children takes 1 to {MAX_CHILDREN_PER_START} children, a record each "
            f"(got {len(steps)} records for {len(children)} children)"
        )
    parent = steps[0].run_id
    if any(s.run_id != parent for s in steps):
        raise ValueError("start_children: every record must belong to one parent run")
    total = 0
    for step, child in zip(steps, children, strict=True):
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        check_item_size(child, f"the input of run {child.run_id}")
        total += record_size(step) + record_size(child)
    if total > TRANSACTION_BYTES:
        raise ValueError(
            f"start_children: {total} bytes of items is over what one transaction holds "
            f"(4 MB; {TRANSACTION_BYTES} with head room): start fewer at once"
        )
    return parent
