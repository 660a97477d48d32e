"""``ctx.set_progress`` (issue 46, beyond the peers): a run that reports its progress.

Set by workflow code, kept by the execution and carried in the run item's next write (no
write of its own); not taken again while the code replays; lost, by design, when the
worker dies before its next write; checked (a wrong field named); not carried to a
successor; shown by the API's run view and listing and by ``durable runs``/``show``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from durable import App, Context, InvalidInput
from durable.adapters.nonces import MemoryNonceStore
from durable.api.service import ApiService
from durable.core.model import RunStatus
from durable.core.progress import NOTE_LIMIT, progress_text, progress_value
from durable.core.write_boundary import REDACTED_TOKEN
from durable.engine.lineage import successor
from durable.ops import render
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

app = App()


@app.step
def fetch(i: int) -> int:
    return i


@app.workflow(name="import")
def import_all(ctx: Context, n: int) -> int:
    for i in range(n):
        fetch(i)
        ctx.set_progress(i + 1, n, note=f"supplier {i}")
    ctx.wait_for_signal("go")
    fetch(99)  # after the wait: no new progress set
    ctx.wait_for_signal("again")
    return n


def test_the_value_set_last_is_stored_with_the_runs_next_write_and_no_write_of_its_own() -> None:
    """GIVEN a workflow that reports after each of three steps and then waits
    WHEN it runs until it waits
    THEN the run item holds the last value (done, total, note, when the code set it), and
    the run made exactly as many ledger writes as the same run without any progress."""
    runner = LocalRunner(app)
    run = runner.start("import", 3)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.WAITING
    at = stored.progress["at"] if stored.progress else ""
    assert stored.progress == {"done": 3, "total": 3, "note": "supplier 2", "at": at}
    assert at.startswith("20")

    quiet = App()

    @quiet.workflow(name="import")
    def without(ctx: Context, n: int) -> int:
        for i in range(n):
            fetch(i)
        ctx.wait_for_signal("go")
        return n

    other = LocalRunner(quiet)
    other.start("import", 3)
    other.run_until_idle()
    writes = ("ledger.update_run", "ledger.write_step", "ledger.write_step_fenced")
    assert [runner.call_count(w) for w in writes] == [other.call_count(w) for w in writes]


def test_replayed_code_does_not_set_its_values_again() -> None:
    """GIVEN a run that reported 3/3 at its first invocation and waits
    WHEN it is woken later (its code replays the three reports) and waits again without
    setting any progress
    THEN the stored value is still the one first set: the same time, not the replay's."""
    runner = LocalRunner(app)
    run = runner.start("import", 3)
    runner.run_until_idle()
    first = runner.get_run(run.run_id).progress
    runner.advance(minutes=5)
    runner.signal(run.run_id, "go")
    runner.run_until_idle()
    again = runner.get_run(run.run_id)
    assert again.status == RunStatus.WAITING and again.waiting_for == "signal again"
    assert again.progress == first


crashing = App()


@crashing.workflow(name="crashy")
def crashy(ctx: Context) -> str:
    fetch(1)
    ctx.set_progress(1, 2, note="first done")
    fetch(2)
    ctx.wait_for_signal("go")
    return "ok"


def test_a_value_set_before_a_crash_ahead_of_any_write_is_lost_until_the_code_sets_it_again() -> (
    None
):
    """GIVEN a worker that dies right before recording the step after a report (no write
    of the run item in between)
    THEN the report is not stored; the worker that takes the run over runs that code
    again past what was recorded and the report is stored with its suspension."""
    runner = LocalRunner(crashing)
    runner.crash_at("ledger.write_step", call=2)  # the second step's result
    run = runner.start("crashy")
    runner.run_until_idle()
    assert runner.crashes and runner.get_run(run.run_id).progress is None
    runner.advance(minutes=5)  # past the dead worker's lease: taken over
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.WAITING
    assert stored.progress is not None and stored.progress["note"] == "first done"


poking = App()
_runner: list[LocalRunner] = []


