"""The reads of a ledger wrapper, forwarded one by one (``ForwardReads``).

A wrapper of the ledger port (the write boundary, the history cache, an observer) acts on
some writes and passes the rest on. Passing them on by ``__getattr__`` hid from the type
checker which methods a wrapper actually implements: a write added to the port later
went straight past every wrapper, the write boundary included, and nothing said so.

So a wrapper subclasses ``ForwardReads`` and ``Ledger`` explicitly: the reads come from
here, method by method, and every write of ``LedgerWrites`` must be written out in the
wrapper itself (to act on it, or to pass it on with a line saying why). mypy refuses to
instantiate a wrapper that leaves one out, because an explicit subclass of a Protocol
inherits its empty bodies as abstract methods; ``tests/unit/test_ledger_wrappers.py``
checks the same at run time.

There is deliberately no base that forwards every write too: a wrapper built on one
would pass on a write added later without anyone deciding it should.
"""

from __future__ import annotations

from durable.core.flow import GateState
from durable.core.model import RunHistory, RunRecord, StepRecord
from durable.core.ports import Ledger, LedgerReads, Page


class ForwardReads(LedgerReads):
    """Every read of the port passed to ``self._ledger`` unchanged."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @property
    def shards(self) -> int:
        return self._ledger.shards

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._ledger.get_run(run_id)

    def load(self, run_id: str) -> RunHistory | None:
        return self._ledger.load(run_id)

    def get_step(self, run_id: str, position: str) -> StepRecord | None:
        return self._ledger.get_step(run_id, position)

    def get_steps(self, run_id: str, positions: list[str]) -> dict[str, StepRecord]:
        return self._ledger.get_steps(run_id, positions)

    def read_gate(self, name: str) -> GateState:
        return self._ledger.read_gate(name)

    def due_runs(
        self, shard: int, *, before: str, limit: int, cursor: str | None = None
    ) -> Page[tuple[str, str]]:
        return self._ledger.due_runs(shard, before=before, limit=limit, cursor=cursor)

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
        return self._ledger.list_runs(
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
        return self._ledger.open_runs(workflow, limit=limit, cursor=cursor)
