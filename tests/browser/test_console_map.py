"""The console's run page at the scale of a real fan-out (issue 46, item 4).

GIVEN a price import whose map has 1,000 branches on ``durable dev``: 5 of them failed
      (no price), 4 wait on a typed approval, the rest done
WHEN a person opens the run's page
THEN it renders (the time it takes, and the run's payload, are printed), the map is one
     group lane whose counts say 991 done, 5 failed, 4 waiting; opened, it lists the
     waiting branches, then the failed ones, 50 at a time with "show more"; the four
     approvals are on top of the page, each with its answer's shape filled in; the axis
     labels never overlap, at any width; and answering one approval from the top works.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from durable.local.harness import DevProcess
from tests.browser.conftest import ARTIFACTS, ROOT
from tests.browser.map_app import missing, suspicious

pytestmark = pytest.mark.browser

SUPPLIERS = 1000
FAILED = [i for i in range(SUPPLIERS) if missing(i)]
WAITING = [i for i in range(SUPPLIERS) if suspicious(i) and not missing(i)]
DONE = SUPPLIERS - len(FAILED) - len(WAITING)
SHAPE = '{"approved": <true|false>, "note": <text>}'


def branch(i: int) -> str:
    return f"0001.{i + 1:04d}"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    workdir = tmp_path_factory.mktemp("console-map")
    process = DevProcess(
        workdir, app="tests.browser.map_app:app", time_scale=1, env={"PYTHONPATH": str(ROOT)}
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def run_id(dev: DevProcess) -> str:
    """The price import over 1,000 suppliers, parked on its four approvals."""
    started = time.perf_counter()
    run = str(dev.http("POST", "/workflows/price-import/runs", SUPPLIERS)["run_id"])
    dev.wait_for(run, {"WAITING"}, timeout=600)
    # What the page is sent: the run with every record (no summary route: see docs/console.md).
    with urllib.request.urlopen(f"{dev.base}/runs/{run}") as answer:
        body = answer.read()
    steps = json.loads(body)["steps"]
    print(
        f"\n[console map] {SUPPLIERS}-item map parked in {time.perf_counter() - started:.1f} s; "
        f"GET /runs/{{id}}: {len(steps)} records, {len(body) / 1024:.0f} KB "
        f"({len(body) / len(steps):.0f} bytes a record)"
    )
    return run


def group_counts(page: Any) -> dict[str, str]:
    return dict(
        page.eval_on_selector(
            'svg.timeline g.group[data-group="0001"]',
            "g => ({...g.dataset})",
        )
    )


def overlapping_tick_labels(page: Any) -> list[Any]:
    """Pairs of axis labels whose boxes on the screen overlap."""
    return list(
        page.eval_on_selector_all(
            "svg.timeline text.tick-label",
            """ts => {
                const boxes = ts.map(t => [t.textContent, t.getBoundingClientRect()]);
                const pairs = [];
                boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
                    const x = p.left < q.right && q.left < p.right;
                    if (x && p.top < q.bottom && q.top < p.bottom) pairs.push([a, b]);
                }));
                return pairs;
            }""",
        )
    )


def test_a_thousand_branch_map_is_one_group_lane(dev: DevProcess, page: Any, run_id: str) -> None:
    started = time.perf_counter()
    page.goto(f"{dev.base}/console/#/runs/{run_id}")
    page.wait_for_selector('svg.timeline g.group[data-group="0001"]')
    shown = time.perf_counter() - started
    built = page.evaluate(
        "() => performance.getEntriesByName('durable:run-page').map(e => e.duration)"
    )
    tall = page.evaluate("document.body.scrollHeight")
    print(
        f"[console map] run page of a {SUPPLIERS}-item map: {shown * 1000:.0f} ms from "
        f"navigation to the group lane (the API's answer included); building the page "
        f"took {built[0]:.1f} ms; the page is {tall} px tall"
    )
    # (A figure, printed: how long is not asserted here; the lane must appear within the
    # selector's own wait.)

    # One lane for the map, its counts by status; no lane per branch or record.
    counts = group_counts(page)
    assert counts["branches"] == str(SUPPLIERS)
    assert (counts["done"], counts["failed"], counts["waiting"], counts["running"]) == (
        str(DONE),
        str(len(FAILED)),
        str(len(WAITING)),
        "0",
    )
    said = page.text_content('svg.timeline g.group[data-group="0001"] text.counts')
    assert said == f"{DONE} done · {len(WAITING)} waiting · {len(FAILED)} failed", said
    assert page.query_selector_all("svg.timeline g.lane, svg.timeline g.branch") == []
    assert len(page.query_selector_all("table.steps tbody tr")) == 1

    # The approvals are on top, above the timeline, on the first screen, each form filled
    # with its answer's shape (its value, not a placeholder).
    order = page.evaluate(
        """() => [...document.querySelectorAll('section.pending, section.actions, svg.timeline')]
                 .map(n => n.tagName.toLowerCase() === 'svg' ? 'timeline' : n.className)"""
    )
    assert order[0] == "pending", order
    assert page.eval_on_selector("section.pending", "s => s.getBoundingClientRect().top") < 300
    forms = page.eval_on_selector_all(
        "section.pending form.answer",
        "fs => fs.map(f => [f.dataset.position, f.querySelector('textarea').value,"
        " f.querySelector('textarea').getAttribute('placeholder')])",
    )
    assert forms == [[f"{branch(i)}.0002", SHAPE, None] for i in WAITING]
    assert "tests.browser.map_app:Check" in page.inner_text("section.pending")

    # Opened: the waiting branches first, then the failed ones, 50 at a time.
    page.click('svg.timeline g.group[data-group="0001"]')
    page.wait_for_selector("svg.timeline g.branch")
    listed = page.eval_on_selector_all(
        "svg.timeline g.branch", "gs => gs.map(g => [g.dataset.position, g.dataset.status])"
    )
    assert len(listed) == 50
    first = [(branch(i), "waiting") for i in WAITING] + [(branch(i), "failed") for i in FAILED]
    assert [tuple(x) for x in listed[: len(first)]] == first
    assert all(status == "done" for _, status in listed[len(first) :])
    more = page.text_content("svg.timeline g.more")
    assert more == f"show 50 more ({SUPPLIERS - 50} not shown)", more
    page.click("svg.timeline g.more")
    page.wait_for_function("document.querySelectorAll('svg.timeline g.branch').length === 100")
    # A failed branch opened: its record, with the error, in the timeline and the table.
    page.click(f'svg.timeline g.branch[data-position="{branch(FAILED[0])}"]')
    page.wait_for_selector(f'svg.timeline g.lane[data-position="{branch(FAILED[0])}.0001"]')
    assert f"supplier-{FAILED[0]} sent no price" in page.inner_text("table.steps")
    page.wait_for_timeout(6500)  # a refresh or two later, what was opened stays open
    assert len(page.query_selector_all("svg.timeline g.branch")) == 100
    page.screenshot(path=str(ARTIFACTS / "run-map-1000.png"))

    # The axis: no two labels overlap, wide or narrow.
    assert overlapping_tick_labels(page) == []
    assert len(page.query_selector_all("svg.timeline text.tick-label")) >= 3
    for width in (1600, 700, 480):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)  # the page draws again at its new width
        assert overlapping_tick_labels(page) == [], width
        assert len(page.query_selector_all("svg.timeline text.tick-label")) >= 2
    page.set_viewport_size({"width": 1200, "height": 900})


def test_the_approval_on_top_is_answered_from_its_form(
    dev: DevProcess, page: Any, run_id: str
) -> None:
    page.goto(f"{dev.base}/console/#/runs/{run_id}")
    first = f"{branch(WAITING[0])}.0002"
    form = f'section.pending form.answer[data-position="{first}"]'
    page.wait_for_selector(form)

    # Sent as filled, the shape is refused here, and its first <…> is selected to type over.
    page.click(f'{form} button[data-action="approve"]')
    error = page.inner_text(f"{form} p.error-text")
    assert error.startswith("Replace <true|false> with a value"), error
    selected = page.eval_on_selector(
        f"{form} textarea", "t => t.value.slice(t.selectionStart, t.selectionEnd)"
    )
    assert selected == "<true|false>"
    assert not page.is_visible("dialog#confirm")
    page.wait_for_timeout(2000)  # the page does not refresh away what is being typed
    assert page.eval_on_selector(f"{form} textarea", "t => t === document.activeElement")

    page.fill(f"{form} textarea", '{"approved": true, "note": "checked by hand"}')
    page.click(f'{form} button[data-action="approve"]')
    assert page.is_visible("dialog#confirm")
    assert '"note":"checked by hand"' in page.inner_text("#confirm-text")
    page.click("#confirm-yes")

    # The branch is done: three approvals left on top, the group's counts follow.
    page.wait_for_selector('svg.timeline g.group[data-group="0001"][data-waiting="3"]')
    assert group_counts(page)["done"] == str(DONE + 1)
    positions = page.eval_on_selector_all(
        "section.pending form.answer", "fs => fs.map(f => f.dataset.position)"
    )
    assert positions == [f"{branch(i)}.0002" for i in WAITING[1:]]
    run = dev.http("GET", f"/runs/{run_id}")
    answered = next(s for s in run["steps"] if s["position"] == first)
    assert answered["status"] == "DONE"
    assert answered["completed_by"].endswith("local-developer")
    assert answered["output"] == {"approved": True, "note": "checked by hand"}
    page.screenshot(path=str(ARTIFACTS / "run-map-answered.png"))
