"""A declared lifetime's TTL on every ledger (``durable.core.lifetime``): every item of
such a run is written with its ``purge_at`` and read back with it, and the purge the
table's stream starts leaves those items to TTL (no write unit), while the purge of an
id's leftovers before a new run replays still deletes them."""

from __future__ import annotations

from typing import Any

from durable.core.model import RunStatus, SignalRecord
from tests.support.records import make_run, make_step, t

TTL = 1_900_000_000


def declared(ledger: Any, **overrides: Any) -> None:
    ledger.create_run(
        make_run(status=RunStatus.WAITING, due_at=None, items_purge_at=TTL, **overrides)
    )
    ledger.write_step(make_step(position="0001", updated_at=t(10), purge_at=TTL))
    ledger.add_signal(SignalRecord("RUN1", "go", "01OLD", '"x"', t(11), purge_at=TTL), now=t(11))


def test_every_item_of_a_declared_run_is_read_back_with_its_ttl(ledger: Any) -> None:
    # GIVEN a run whose items carry its TTL, with a large input kept apart on DynamoDB
    declared(ledger, input='"' + "x" * 2000 + '"')
    # WHEN it is read back
    history = ledger.load("RUN1")
    # THEN the run says its items' TTL, and each item carries it; the run item has none
    # while it lives (``ended_purge_at`` gives it one when it ends)
    assert history is not None
    assert history.run.items_purge_at == TTL and history.run.purge_at is None
    assert history.run.input == '"' + "x" * 2000 + '"'
    assert [s.purge_at for s in history.steps.values()] == [TTL]
    assert [s.purge_at for s in history.signals] == [TTL]
    assert ledger.get_run("RUN1").items_purge_at == TTL


def test_the_stream_purge_leaves_items_with_their_own_ttl(ledger: Any) -> None:
    # GIVEN a partition holding a declared run's step and signal, and an item without TTL
    declared(ledger)
    ledger.write_step(make_step(position="0002", updated_at=t(20)))
    # WHEN the stream's purge runs (``keep_expiring``)
    # THEN it deletes only the item without a TTL of its own
    assert ledger.purge_leftovers("RUN1", before=t(100), keep_expiring=True) == 1
    history = ledger.load("RUN1")
    assert history is not None
    assert sorted(history.steps) == ["0001"] and len(history.signals) == 1
    # AND the purge of leftovers before a new run of the id replays deletes them too
    assert ledger.purge_leftovers("RUN1", before=t(100)) == 2
    history = ledger.load("RUN1")
    assert history is not None and history.steps == {} and history.signals == []


def test_deleting_a_run_item_takes_only_that_finished_run(ledger: Any) -> None:
    # GIVEN a run still waiting, and a finished one
    declared(ledger)
    ledger.create_run(make_run("RUN2", status=RunStatus.SUCCEEDED, due_at=None))
    waiting, done = ledger.get_run("RUN1"), ledger.get_run("RUN2")
    # THEN the waiting one's item is never deleted, nor the finished one's under another
    # run's creation (a later run of the id)
    assert ledger.delete_run("RUN1", created_at=waiting.created_at) is False
    assert ledger.delete_run("RUN2", created_at=t(999)) is False
    assert ledger.get_run("RUN1") == waiting and ledger.get_run("RUN2") == done
    # AND the finished one's is, once
    assert ledger.delete_run("RUN2", created_at=done.created_at) is True
    assert ledger.get_run("RUN2") is None and ledger.load("RUN2") is None
    assert ledger.delete_run("RUN2", created_at=done.created_at) is False