@poking.step
def poke(run_id: str) -> None:
    _runner[-1].signal(run_id, "other")  # an event arrives while the run is working


@poking.workflow(name="poked")
def poked(ctx: Context) -> str:
    poke(ctx.run_id)
    ctx.set_progress(5, note="poked")
    ctx.wait_for_signal("go")
    return "ok"


def test_a_value_survives_the_reload_after_an_event_refused_the_suspension() -> None:
    """GIVEN a run whose suspension is refused because an event came meanwhile (the worker
    reloads and replays, and the replay does not take the report again)
    THEN the report rides in the suspension that follows the reload."""
    runner = LocalRunner(poking)
    _runner.append(runner)
    run = runner.start("poked")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.WAITING
    assert stored.progress is not None and stored.progress["done"] == 5


checked = App()
BAD: dict[str, tuple[Any, Any, Any, str]] = {
    "negative": (-1, None, None, "done"),
    "over the total": (4, 3, None, "done"),
    "a bool": (True, None, None, "done"),
    "a float total": (1, 2.0, None, "total"),
    "a long note": (1, None, "x" * (NOTE_LIMIT + 1), "note"),
    "a secret note": (1, None, SecretStr("s3cret"), "note"),
}


@checked.workflow(name="bad")
def bad(ctx: Context, case: str) -> None:
    done, total, note, _ = BAD[case]
    ctx.set_progress(done, total, note=note)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_wrong_value_is_refused_naming_its_field(case: str) -> None:
    done, total, note, field = BAD[case]
    with pytest.raises(InvalidInput) as info:
        progress_value(done, total, note, "2026-01-01T00:00:00.000Z")
    assert info.value.field == field and f"{field}=" in str(info.value)
    runner = LocalRunner(checked)
    run = runner.start("bad", case)
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED and failed.progress is None
    assert failed.error is not None and failed.error.type == "InvalidInput"
    assert "s3cret" not in failed.error.message


def test_edges_are_accepted() -> None:
    assert progress_value(0, 0, "", "t") == {"done": 0, "total": 0, "note": "", "at": "t"}
    assert progress_value(7, None, None, "t") == {"done": 7, "at": "t"}
    assert progress_value(3, 3, "n" * NOTE_LIMIT, "t")["done"] == 3
    assert progress_text({"done": 1, "total": 4, "note": "n", "at": "t"}) == "1/4 (25%) n"
    assert progress_text({"done": 9, "at": "t"}) == "9"
    assert progress_text(None) == ""


chained = App()


@chained.workflow(name="chain")
def chain(ctx: Context, round: int) -> int:
    if round == 0:
        ctx.set_progress(10, 10, note="round 0 done")
        ctx.continue_as_new(1)
    ctx.wait_for_signal("go")
    if round == 1:
        ctx.set_progress(1, note="round 1")
    return round


