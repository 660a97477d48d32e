"""docs/tutorial-nightly-import.md walked under ``durable dev`` as its reader would (issue 46).

The tutorial's app (examples/nightly_prices.py, copied into a project made by ``durable
init``) runs on the project's own stack, and every step is a command of the tutorial's
"Try it under durable dev" section: the schedule paused, the night started from it with one
supplier's API down, the keyed child that failed retried (and what its parent then says),
the night retried, the approval answered, and a second night reusing the supplier keys.
What each command prints, and the runs it leaves, are asserted as the page says them.

The stack's workers are processes of their own, so the fakes' state (the catalogue) is per
process: the counts a night reports are asserted where they do not depend on which worker
ran what (every price is checked; night one changes all but the refused one).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Cli = Callable[..., str]  # cli(label, *arguments) -> what the command printed
WaitFor = Callable[[str], None]  # until durable dev's output has a line with this text

APP = "shop.nightly_prices:app"
SUPPLIERS = ("acme", "globex", "initech")


def _shown(cli: Cli, *run: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(cli("durable show", "show", *run, "--json"))
    return shown


def _by_key(cli: Cli, supplier: str, timeout: float = 60) -> dict[str, Any]:
    """The run the supplier's key names now (the key's latest run), once there is one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _shown(cli, f"key:prices-{supplier}", "--workflow", "import-supplier")
        except AssertionError:  # not started yet: the CLI says no run has the key
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _night(cli: Cli) -> str:
    """Start the night as its schedule would (`durable schedules run`); its run id."""
    fired = cli("durable schedules run", "schedules", "run", "nightly-prices")
    found = re.search(r"nightly-prices: started, run (\S+)", fired)
    assert found, fired
    return found.group(1)


def _approve(cli: Cli, wait_for: WaitFor, night: str, by: str) -> dict[str, Any]:
    """The buyer's answer, given by an operator; the night's summary once it has ended."""
    wait_for(f"{night}  ⏸ waiting for callback approve-prices")
    answer = json.dumps({"approved": True, "by": by})
    cli("durable approve", "approve", night, "approve-prices", "--result", answer)
    wait_for(f"{night}  ✓ succeeded")
    shown = _shown(cli, night)
    assert shown["status"] == "SUCCEEDED", shown
    summary: dict[str, Any] = shown["output"]
    assert summary["approved_by"] == by, summary
    assert [r["supplier"] for r in summary["suppliers"]] == list(SUPPLIERS), summary
    assert all((r["items"], r["refused"]) == (300, 1) for r in summary["suppliers"]), summary
    return summary


def walk(cli: Cli, wait_for: WaitFor, project: Path) -> None:
    # Night one, initech's API down: its child fails after three attempts, the night
    # fails where it waits for initech; acme's and globex's imports succeed.
    # The schedule fires at 02:00 of the stack's fast clock: paused, the nights are the
    # ones this walk starts (a manual run is not held back by the pause).
    paused = cli("durable schedules pause", "schedules", "pause", "nightly-prices")
    assert "paused" in paused, paused
    outage = project / "suppliers-down.txt"
    outage.write_text("initech\n")
    night = _night(cli)
    initech = _by_key(cli, "initech")["run_id"]
    wait_for(f"{initech}  ✗ failed")
    wait_for(f"{night}  ✗ failed")
    failed = _shown(cli, night)
    assert failed["error"]["type"] == "ChildFailed", failed
    acme = _by_key(cli, "acme")
    assert acme["status"] == "SUCCEEDED" and acme["parent"].startswith(night), acme
    # An ended child keeps the progress it reported last (issue 46's "shows None").
    assert acme["progress"]["done"] == acme["progress"]["total"] == 300, acme["progress"]
    assert acme["progress"]["note"] == "acme: checked", acme["progress"]

    # The outage is over: the child retried, then the night.
    outage.unlink()
    retried = cli(
        "durable retry (child)", "retry", "key:prices-initech", "--workflow", "import-supplier"
    )
    assert f"run {initech} retried: PENDING" in retried, retried
    assert f"its parent run {night} recorded this run's failure at position 0005" in retried
    assert f"`durable retry {night}` takes this run's outcome at 0005" in retried, retried
    out = cli("durable retry (night)", "retry", night)
    assert f"run {night} retried: PENDING" in out, out
    wait_for(f"{initech}  ✓ succeeded")
    wait_for(f"{night}  ⏸ waiting for callback approve-prices")
    listed = cli("durable runs", "runs", "--workflow", "nightly-prices", "--wide")
    row = next(line for line in listed.splitlines() if line.startswith(night))
    assert "3/3 (100%) initech imported" in row, listed
    assert "callback approve-prices until" in row, listed

    # The buyer approves: the summary is right, initech included.
    summary = _approve(cli, wait_for, night, "dana")
    assert [r["changed"] for r in summary["suppliers"]] == [299, 299, 299], summary
    assert _by_key(cli, "initech")["run_id"] == initech  # no second initech run

    # Night two: the same keys start new runs; night one's stay readable by their ids.
    second = _night(cli)
    deadline = time.monotonic() + 60
    while (latest := _by_key(cli, "acme"))["run_id"] == acme["run_id"]:
        assert time.monotonic() < deadline, "night two never started acme's import"
        time.sleep(0.5)
    assert latest["parent"].startswith(second), latest
    assert _shown(cli, acme["run_id"])["status"] == "SUCCEEDED"
    _approve(cli, wait_for, second, "lee")
    listed = cli("durable runs --json", "runs", "--workflow", "import-supplier", "--json")
    runs = json.loads(listed)["runs"]
    assert len(runs) == 6 and all(r["status"] == "SUCCEEDED" for r in runs), runs
    assert sorted(r["parent"].split("@")[0] for r in runs) == sorted([night] * 3 + [second] * 3)
