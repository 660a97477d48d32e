"""Values too large for a ledger item are kept aside and referenced: the claim check.

DynamoDB holds at most 400 KB per item, and a run's item, a step's record or a signal
must each fit in one. So ``ClaimCheck`` sits in front of the ledger (under the write
boundary, which redacts tokens first) and looks at the texts that carry user values:
a run's input and output, a step's output and checkpoint state, a signal's payload, a
child's report to its parent. A text longer than ``offload_bytes`` is put in a
``PayloadStore`` (S3 on AWS, a folder under ``durable dev``, memory in tests) and the
field holds a reference instead, which is what the DynamoDB console shows::

    {"$durable.payload":{"object":"01JH…","sha256":"9f86d0…","bytes":524288}}

Every read through the wrapper resolves references back to the text, so the engine,
the read API, the console and replay see the value itself, and nothing else changes:
one conditional write per step, fenced waits, the explorer's invariants.

Why the key is ``<run id>/<object>`` with a fresh ULID for each put, and the run id is
taken from the record, never from the reference: a reference can only name a value of
the run whose record holds it, so an outside caller who sends a reference-shaped input
cannot make the engine read another run's value; and every put is a new object, so the
purge of an expired run (which deletes its objects written before a cutoff) can never
delete one that a new run under the same id (a keyed restart) has just written, as it
could if the key were the value's hash. The hash is in the reference and checked on
every read. A put whose ledger write then fails leaves an object nothing names; it is
deleted with the run's objects when the run is purged.

Why a small text shaped like a reference is stored by reference too: then every
reference in the ledger is one this wrapper wrote, and a value that merely looks like
one comes back as itself.

Why the values are safe to keep outside the ledger: a secret-typed value is sealed
before it gets here (``durable.core.serde``), and the write boundary has redacted any live
callback token, so the store holds exactly what the item would have held. Only the
purge of an expired run deletes objects (``purge_payloads``), never a worker or the API.

Without a store, writes pass unchanged (a value over the item limit is refused by the
ledger as ``PayloadTooLarge``) and a read that meets a reference fails with an error
that says to configure one, never hands the reference on as if it were the value.

Records of an earlier run under the same id (leftovers, which the engine drops after a
load: ``durable.core.retention``) are not resolved: their objects may be gone already.

Resolved texts are cached by key (content-addressed, so never stale), bounded in bytes:
a warm worker replaying a run does not fetch its large values again. A write puts its
object even when the cache holds the text: the cache says what the object held, not
that it is still there (a purge in another process may have deleted it since).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

from durable.core.clock import Clock, SystemClock
from durable.core.flow import GateState
from durable.core.ids import new_ulid
from durable.core.lifetime import lifecycle_days
from durable.core.model import (
    RunHistory,
    RunRecord,
    SignalRecord,
    StepRecord,
    copy_run,
    copy_step,
    parse_time,
)
from durable.core.ports import ChildReport, Claim, Ledger, Page, PayloadStore, RunGuard
from durable.core.retention import leftover_cutoff
from durable.errors import DurableError, PayloadTooLarge, StorageError

MARK = '{"$durable.payload":'
# Texts this long or shorter stay in the item. A DynamoDB write costs a unit per KB and
# an S3 put about four units' price, but adds a round trip to a write and a read: the
# default keeps every ordinary value in the item and moves only what threatens its limit
# (several fields of one item stay well under 400 KB together).
DEFAULT_OFFLOAD_BYTES = 64 * 1024
# No value may be larger: it is held in memory whole, on every replay, and the read API
# answers a run with its values in one Lambda response (at most 6 MB).
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
CACHE_BYTES = 64 * 1024 * 1024

R = TypeVar("R")


_OBJECT = re.compile(r"^[0-9A-Z]{26}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def payload_key(run_id: str, object_id: str) -> str:
    return f"{run_id}/{object_id}"


def is_reference(text: str | None) -> bool:
    return text is not None and text.startswith(MARK)


class _Cache:
    """Texts by key, least recently used first out once past ``limit`` bytes."""

    def __init__(self, limit: int = CACHE_BYTES) -> None:
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
            return text

    def add(self, key: str, text: str, size: int) -> None:
        if size > self._limit:
            return
        with self._lock:
            if key in self._texts:
                return
            self._texts[key] = text
            self._size += size
            while self._size > self._limit:
                _, old = self._texts.popitem(last=False)
                self._size -= len(old.encode("utf-8"))


class ClaimCheck(Ledger):
    """``ledger`` with large texts written to ``store`` and referenced; reads resolve.

    Every method of the port is written out here, reads too (each resolves what it
    returns): mypy refuses to build one that misses a method added to the port later."""

    def __init__(
        self,
        ledger: Ledger,
        store: PayloadStore | None,
        *,
        offload_bytes: int = DEFAULT_OFFLOAD_BYTES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Clock | None = None,
    ) -> None:
        self._ledger = ledger
        self.store = store
        self.clock = clock or SystemClock()
        self.offload_bytes = offload_bytes
        self.max_bytes = max_bytes
        self._cache = _Cache()

    # --- texts --------------------------------------------------------------------------

    def _out(self, run_id: str, text: str, what: str, purge_at: int | None = None) -> str:
        """``text`` itself (the same object) when it stays in the item, else a reference."""
        if self.store is None:
            return text  # the ledger refuses what does not fit
        if len(text) * 4 <= self.offload_bytes and not text.startswith(MARK):
            return text  # short even if every character took four bytes: the hot path
        data = text.encode("utf-8")
        if len(data) <= self.offload_bytes and not text.startswith(MARK):
            return text
        if len(data) > self.max_bytes:
            raise PayloadTooLarge(
                what,
                len(data),
                self.max_bytes,
                hint="Raise DURABLE_PAYLOAD_MAX_BYTES, or store the data elsewhere and "
                "pass a reference to it.",
            )
        digest = hashlib.sha256(data).hexdigest()
        object_id = new_ulid(self.clock.now())
        key = payload_key(run_id, object_id)
        # Kept as long as the item naming it: by the bucket's lifecycle when the item has
        # a TTL of its own (``durable.core.lifetime``), else until the purge.
        self.store.put(key, data, expire_days=lifecycle_days(purge_at, self.clock.now()))
        self._cache.add(key, text, len(data))
        held = {"object": object_id, "sha256": digest, "bytes": len(data)}
        return MARK + json.dumps(held, separators=(",", ":")) + "}"

    def _in(self, run_id: str, text: str) -> str:
        """The text a reference stands for (checked against its hash), or ``text``."""
        if not text.startswith(MARK):
            return text
        try:
            held = json.loads(text)["$durable.payload"]
            object_id, digest = str(held["object"]), str(held["sha256"])
        except (ValueError, KeyError, TypeError) as e:
            raise StorageError(
                f"run {run_id}: a malformed payload reference {text[:120]!r}", retryable=False
            ) from e
        if not (_OBJECT.match(object_id) and _SHA256.match(digest)):
            raise StorageError(
                f"run {run_id}: a malformed payload reference {text[:120]!r}", retryable=False
            )
        key = payload_key(run_id, object_id)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if self.store is None:
            raise StorageError(
                f"run {run_id} holds a value kept in the payload store ({key}), and none is "
                "configured here: set DURABLE_PAYLOAD_BUCKET (the stack's PayloadBucketName "
                "output; `durable check-deploy --payload-bucket`)",
                retryable=False,
            )
        data = self.store.get(key)
        if hashlib.sha256(data).hexdigest() != digest:
            raise StorageError(
                f"run {run_id}: payload {key} does not match its hash", retryable=False
            )
        resolved = data.decode("utf-8")
        self._cache.add(key, resolved, len(data))
        return resolved

    # --- records out (writes) -----------------------------------------------------------

    def _run_out(self, run: RunRecord) -> RunRecord:
        rid = run.run_id
        ttl = run.items_purge_at
        input = self._out(rid, run.input, f"the input of run {rid}", ttl)
        output = (
            run.output
            if run.output is None
            else self._out(rid, run.output, f"the result of run {rid}", ttl)
        )
        if input is run.input and output is run.output:
            return run
        copy = copy_run(run)
        copy.input, copy.output = input, output
        return copy

    def _step_out(self, step: StepRecord) -> StepRecord:
        what = f"the result of step {step.name!r} at {step.position}"
        ttl = step.purge_at
        output = (
            step.output if step.output is None else self._out(step.run_id, step.output, what, ttl)
        )
        checkpoint = step.checkpoint
        state = None if checkpoint is None else checkpoint.get("state")
        if isinstance(state, str):
            stored = self._out(step.run_id, state, f"the state of step {step.name!r}", ttl)
            if stored is not state:
                checkpoint = {**(checkpoint or {}), "state": stored}
        if output is step.output and checkpoint is step.checkpoint:
            return step
        copy = copy_step(step)
        copy.output, copy.checkpoint = output, checkpoint
        return copy

    def _signal_out(self, signal: SignalRecord) -> SignalRecord:
        payload = self._out(
            signal.run_id, signal.payload, f"signal {signal.name!r}", signal.purge_at
        )
        return signal if payload is signal.payload else replace(signal, payload=payload)

    def _changes_out(self, run_id: str, changes: Mapping[str, Any]) -> Mapping[str, Any]:
        out = dict(changes)
        # A final write of a run with a declared lifetime says its items' TTL (the run
        # item's is never later): its result is kept as long. Any other value is kept
        # until the purge.
        ttl = changes.get("items_purge_at")
        for name in ("input", "output"):
            value = changes.get(name)
            if isinstance(value, str):
                out[name] = self._out(
                    run_id,
                    value,
                    f"the {name} of run {run_id}",
                    ttl if isinstance(ttl, int) else None,
                )
        return out

    # --- records in (reads) -------------------------------------------------------------

    def _run_in(self, run: RunRecord) -> RunRecord:
        if not (is_reference(run.input) or is_reference(run.output)):
            return run
        copy = copy_run(run)
        copy.input = self._in(run.run_id, run.input)
        copy.output = None if run.output is None else self._in(run.run_id, run.output)
        return copy

    def _step_in(self, step: StepRecord) -> StepRecord:
        state = None if step.checkpoint is None else step.checkpoint.get("state")
        held = is_reference(state) if isinstance(state, str) else False
        if not (is_reference(step.output) or held):
            return step
        copy = copy_step(step)
        if step.output is not None:
            copy.output = self._in(step.run_id, step.output)
        if held and step.checkpoint is not None:
            copy.checkpoint = {**step.checkpoint, "state": self._in(step.run_id, str(state))}
        return copy

    def _signal_in(self, signal: SignalRecord) -> SignalRecord:
        if not is_reference(signal.payload):
            return signal
        return replace(signal, payload=self._in(signal.run_id, signal.payload))

    def resolve(self, value: Any) -> Any:
        """``value`` (anything a ledger read returns) with every reference resolved; the
        same object when it holds none."""
        if isinstance(value, StepRecord):
            return self._step_in(value)
        if isinstance(value, RunRecord):
            return self._run_in(value)
        if isinstance(value, RunHistory):
            run = self._run_in(value.run)
            # An earlier run's records under this id are dropped by the engine after the
            # load; their objects may be purged already, so they stay as they are.
            cutoff = "" if value.run.forked_from is not None else leftover_cutoff(value.run)
            steps = {
                p: s if s.updated_at < cutoff else self._step_in(s) for p, s in value.steps.items()
            }
            signals = [s if s.received_at < cutoff else self._signal_in(s) for s in value.signals]
            same = run is value.run and all(steps[p] is s for p, s in value.steps.items())
            if same and all(a is b for a, b in zip(signals, value.signals, strict=True)):
                return value
            return RunHistory(run, steps, signals)
        if isinstance(value, Claim):
            run = self._run_in(value.run)
            return value if run is value.run else Claim(run, value.took_over)
        if isinstance(value, SignalRecord):
            return self._signal_in(value)
        if isinstance(value, Page):
            return Page([self.resolve(item) for item in value.items], value.cursor)
        if isinstance(value, dict) and value and isinstance(next(iter(value.values())), StepRecord):
            return {p: self._step_in(s) for p, s in value.items()}
        if isinstance(value, tuple) and value and isinstance(value[0], RunRecord):
            return (self._run_in(value[0]), *value[1:])
        return value

    def _raw(self, method: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """``method``'s answer as the ledger gave it; the records an error carries are
        resolved."""
        try:
            return method(*args, **kwargs)
        except DurableError as error:
            for name in ("existing", "current"):
                held = getattr(error, name, None)
                if held is not None:
                    setattr(error, name, self.resolve(held))
            raise

    def _call(self, method: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """``method``'s answer resolved, and the records an error carries resolved too."""
        return self.resolve(self._raw(method, *args, **kwargs))  # type: ignore[no-any-return]

    def _kept(self, mine: R, sent: Any, stored: Any) -> R:
        """What a write returns: the engine's own record when the ledger kept the one
        sent (compared before resolving: a resolved copy is never the same object),
        else the stored one, resolved. The engine tells its write from an adopted one by
        identity (``durable.core.write_boundary``)."""
        return mine if stored is sent else self.resolve(stored)

    # --- reads: every answer resolved ----------------------------------------------------

    @property
    def shards(self) -> int:
        return self._ledger.shards

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._call(self._ledger.get_run, run_id)

    def load(self, run_id: str) -> RunHistory | None:
        return self._call(self._ledger.load, run_id)

    def get_step(self, run_id: str, position: str) -> StepRecord | None:
        return self._call(self._ledger.get_step, run_id, position)

    def get_steps(self, run_id: str, positions: list[str]) -> dict[str, StepRecord]:
        return self._call(self._ledger.get_steps, run_id, positions)

    def read_gate(self, name: str) -> GateState:
        return self._call(self._ledger.read_gate, name)

    def due_runs(
        self, shard: int, *, before: str, limit: int, cursor: str | None = None
    ) -> Page[tuple[str, str]]:
        return self._call(self._ledger.due_runs, shard, before=before, limit=limit, cursor=cursor)

    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        needs_attention: bool | None = None,
        version: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        return self._call(
            self._ledger.list_runs,
            workflow=workflow,
            status=status,
            needs_attention=needs_attention,
            version=version,
            limit=limit,
            cursor=cursor,
        )

    def open_runs(
        self, workflow: str, *, limit: int = 100, cursor: str | None = None
    ) -> Page[RunRecord]:
        return self._call(self._ledger.open_runs, workflow, limit=limit, cursor=cursor)

    # --- writes -------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> RunRecord:
        out = self._run_out(run)
        stored = self._raw(self._ledger.create_run, out)
        return self._kept(run, out, stored)

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        # Deletes an item: its objects go with ``purge_payloads``.
        return self._call(self._ledger.delete_run, run_id, created_at=created_at)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        # Deletes items: nothing to keep aside (their objects go with ``purge_payloads``).
        return self._call(
            self._ledger.purge_leftovers, run_id, before=before, keep_expiring=keep_expiring
        )

    def claim(
        self,
        run_id: str,
        owner: str,
        *,
        now: str,
        lease_until: str,
        stale_before: str,
        due_at: str | None = None,
    ) -> Claim | None:
        # Writes a lease, no value; the run item it returns is resolved.
        return self._call(
            self._ledger.claim,
            run_id,
            owner,
            now=now,
            lease_until=lease_until,
            stale_before=stale_before,
            due_at=due_at,
        )

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        return self._call(
            self._ledger.update_run, run_id, guard, self._changes_out(run_id, changes)
        )

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        self._call(
            self._ledger.continue_run,
            run_id,
            guard,
            self._changes_out(run_id, changes),
            self._run_out(successor),
        )

    def operate(
        self,
        run_id: str,
        *,
        statuses: tuple[str, ...],
        changes: Mapping[str, Any],
        operation: Mapping[str, str] | None = None,
        bump_inbox: bool = False,
        unleased: bool = False,
        reopen: StepRecord | None = None,
    ) -> RunRecord:
        return self._call(
            self._ledger.operate,
            run_id,
            statuses=statuses,
            changes=self._changes_out(run_id, changes),
            operation=operation,
            bump_inbox=bump_inbox,
            unleased=unleased,
            reopen=None if reopen is None else self._step_out(reopen),
        )

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        out = self._step_out(step)
        stored = self._raw(self._ledger.start_child, out, guard, self._run_out(child))
        return self._kept(step, out, stored)

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        return self._call(
            self._ledger.start_children,
            [self._step_out(s) for s in steps],
            guard,
            [self._run_out(c) for c in children],
        )

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        if report.output is not None:
            what = f"the result of child run {run_id}"
            output = self._out(report.parent_id, report.output, what)
            report = report if output is report.output else replace(report, output=output)
        return self._call(
            self._ledger.finish_child,
            run_id,
            guard,
            self._changes_out(run_id, changes),
            report,
            now=now,
        )

    def write_gate(self, name: str, state: GateState) -> bool:
        # A gate holds run ids and times, never a value.
        return self._call(self._ledger.write_gate, name, state)

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        out = self._step_out(step)
        stored = self._raw(self._ledger.write_step, out, guard)
        return self._kept(step, out, stored)

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        changes = self._changes_out(step.run_id, run_changes)
        return self._call(self._ledger.write_step_fenced, self._step_out(step), guard, changes)

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        self._call(
            self._ledger.complete_waiting, self._step_out(step), token_hash=token_hash, now=now
        )

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        self._call(
            self._ledger.extend_wait,
            self._step_out(step),
            token_hash=token_hash,
            now=now,
            waiting_for=waiting_for,
        )

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        self._call(self._ledger.add_signal, self._signal_out(signal), now=now)

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        out = self._step_out(step)
        stored = self._raw(self._ledger.consume_signal, out, signal, guard)
        return self._kept(step, out, stored)

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        # Moves a due time, no value.
        return self._call(
            self._ledger.claim_trigger,
            run_id,
            due_at,
            new_due_at,
            stale_before=stale_before,
            skew=skew,
        )

    def unresolved(self) -> Ledger:
        """The ledger beneath, for reads that need a run's state, never its values (a
        listing's waiting reason, a purge's look at the run item): no object is fetched."""
        return self._ledger

    def purge_payloads(self, run_id: str, *, before: str) -> int:
        """Delete the run's objects written before ``before`` (an expired run's purge)."""
        if self.store is None:
            return 0
        return self.store.delete_older(f"{run_id}/", parse_time(before))