def test_a_successor_starts_with_no_progress_and_the_predecessor_keeps_its_last() -> None:
    runner = LocalRunner(chained)
    run = runner.start("chain", 0)
    runner.run_until_idle()
    first = runner.get_run(run.run_id)
    assert first.progress is not None and first.progress["note"] == "round 0 done"
    nxt = successor(runner.engine.ledger.get_run, first)
    assert nxt is not None
    assert nxt.status == RunStatus.WAITING and nxt.progress is None
    runner.signal(nxt.run_id, "go")
    runner.run_until_idle()
    done = runner.get_run(nxt.run_id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.progress is not None and done.progress["done"] == 1
    assert "total" not in done.progress


tokens = App()


@tokens.workflow(name="leaky")
def leaky(ctx: Context) -> None:
    cb = ctx.create_callback("approval", timeout=timedelta(days=1))
    ctx.set_progress(1, 2, note=f"waiting on {cb.url}")
    cb.result()


def test_a_token_in_the_note_is_stored_redacted() -> None:
    runner = LocalRunner(tokens)
    run = runner.start("leaky")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.progress is not None
    note = stored.progress["note"]
    assert REDACTED_TOKEN in note and run.run_id + "." not in note.replace(REDACTED_TOKEN, "")


aio = App()


@aio.step(name="afetch")
async def afetch(i: int) -> int:
    return i


@aio.workflow(name="async-import")
async def async_import(ctx: Context, n: int) -> int:
    for i in range(n):
        await afetch(i)
        ctx.set_progress(i + 1, n)
    ctx.wait_for_signal("go")
    return n


def test_an_async_workflow_reports_through_the_same_context() -> None:
    runner = LocalRunner(aio)
    run = runner.start("async-import", 2)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.WAITING and stored.progress is not None
    assert (stored.progress["done"], stored.progress["total"]) == (2, 2)


def test_the_api_shows_progress_in_the_run_view_and_the_listing() -> None:
    """GIVEN a waiting run that reported 3/3
    THEN its view and a listing of its workflow (which reads the item of a run not ended:
    the listing indexes do not project progress) carry {done, total, note, at}; once the
    run ended its view still does."""
    runner = LocalRunner(app)
    run = runner.start("import", 3)
    runner.run_until_idle()
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    view = api.get_run(run.run_id).model_dump(mode="json")
    assert view["progress"] == {
        "done": 3,
        "total": 3,
        "note": "supplier 2",
        "at": runner.get_run(run.run_id).progress["at"],  # type: ignore[index]
    }
    page = api.list_runs(
        workflow="import", status=None, needs_attention=None, version=None, limit=10, cursor=None
    )
    (row,) = page.model_dump(mode="json")["runs"]
    assert row["progress"] == view["progress"] and row["waiting_for"] == "signal go"


def test_a_listing_shows_the_progress_an_ended_run_kept() -> None:
    """GIVEN a run that reported 3/3 and then ended
    THEN a listing of its workflow still shows its progress, as its own view does (the
    listing reads its page's run items: an ended child's row showed none)."""
    runner = LocalRunner(app)
    run = runner.start("import", 3)
    runner.run_until_idle()
    runner.signal(run.run_id, "go", None)
    runner.signal(run.run_id, "again", None)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    page = api.list_runs(
        workflow="import", status=None, needs_attention=None, version=None, limit=10, cursor=None
    )
    (row,) = page.model_dump(mode="json")["runs"]
    assert row["status"] == "SUCCEEDED"
    assert row["progress"] == api.get_run(run.run_id).model_dump(mode="json")["progress"]
    assert row["progress"]["done"] == 3


def test_durable_runs_has_a_progress_column_and_show_a_progress_line() -> None:
    progress = {"done": 3, "total": 300, "note": "supplier 12", "at": "2026-01-02T03:04:05.678Z"}
    row = {
        "run_id": "01RUN",
        "workflow": "import",
        "version": 1,
        "status": "RUNNING",
        "updated_at": "2026-01-02T03:04:06.000Z",
        "created_at": "2026-01-02T03:00:00.000Z",
        "needs_attention": False,
        "progress": progress,
    }
    table = render.render_runs([row, {**row, "run_id": "01OTHER", "progress": None}])
    header, _rule, first, second = table.splitlines()[:4]
    assert "progress" in header.split()
    assert "3/300 (1%)" in first and "%" not in second
    assert "3/300 (1%) supplier 12" in render.render_runs([row], wide=True)
    shown = render.render_run(row)
    assert "  progress 3/300 (1%) supplier 12  (set 2026-01-02T03:04:05.678Z)" in shown
    assert "progress" not in render.render_run({**row, "progress": None})


def test_the_operations_guide_example_runs() -> None:
    """docs/operations.md's example of a run's progress, run as it is written."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = guide.split("### A run's progress: `ctx.set_progress`", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None and "ctx.set_progress" in code.group(1)
    namespace: dict[str, Any] = {"__name__": "progress_guide"}
    exec(compile(code.group(1), "docs/operations.md", "exec"), namespace)
    runner = namespace["runner"]
    assert runner.get_run(namespace["run"].run_id).status == RunStatus.WAITING
