"""The web console in a real browser: Chromium (headless) against ``durable dev``.

GIVEN the demo's workflows on the whole local stack, and the console it serves
WHEN a person opens the runs list, opens an expense run, approves it from the page,
     cancels another, and opens a checkout whose card was declined
THEN the page shows each run's timeline, the approval finishes the run (recorded as the
     developer's), the cancel is in the audit log, and the decline's cause is on top.
Screenshots of each page go to ``DURABLE_ARTIFACTS`` (default ``artifacts/console``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from durable.local.harness import DevProcess
from tests.browser.conftest import ARTIFACTS, ROOT

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    workdir = tmp_path_factory.mktemp("console")
    process = DevProcess(
        workdir,
        app="tests.browser.console_app:app",
        time_scale=1,  # real time: the timelines show what a person would see
        env={"PYTHONPATH": str(ROOT), "DURABLE_EXAMPLE_EFFECTS": str(workdir / "effects.json")},
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


def start(dev: DevProcess, workflow: str, payload: Any) -> str:
    return str(dev.http("POST", f"/workflows/{workflow}/runs", payload)["run_id"])


def open_run(dev: DevProcess, page: Any, run_id: str) -> None:
    page.goto(f"{dev.base}/console/#/runs/{run_id}")
    page.wait_for_selector("h1 .badge")


def status_shown(page: Any, status: str) -> None:
    page.wait_for_selector(f"h1 .badge.{status.lower()}")


def test_a_person_approves_an_expense_from_the_page(dev: DevProcess, page: Any) -> None:
    run_id = start(dev, "expense-approval", {"employee": "ann", "amount": 120, "manager": "bob"})
    dev.wait_for(run_id, {"WAITING"})

    page.goto(f"{dev.base}/console/")
    row = page.wait_for_selector(f'tr[data-run="{run_id}"]')
    assert "expense-approval" in row.inner_text() and "WAITING" in row.inner_text()
    # The list says what it waits for; "needs attention" lists it (a person's answer).
    waits = page.text_content(f'tr[data-run="{run_id}"] [data-waits]') or ""
    assert waits.startswith("approval “manager-approval” until 20"), waits
    page.screenshot(path=str(ARTIFACTS / "runs.png"), full_page=True)
    page.goto(f"{dev.base}/console/#/?needs_attention=1")
    row = page.wait_for_selector(f'tr[data-run="{run_id}"]')

    row.query_selector("a").click()
    banner = page.wait_for_selector("p.waits")  # the banner a run in line shows, too
    assert "Waiting: approval “manager-approval” until" in (banner.text_content() or "")
    page.wait_for_selector('svg.timeline g.lane[data-status="WAITING"]')
    lanes = page.eval_on_selector_all("svg.timeline g.lane", "gs => gs.map(g => g.dataset.status)")
    assert lanes == ["WAITING", "DONE"]  # the wait, and the step that mailed the link

    # The approval's form is on top of the page, its answer filled with a value to edit.
    answer = 'section.pending form.answer[data-wait="manager-approval"]'
    assert page.input_value(f"{answer} textarea") == "true"
    page.fill(f"{answer} textarea", '"bob"')
    page.click(f'{answer} button[data-action="approve"]')
    assert page.is_visible("dialog#confirm")  # it asks first, showing what is sent
    assert '"bob"' in page.inner_text("#confirm-text")
    page.click("#confirm-yes")
    status_shown(page, "SUCCEEDED")  # the page follows the run until it ends

    run = dev.http("GET", f"/runs/{run_id}")
    assert run["status"] == "SUCCEEDED"
    assert run["output"]["approved_by"] == "bob"
    assert run["steps"][0]["completed_by"].endswith("local-developer")
    steps_text = page.inner_text("table.steps")
    assert "by user/local-developer" in steps_text and "pay" in steps_text
    audit = page.inner_text("ul.audit")
    assert "approved by user/local-developer — manager-approval at 0001" in audit
    cost = page.inner_text("div.cost")  # what the run used, priced
    assert "$0.0000" in cost and "at us-east-1 list prices" in cost
    # the invocations the run recorded (2, or 3 when a sweep beat the first worker to it
    # on a busy machine: the panel shows what was used), and the start's API request
    shown = re.search(r"(\d+) invocations", cost)
    assert shown is not None and int(shown.group(1)) >= 2 and "1 requests" in cost
    page.screenshot(path=str(ARTIFACTS / "run-approved.png"), full_page=True)


def test_a_cancel_from_the_page_asks_first_and_lands_in_the_audit_log(
    dev: DevProcess, page: Any
) -> None:
    run_id = start(dev, "expense-approval", {"employee": "cy", "amount": 80, "manager": "bob"})
    dev.wait_for(run_id, {"WAITING"})
    open_run(dev, page, run_id)
    page.wait_for_selector('button[data-action="danger"]')

    page.click('button[data-action="danger"] >> nth=0')  # "Cancel"
    page.click("#confirm-no")  # changed their mind: nothing is sent
    assert dev.http("GET", f"/runs/{run_id}")["status"] == "WAITING"

    page.click('button[data-action="danger"] >> nth=0')
    page.fill('dialog#confirm input[name="reason"]', "")
    page.click("#confirm-yes")  # a cancel needs a reason: the API's error is shown
    page.wait_for_selector("#confirm-error:not(:empty)")
    assert "reason" in page.inner_text("#confirm-error")
    page.fill('dialog#confirm input[name="reason"]', "duplicate claim")
    page.click("#confirm-yes")
    status_shown(page, "CANCELED")
    audit = page.inner_text("ul.audit")
    assert "cancel" in audit and "user/local-developer" in audit and "duplicate claim" in audit


def test_a_failed_run_shows_its_cause_and_the_retries_before_it(dev: DevProcess, page: Any) -> None:
    run_id = start(dev, "checkout", 5000)
    dev.wait_for(run_id, {"FAILED"})
    open_run(dev, page, run_id)
    fault = page.inner_text("section.fault")
    assert "CardDeclined" in fault and "over the limit" in fault and "charge_card" in fault
    at_fault = page.get_attribute("svg.timeline g.lane.at-fault", "data-position")
    assert at_fault == "0003"
    # fraud_check: two timed-out attempts, the backoff between them, then the answer
    bars = page.eval_on_selector_all(
        'svg.timeline g.lane[data-position="0002"] rect',
        "rs => rs.map(r => r.getAttribute('class'))",
    )
    assert bars == ["bar retried", "bar backoff", "bar retried", "bar backoff", "bar ok"]
    declined = page.eval_on_selector_all(
        'svg.timeline g.lane[data-position="0003"] rect',
        "rs => rs.map(r => r.getAttribute('class'))",
    )
    assert declined == ["bar failed"]
    assert page.is_visible('button[data-action="retry"]')
    page.screenshot(path=str(ARTIFACTS / "run-failed.png"), full_page=True)


def test_a_maps_branches_are_lanes_indented_under_it(dev: DevProcess, page: Any) -> None:
    """A map is one group lane; a small one starts opened, its branches indented under it,
    and a branch opens to its records (a large map: test_console_map.py)."""
    run_id = start(dev, "restock", ["sku-a", "sku-b"])
    dev.wait_for(run_id, {"SUCCEEDED"})
    open_run(dev, page, run_id)
    page.wait_for_selector("svg.timeline g.branch")
    group = page.eval_on_selector("svg.timeline g.group", "g => ({...g.dataset})")
    assert (group["group"], group["done"], group["branches"]) == ("0001", "2", "2")
    rows = page.eval_on_selector_all(
        "svg.timeline g.group, svg.timeline g.branch, svg.timeline g.lane",
        "gs => gs.map(g => [g.dataset.group || g.dataset.position,"
        " g.querySelector('text').getAttribute('x'),"
        " g.querySelector('rect.bar').getAttribute('class')])",
    )
    assert [row[0] for row in rows] == ["0001", "0001.0001", "0001.0002"]
    batch_x, branch_x = float(rows[0][1]), float(rows[1][1])
    assert branch_x > batch_x  # the branches' lanes sit under the map's
    assert [row[2] for row in rows] == ["bar ok", "bar ok", "bar ok"]
    page.click('svg.timeline g.branch[data-position="0001.0002"]')
    page.wait_for_selector('svg.timeline g.lane[data-position="0001.0002.0001"]')
    assert "reserved sku-b" in page.inner_text("table.steps")
    steps = page.inner_text("table.steps")
    assert "batch" in steps and "ok (all): 2 succeeded" in steps
    page.screenshot(path=str(ARTIFACTS / "run-map.png"), full_page=True)


def test_the_runs_list_filters_by_workflow_and_status(dev: DevProcess, page: Any) -> None:
    done = start(dev, "checkout", 10)
    declined = start(dev, "checkout", 2000)
    dev.wait_for(done, {"SUCCEEDED"})
    dev.wait_for(declined, {"FAILED"})
    page.goto(f"{dev.base}/console/#/?workflow=checkout&status=FAILED")
    page.wait_for_selector("table.runs tbody tr")
    shown = page.eval_on_selector_all("table.runs tbody tr", "rs => rs.map(r => r.dataset.run)")
    assert declined in shown and done not in shown
    statuses = page.eval_on_selector_all(
        "table.runs tbody .badge", "bs => bs.map(b => b.textContent)"
    )
    assert set(statuses) == {"FAILED"}


# What the template's ApproverAccessPolicy allows (ApproverWorkflow=expense-approval), as
# API Gateway would enforce it; everything else of the API answers 403 as IAM would.
APPROVER = [
    r"GET /workflows/expense-approval/runs",
    r"GET /workflows/expense-approval/runs/[^/]+",
    r"POST /workflows/expense-approval/runs/[^/]+/waits/[^/]+",
]


def test_an_approver_scoped_to_one_workflow_can_use_the_page(dev: DevProcess, page: Any) -> None:
    """The page calls the per-workflow routes, so a person whose IAM policy allows one
    workflow's reads and approvals only can find, read and approve its runs."""
    run_id = start(dev, "expense-approval", {"employee": "di", "amount": 40, "manager": "bob"})
    dev.wait_for(run_id, {"WAITING"})
    refused: list[str] = []

    def iam(route: Any) -> None:
        url = urllib.parse.urlsplit(route.request.url)
        call = f"{route.request.method} {url.path}"
        if url.path.startswith("/console") or any(re.fullmatch(p, call) for p in APPROVER):
            route.continue_()
            return
        refused.append(call)
        body = {"message": "User is not authorized to access this resource with an explicit deny"}
        route.fulfill(status=403, content_type="application/json", body=json.dumps(body))

    page.route("**/*", iam)
    try:
        page.goto(f"{dev.base}/console/")
        page.fill('input[name="workflow"]', "expense-approval")  # it may not list workflows
        page.click('button[type="submit"]')
        page.click(f'tr[data-run="{run_id}"] a')
        page.wait_for_selector('section.pending button[data-action="approve"]')
        page.fill("section.pending textarea", '"bob"')
        page.click('section.pending button[data-action="approve"]')
        page.click("#confirm-yes")
        status_shown(page, "SUCCEEDED")
    finally:
        page.unroute("**/*")
    assert "GET /workflows" in refused  # asked, refused, and the page asked the person
    assert all("/workflows/expense-approval/" not in call for call in refused), refused


