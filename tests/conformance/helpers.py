"""What the conformance port shares: running a workflow on ``LocalRunner`` and reading back
what the peer's requirements assert (the result, the run's status, the invocations it took,
the ledger's records), and the codecs the cases with ``serdes=`` share.

The peer (the AWS Lambda durable functions conformance suite) asserts an execution history
of events (``StepStarted``, ``WaitSucceeded``, ``InvocationCompleted``, ...). Our ledger
keeps one record per position instead, so each case asserts the same facts in our terms:

* an ``InvocationCompleted`` is one invocation of the run: ``Played.invocations`` lists
  each one's outcome (``"suspended"``, ``"succeeded"``, ``"failed"``);
* a step's started/succeeded/failed events are one record with its attempts;
* ``ExecutionSucceeded`` / ``ExecutionFailed`` are the run's status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from durable import App, RunStatus
from durable.core.model import RunRecord, StepRecord, parse_time
from durable.testing import LocalRunner

# A peer result over its 256 KB checkpoint limit fits in our 400 KB item; half a megabyte
# does not, and goes to the payload store (durable.core.claim_check).
OVER_ITEM_LIMIT = 500 * 1024


@dataclass
class Played:
    """A run on a ``LocalRunner``, and what the assertions read from it."""

    runner: LocalRunner
    run_id: str
    started: datetime

    @property
    def run(self) -> RunRecord:
        return self.runner.get_run(self.run_id)

    @property
    def status(self) -> RunStatus:
        return self.run.status

    @property
    def invocations(self) -> list[str]:
        """Each invocation of this run, by its outcome: the peer's ``InvocationCompleted``
        events (``"suspended"`` between them, the last one ``"succeeded"`` or ``"failed"``)."""
        return [o.result for o in self.runner.outcomes if o.run_id == self.run_id]

    def result(self) -> Any:
        return self.runner.result(self.run_id)

    def records(self) -> list[StepRecord]:
        return self.runner.history(self.run_id)

    def record(self, name: str) -> StepRecord:
        """The one record named ``name`` (a function's name: its qualified name's last part)."""
        (found,) = [r for r in self.records() if short(r.name) == name]
        return found

    def names(self) -> list[tuple[str, str]]:
        """(name, status) of every record in position order, functions by their own names."""
        return [(short(r.name), r.status.value) for r in self.records()]

    def shape(self) -> list[tuple[str, str, str, str]]:
        """(position, kind, name, status) of every record, in position order."""
        return [(r.position, r.kind.value, short(r.name), r.status.value) for r in self.records()]

    def error_type(self) -> str | None:
        error = self.run.error
        return error.type if error is not None else None

    def error_message(self) -> str:
        error = self.run.error
        return error.message if error is not None else ""

    def seconds_after_start(self, stamp: str | None) -> float:
        """A ledger time as seconds since the run started."""
        assert stamp is not None
        return (parse_time(stamp) - self.started).total_seconds()

    def advance(
        self, delta: timedelta | None = None, *, seconds: float = 0, minutes: float = 0
    ) -> Played:
        """Let time pass (``LocalRunner.advance``: every wake-up on the way at its time)."""
        self.runner.advance(delta or timedelta(seconds=seconds, minutes=minutes))
        return self


def short(name: str) -> str:
    """A step's recorded name without its function's enclosing scopes (``f.<locals>.g``
    is ``g``); a name given with ``name=`` has no dots and stays as it is."""
    return name.rsplit(".", 1)[-1] if "<locals>" in name else name


def play(
    app: App,
    workflow: str,
    input: Any = None,
    *,
    runner: LocalRunner | None = None,
    until: timedelta | None = None,
) -> Played:
    """Start ``workflow`` and run it until nothing is due; with ``until``, let that much
    time pass too (every timer, retry and timeout on the way fires at its time)."""
    runner = runner or LocalRunner(app)
    started = runner.clock.now()
    run_id = runner.start(workflow, input).run_id
    runner.run_until_idle()
    played = Played(runner, run_id, started)
    if until is not None:
        played.advance(until)
    return played


def children(played: Played) -> list[RunRecord]:
    """The child runs this run started, in the order of their positions."""
    ledger = played.runner.memory_ledger
    runs = [ledger.get_run(r) for r in ledger.all_run_ids()]
    mine = [r for r in runs if r is not None and (r.parent or "").startswith(f"{played.run_id}@")]
    return sorted(mine, key=lambda r: r.parent or "")


class UpperCodec:
    """A custom codec as the peer's cases write one: strings upper-cased on the way in."""

    def serialize(self, value: str) -> str:
        return json.dumps(value.upper())

    def deserialize(self, text: str) -> str:
        decoded: str = json.loads(text)
        return decoded


class WrapCodec:
    """A symmetric codec: ``v`` is stored as ``{"wrapped": v}`` and read back as ``v``."""

    def serialize(self, value: Any) -> str:
        return json.dumps({"wrapped": value})

    def deserialize(self, text: str) -> Any:
        return json.loads(text)["wrapped"]
