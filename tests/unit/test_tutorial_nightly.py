"""docs/tutorial-nightly-import.md, run: two nights of the supplier-price import with
LocalRunner (examples/nightly_prices.py), and every code block of the tutorial found in
that module or in this test, so the walk-through cannot drift from the code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable import RunRecord, RunStatus
from durable.core.claim_check import ClaimCheck
from durable.engine.replay_file import dumps, export_run
from durable.testing import LocalRunner
from examples import nightly_prices
from examples.nightly_prices import Catalogue, SupplierApi, SupplierReport

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial-nightly-import.md"


@pytest.fixture(autouse=True)
def fresh_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The module's fakes are its outside world; each test gets its own.
    monkeypatch.setattr(nightly_prices, "supplier_api", SupplierApi())
    monkeypatch.setattr(nightly_prices, "catalogue", Catalogue())
    monkeypatch.setattr(nightly_prices, "buyer_inbox", [])
    yield


def night_one_with_an_outage() -> tuple[LocalRunner, RunRecord, RunRecord, RunRecord]:
    """Night one: initech's child fails, is retried, then the night is retried. The
    runner, the night's run, initech's and acme's children of that night."""
    runner = LocalRunner(nightly_prices.app)  # the clock starts at 2026-01-01 00:00 UTC
    nightly_prices.supplier_api.down.add("initech")  # initech's API is down tonight

    runner.advance(hours=3, schedules=True)  # 02:00: the schedule fires

    [night] = runner.engine.list_runs(workflow="nightly-prices").items
    night_one = runner.get_run(night.run_id)
    assert night_one.status == RunStatus.FAILED
    assert night_one.error is not None and night_one.error.type == "ChildFailed"
    initech = runner.run_by_key("import-supplier", "prices-initech")
    assert initech.status == RunStatus.FAILED
    acme = runner.run_by_key("import-supplier", "prices-acme")
    assert acme.status == RunStatus.SUCCEEDED
    assert night_one.error.position is not None
    assert nightly_prices.supplier_api.calls.count("initech") == 3  # the step's 3 attempts

    nightly_prices.supplier_api.down.clear()  # the outage is over

    runner.retry(initech.run_id)  # durable retry key:prices-initech --workflow import-supplier
    runner.run_until_idle()
    assert runner.get_run(initech.run_id).status == RunStatus.SUCCEEDED
    # The night still holds the failure it recorded: its records are final.
    assert runner.get_run(night.run_id).status == RunStatus.FAILED

    runner.retry(night.run_id)  # durable retry NIGHT: takes the child's outcome as it is now
    runner.run_until_idle()
    assert runner.get_run(night.run_id).status == RunStatus.WAITING  # for the buyer
    assert nightly_prices.supplier_api.calls.count("initech") == 4  # once more, not again
    assert nightly_prices.supplier_api.calls.count("acme") == 1  # acme's child never reran

    return runner, night, initech, acme


def test_two_nights_an_outage_and_the_retries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner, night, initech, acme = night_one_with_an_outage()
    [link] = nightly_prices.buyer_inbox  # what ask_buyer sent: /callbacks/<token>
    token = link.rsplit("/", 1)[1]
    runner.complete_callback(token, {"approved": True, "by": "dana"})  # the buyer's POST
    runner.run_until_idle()

    summary = runner.result(night.run_id)
    assert summary.night == "2026-01-01"
    assert summary.suppliers == [
        SupplierReport(supplier=name, items=300, changed=299, refused=1)
        for name in ("acme", "globex", "initech")
    ]
    assert (summary.published, summary.approved_by) == (897, "dana")
    progress = runner.get_run(night.run_id).progress
    assert progress is not None
    assert (progress["done"], progress["total"]) == (3, 3)
    assert progress["note"] == "published 897 prices"
    assert len(nightly_prices.catalogue.current) == 897

    runner.advance(days=1, schedules=True)  # the next night's fire: the keys are reused

    nights = runner.engine.list_runs(workflow="nightly-prices").items
    [second] = [run for run in nights if run.run_id != night.run_id]
    latest = runner.run_by_key("import-supplier", "prices-acme")  # the key's latest run
    assert latest.run_id != acme.run_id and latest.status == RunStatus.SUCCEEDED
    runner.complete_wait(second.run_id, "approve-prices", {"approved": True, "by": "lee"})
    runner.run_until_idle()

    summary = runner.result(second.run_id)
    assert summary.night == "2026-01-02"
    assert [report.changed for report in summary.suppliers] == [42, 42, 42]
    assert (summary.published, summary.approved_by) == (126, "lee")
    children = {run.run_id for run in runner.engine.list_runs(workflow="import-supplier").items}
    assert len(children) == 6  # three a night; the first night's stay readable
    assert runner.get_run(initech.run_id).status == RunStatus.SUCCEEDED
    assert runner.run_by_key("import-supplier", "prices-initech").run_id != initech.run_id
    assert nightly_prices.supplier_api.calls.count("acme") == 2

    document = export_run(ClaimCheck(runner.memory_ledger, runner.payloads), night.run_id)
    recorded = tmp_path / "night-2026-01-01.json"
    recorded.write_text(dumps(document))  # what `durable export NIGHT -o ...` writes

    assert LocalRunner(nightly_prices.app).replay(recorded).ok

    from durable.cli import main

    assert main(["replay", str(recorded), "--app", "examples.nightly_prices:app"]) == 0
    assert "nightly-prices" in capsys.readouterr().out


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_every_code_block_of_the_tutorial_is_in_the_code_it_describes() -> None:
    """Each Python block of the tutorial is a part of examples/nightly_prices.py or of the
    test above, as written (whitespace aside), so editing either without the other fails."""
    sources = [
        (ROOT / "examples" / "nightly_prices.py").read_text(),
        Path(__file__).read_text(),
    ]
    blocks = python_blocks(TUTORIAL.read_text())
    assert len(blocks) >= 6
    for block in blocks:
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        assert any(_contains(source, lines) for source in sources), (
            f"this block of the tutorial is not in the code:\n{block}"
        )


def _contains(source: str, lines: list[str]) -> bool:
    stripped = [line.strip() for line in source.splitlines() if line.strip()]
    width = len(lines)
    return any(stripped[i : i + width] == lines for i in range(len(stripped) - width + 1))


def test_the_tutorial_is_linked_from_the_readme_and_the_site() -> None:
    assert "docs/tutorial-nightly-import.md" in (ROOT / "README.md").read_text()
    assert ": tutorial-nightly-import.md\n" in (ROOT / "mkdocs.yml").read_text()