def test_schedules_are_paused_resumed_and_run_from_the_page(dev: DevProcess, page: Any) -> None:
    page.goto(f"{dev.base}/console/#/schedules")
    row = page.wait_for_selector('tr[data-schedule="stock-check"]')
    text = row.inner_text()
    assert "cron(0 6 ? * MON-FRI *)" in text and "Europe/Berlin" in text and "enabled" in text
    row.query_selector('button:has-text("Pause")').click()
    page.click("#confirm-yes")
    page.wait_for_selector('tr[data-schedule="stock-check"] .badge.waiting')
    assert dev.http("GET", "/schedules")["schedules"][0]["state"] == "paused"
    page.click('tr[data-schedule="stock-check"] button:has-text("Resume")')
    page.click("#confirm-yes")
    page.wait_for_selector('tr[data-schedule="stock-check"] .badge.succeeded')
    page.click('tr[data-schedule="stock-check"] button:has-text("Run now")')
    page.fill('dialog#confirm input[name="key"]', "from-the-page")
    page.click("#confirm-yes")
    status_shown(page, "SUCCEEDED")  # the page follows the run it started
    assert "stock-check" in page.inner_text("h1")
    page.screenshot(path=str(ARTIFACTS / "schedules-run.png"), full_page=True)


def test_the_schedules_page_shows_each_fires_verdict(dev: DevProcess, page: Any) -> None:
    """Issue 46 item 3: GIVEN a fire of stock-check delivered three hours late (missed)
    and a run now WHEN the schedules page opens THEN its row shows the last fire's verdict
    and, opened, the recent fires with theirs (the run linked); durable dev's output has
    a line for the missed fire."""
    from datetime import UTC, datetime, timedelta

    late = (datetime.now(UTC) - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    worker = dev.lambda_client()
    event = {"schedule": "stock-check", "scheduled_time": late}
    reply = worker.invoke(FunctionName="durable-worker-dev", Payload=json.dumps(event))
    assert json.loads(reply["Payload"].read())["result"] == "skipped_missed"
    run_id = dev.http("POST", "/schedules/stock-check/run", {})["run_id"]
    page.goto(f"{dev.base}/console/#/schedules")
    cell = page.wait_for_selector('tr[data-schedule="stock-check"] td.fires')
    assert cell.query_selector("summary .badge.fire-started") is not None
    assert "run now" in cell.inner_text()
    cell.query_selector("summary").click()
    missed = page.wait_for_selector(
        f'tr[data-schedule="stock-check"] tr[data-fire="{late[:19]}.000Z"]'
    )
    assert re.search(r"missed\s+3:00:0\d late", missed.inner_text()), missed.inner_text()
    assert missed.query_selector(".badge.fire-skipped_missed") is not None
    assert cell.query_selector(f'a[href$="/runs/{run_id}"]') is not None
    page.wait_for_timeout(2000)  # the page refreshes every 1.5 s: what was opened stays open
    assert page.query_selector('tr[data-schedule="stock-check"] td.fires details[open]')
    page.screenshot(path=str(ARTIFACTS / "schedules-fires.png"), full_page=True)
    said = dev.log_tail(400)
    assert f"schedule stock-check fire {late}: missed" in said, said


def test_the_console_through_its_signing_proxy(dev: DevProcess, page: Any) -> None:
    """``durable console --endpoint``: the same page, served by the local proxy, calling
    the stack through it (here unsigned: durable dev's API takes no signature)."""
    from durable.console.proxy import ConsoleProxy

    run_id = start(dev, "checkout", 12)
    dev.wait_for(run_id, {"SUCCEEDED"})
    proxy = ConsoleProxy(dev.base, sign=False)
    proxy.start()
    try:
        page.goto(proxy.url + "#/?workflow=checkout")
        page.wait_for_selector(f'tr[data-run="{run_id}"]')
        assert dev.base in page.inner_text("#where")  # which stack the page shows
        page.click(f'tr[data-run="{run_id}"] a')
        status_shown(page, "SUCCEEDED")
        # a page of another origin cannot use the proxy: its token is not in that page
        answer = page.evaluate(
            """async (url) => {
                const r = await fetch(url + "runs", {method: "POST", body: "x"});
                return r.status;
            }""",
            proxy.url.replace("/console/", "/"),
        )
        assert answer == 403  # same origin, but no token: refused like any stranger
    finally:
        proxy.stop()


def test_a_run_held_back_by_a_limit_shows_its_place_in_line(dev: DevProcess, page: Any) -> None:
    first = start(dev, "rebuild-index", {"store": "north"})
    second = start(dev, "rebuild-index", {"store": "north"})
    dev.wait_for(first, {"WAITING"})
    for _ in range(300):  # until its worker has put it in line
        if dev.http("GET", f"/runs/{second}").get("queued_at"):
            break
        time.sleep(0.1)
    page.goto(f"{dev.base}/console/#/?workflow=rebuild-index")
    page.wait_for_selector(f'tr[data-run="{second}"] [data-waits]')
    flag = page.text_content(f'tr[data-run="{second}"] [data-waits]')
    assert flag is not None and flag.startswith("in line for a slot")
    holder = page.text_content(f'tr[data-run="{first}"] [data-waits]')  # it holds the slot
    assert holder == "signal “done”", holder
    open_run(dev, page, second)
    page.wait_for_selector("p.waits")
    text = page.text_content("p.waits") or ""
    assert "in line for a slot (#1)" in text and "gate C#rebuild-index#north" in text
    dev.http("POST", f"/runs/{first}/signals/done", {})
    dev.wait_for(second, {"WAITING"})
    # Live: out of the line, it now waits, as the first did, for its signal.
    page.wait_for_selector("p.waits >> text=signal “done”")
    assert "in line" not in (page.text_content("p.waits") or "")
    # The signal it waits for is on top of its page, with a form that sends it.
    form = 'section.pending form.answer[data-signal="done"]'
    page.fill(f"{form} textarea", '{"by": "the page"}')
    page.click(f'{form} button[data-action="signal"]')
    page.click("#confirm-yes")
    status_shown(page, "SUCCEEDED")
    signals = dev.http("GET", f"/runs/{second}")["signals"]
    assert [x["payload"] for x in signals] == [{"by": "the page"}]


def test_a_runs_progress_is_a_bar_that_moves_on(dev: DevProcess, page: Any) -> None:
    run_id = start(dev, "price-sync", None)
    dev.wait_for(run_id, {"WAITING"})

    # The runs list: a bar at the fraction the run reported, its note on hover.
    page.goto(f"{dev.base}/console/#/?workflow=price-sync")
    bar = f'tr[data-run="{run_id}"] .progress'
    page.wait_for_selector(f'{bar}[data-progress="1/4"]')
    assert page.get_attribute(f"{bar} progress", "value") == "1"
    assert page.get_attribute(f"{bar} progress", "max") == "4"
    assert "1/4 (25%)" in (page.text_content(bar) or "")
    assert page.get_attribute(bar, "title") == "supplier 1 of 4 synced"

    # The run's page: the bar with its note; live, it moves on as the run reports more.
    open_run(dev, page, run_id)
    head = "section.run-head .progress"
    page.wait_for_selector(f'{head}[data-progress="1/4"]')
    assert "1/4 (25%) · supplier 1 of 4 synced" in (page.text_content(head) or "")
    dev.http("POST", f"/runs/{run_id}/signals/go-on", {})
    page.wait_for_selector(f'{head}[data-progress="3/4"]')
    assert page.get_attribute(f"{head} progress", "value") == "3"
    assert "3/4 (75%) · supplier 3 of 4 synced" in (page.text_content(head) or "")
    page.screenshot(path=str(ARTIFACTS / "progress.png"), full_page=True)

    # Ended, the run keeps the last value it reported.
    dev.http("POST", f"/runs/{run_id}/signals/finish", {})
    status_shown(page, "SUCCEEDED")
    page.wait_for_selector(f'{head}[data-progress="4/4"]')
    assert "4/4 (100%) · all synced" in (page.text_content(head) or "")
