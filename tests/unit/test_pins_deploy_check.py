"""Pins on the pre-deploy check (durable/engine/deploy_check.py): each test names the mutants it
kills (ids of ``python -m tests.mutation --module durable/engine/deploy_check.py --list``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable import App
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.core.model import RunHistory, RunStatus
from durable.core.ports import LEDGER_WRITES, Page
from durable.engine.deploy_check import CheckWrote, ReadOnlyLedger, Report, check_deploy, check_run
from durable.engine.engine import Engine
from durable.testing import LocalRunner
from tests.unit import deploy_apps
from tests.unit.test_ledger_wrappers import call_with_placeholders


@pytest.mark.parametrize("name", LEDGER_WRITES)
def test_every_ledger_write_raises_through_the_read_only_ledger(name: str) -> None:
    """GIVEN the read-only ledger a check runs on WHEN any write method of the ledger port
    is called THEN CheckWrote, naming it; reads pass through. Each write is a method of
    its own (no ``__getattr__`` and no list of names that a write added later could miss:
    ``tests/unit/test_ledger_wrappers.py``)."""
    ledger = ReadOnlyLedger(MemoryLedger())
    with pytest.raises(CheckWrote, match=f"ledger.{name}"):
        call_with_placeholders(getattr(ledger, name))
    assert ledger.get_run("RUN1") is None


def asleep(count: int) -> LocalRunner:
    """``count`` orders asleep after their two steps, on the old code."""
    runner = LocalRunner(deploy_apps.old)
    for i in range(count):
        runner.start("order", f"o{i}")
    runner.run_until_idle()
    return runner


def engine_on(ledger: Any, app: App = deploy_apps.same) -> Engine:
    return Engine(app, ledger, MemoryInvoker(), MemoryEffectStore())


def test_a_clean_run_gets_no_advice_and_the_check_is_timed() -> None:
    """GIVEN a run in flight and unchanged code WHEN the deploy is checked THEN its verdict
    is "ok" with no advice, and the report says how long the check took (a fraction of a
    second here, never zero).

    Kills deploy_check-c6e653f5 (the advice's default "" -> "mutated"), deploy_check-
    6db7a3f0 (the time not recorded) and deploy_check-bcd73a75 (``now - began`` -> ``+``)."""
    runner = asleep(1)
    report = check_deploy(engine_on(ReadOnlyLedger(runner.memory_ledger)), ["order"])
    assert [(r.verdict, r.advice) for r in report.runs] == [("ok", "")]
    assert 0 < report.seconds < 60


def test_the_json_report_rounds_the_time_to_milliseconds() -> None:
    """GIVEN a report of no runs that took 0.1234567 s WHEN it is turned into JSON for CI
    THEN it says how many runs were checked and broken, and the time to the millisecond.

    Kills deploy_check-077fa064 ("seconds" -> "") and deploy_check-c56700bb (``round(...,
    3)`` -> 4)."""
    assert Report(seconds=0.1234567).to_json() == {
        "checked": 0,
        "broken": 0,
        "seconds": 0.123,
        "runs": [],
        "resume": None,  # a finished check: nothing to go on from
    }


class Listing:
    """A ledger whose listing is read through (``pages`` records each page size asked
    for), with ``stale`` run ids listed as RUNNING whatever they are now."""

    def __init__(self, ledger: Any, stale: tuple[str, ...] = ()) -> None:
        self.ledger = ledger
        self.stale = stale
        self.pages: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)

    def list_runs(self, **query: Any) -> Page[Any]:
        self.pages.append(query["limit"])
        page: Page[Any] = self.ledger.list_runs(**query)
        if query.get("status") == RunStatus.RUNNING.value and query.get("cursor") is None:
            extra = [replace(self.ledger.get_run(r), status=RunStatus.RUNNING) for r in self.stale]
            return Page([*page.items, *extra], page.cursor)
        return page


def test_the_runs_are_listed_a_hundred_at_a_time_by_default() -> None:
    """GIVEN a check with no page size given WHEN it lists the runs THEN it asks the
    ledger for pages of 100 (one query per workflow and status, never a scan).

    Kills deploy_check-ff64a9b9 (``page_size=100`` -> 101)."""
    listing = Listing(ReadOnlyLedger(asleep(1).memory_ledger))
    check_deploy(engine_on(listing), ["order"])
    assert listing.pages and set(listing.pages) == {100}


def test_every_page_of_runs_is_checked() -> None:
    """GIVEN three runs in flight WHEN the deploy is checked a page of one run at a time
    THEN all three are checked: the listing goes on page after page to the end.

    Kills deploy_check-0bfed549 (``cursor = page.cursor`` deleted: only the first page)."""
    runner = asleep(3)
    report = check_deploy(engine_on(ReadOnlyLedger(runner.memory_ledger)), ["order"], page_size=1)
    assert len(report.runs) == 3 and {r.verdict for r in report.runs} == {"ok"}


def test_a_run_that_finished_since_it_was_listed_is_not_checked() -> None:
    """GIVEN a run listed as RUNNING by a listing index that lags, which has since
    finished (its loaded item says SUCCEEDED) WHEN the deploy is checked THEN that run is
    skipped: only the loaded status counts.

    Kills deploy_check-7bcb500a (``and`` -> ``or``: a loaded run would be checked whatever
    its status)."""
    runner = LocalRunner(deploy_apps.old)
    done = runner.start("order", "o9").run_id
    runner.run_until_idle()
    runner.advance(hours=1)
    assert runner.get_run(done).status == RunStatus.SUCCEEDED
    listing = Listing(ReadOnlyLedger(runner.memory_ledger), stale=(done,))
    assert check_deploy(engine_on(listing), ["order"]).runs == []


def test_a_run_that_cannot_be_replayed_is_reported_unchecked() -> None:
    """GIVEN a stored run whose creation time cannot be read (a damaged item), so no replay
    of it can even be set up WHEN it is checked THEN its verdict is "unchecked", with the
    error as the advice, not an exception that would end the whole check.

    Kills deploy_check-70bbe8c0 / 96a181c1 (the "unchecked" verdict not given),
    deploy_check-8a5ec46c (no advice) and deploy_check-877786e2 (no verdict returned)."""
    runner = asleep(1)
    (run_id,) = runner.memory_ledger.all_run_ids()
    history = runner.memory_ledger.load(run_id)
    assert history is not None
    damaged = RunHistory(replace(history.run, created_at="yesterday"), history.steps, [])
    verdict = check_run(engine_on(ReadOnlyLedger(runner.memory_ledger)), damaged)
    assert verdict.verdict == "unchecked"
    assert verdict.advice.startswith("could not replay: ValueError: ")
