"""A real SIGKILL of the worker process at each kind of I/O boundary of a run's life.

GIVEN ``durable dev`` (DynamoDB Local, one worker process, time 3600x) serving
``tests/e2e/crash_workflow.py``: steps, a retry, a checkpoint, a compensation, a sleep, a
callback, one step per invocation (so every step is followed by a hand-off)
WHEN the worker SIGKILLs itself at one port call (``DURABLE_CRASH_AT``, the local-only hook
in ``durable.aws.crash_injected``; at most once per stack, through a once-file)
THEN the run completes all the same; each side effect of a step recorded DONE was asked for
and happened exactly once (none lost, none doubled); the ledger holds every step once, at its
position, with its attempts numbered without a gap.

One dev stack per crash point (the point is a process setting); the in-process sweep over
every port call is ``tests/unit/test_crash_matrix.py``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from durable.core.ids import time_token
from durable.core.model import parse_time
from durable.errors import InvalidInput
from durable.local.harness import DevProcess
from durable.settings import Settings
from tests.e2e import crash_workflow as flow

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("java") is None, reason="durable dev persists with Java"),
]

ROOT = Path(__file__).resolve().parents[2]
ORDER = "o-42"
# (port.method, k-th call in the worker process, before|after): a representative call of
# each kind of boundary. In a clean run the worker's calls come in this order: claim,
# write_step 1 (provision's failed attempt, WAITING for its backoff), arm 1 (the backoff's
# timer), ... write_step 2 (provision DONE, after its side effect), invoke 1 (the hand-off
# to import_rows), write_step_fenced 1 (import_rows' first checkpoint), ...
CASES = [
    ("ledger.claim", 1, "before"),
    ("ledger.claim", 1, "after"),
    ("ledger.write_step", 2, "before"),
    ("ledger.write_step", 2, "after"),
    ("ledger.write_step_fenced", 1, "before"),
    ("ledger.write_step_fenced", 1, "after"),
    ("timers.arm", 1, "before"),
    ("timers.arm", 1, "after"),
    ("invoker.invoke", 1, "before"),
    ("invoker.invoke", 1, "after"),
]


PARALLEL = 2  # dev stacks at once: each case waits mostly on leases and timers, not CPU


def case_id(target: str, k: int, when: str) -> str:
    return f"{target}:{k}:{when}"


@pytest.fixture(scope="module")
def sweep(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, BaseException | None]:
    """Every selected case, run PARALLEL at a time on its own dev stack; the outcome by id.

    A case spends most of its time waiting for a dead worker's lease to lapse, so running
    them side by side halves the wall time; each test below reports its own case.
    """
    selected = {
        item.callspec.id
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_a_sigkilled_worker_loses_and_doubles_nothing"
        and item.module is request.module
    }
    wanted = [case for case in CASES if case_id(*case) in selected]
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = {
            case_id(*case): pool.submit(
                run_case, *case, tmp_path_factory.mktemp(case_id(*case).replace(":", "-"))
            )
            for case in wanted
        }
        return {name: future.exception() for name, future in futures.items()}


def get(dev: DevProcess, path: str, tries: int = 5) -> Any:
    """A GET through the dev server, retried when it drops the connection: its API and
    sweeper handlers share Powertools' metrics across threads, and a flush racing another
    thread's can end a request without an answer (reported; Lambda runs one event at a time)."""
    for attempt in range(tries):
        try:
            return dev.http("GET", path)
        except (ConnectionError, http.client.HTTPException, urllib.error.URLError):
            if attempt == tries - 1:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def answer_the_callback(dev: DevProcess, run_id: str, timeout: float = 90) -> None:
    """Wait for the callback's link to be sent (whatever crashed meanwhile), then approve
    it as an operator, by run and wait name (the ledger never holds the token)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        steps = {s["name"]: s for s in get(dev, f"/runs/{run_id}")["steps"]}
        submit, wait = steps.get("approval.submit"), steps.get("approval")
        if wait and wait["status"] == "DONE":
            return
        if submit and wait and submit["status"] == "DONE" and wait["status"] == "WAITING":
            # The ledger keeps the URL with its token redacted: an operator answers by name.
            assert str(submit["output"]).endswith("/callbacks/<callback token redacted>")
            # A dropped answer may still have been recorded: the next look tells.
            with contextlib.suppress(ConnectionError, http.client.HTTPException, OSError):
                dev.http("POST", f"/runs/{run_id}/waits/approval", {"result": "ok"})
        time.sleep(0.2)
    raise AssertionError(f"the callback was never answered; log:\n{dev.log_tail()}")


def wait_until_finished(dev: DevProcess, run_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        run: dict[str, Any] = get(dev, f"/runs/{run_id}")
        if run["status"] in ("SUCCEEDED", "FAILED", "CANCELED"):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish; log:\n{dev.log_tail()}")


def check_attempts(step: dict[str, Any]) -> None:
    """Every attempt is numbered 1..attempt; each but the last failed or was interrupted."""
    attempts = step["attempts"]
    assert [a["n"] for a in attempts] == list(range(1, step["attempt"] + 1)), step
    for earlier in attempts[:-1]:
        assert earlier.get("error") or not earlier.get("finished_at"), step
    last = attempts[-1]
    if step["status"] == "DONE":
        assert last.get("finished_at") and not last.get("error"), step
    else:
        assert last.get("error_class") == "terminal", step


def run_case(target: str, k: int, when: str, workdir: Path) -> None:
    # GIVEN a dev stack whose worker dies at the k-th call of `target` (once), and an
    # upstream that fails provision's first attempt
    books, once = workdir / "effects.json", workdir / "crash-fired"
    flow.flaky_marker(books).touch()
    dev = DevProcess(
        workdir,
        app="tests.e2e.crash_workflow:app",
        time_scale=3600,
        workers=1,
        worker_timeout=4,
        env={
            "PYTHONPATH": str(ROOT),
            "DURABLE_SWEEP_EFFECTS": str(books),
            "DURABLE_CRASH_AT": f"{target}:{k}:{when}:{once}",
            "DURABLE_STEPS_PER_INVOCATION": "1",
        },
    )
    try:
        dev.start()
        check_run(dev, target, when, books, once)
    finally:
        dev.stop()


def check_run(dev: DevProcess, target: str, when: str, books: Path, once: Path) -> None:
    # WHEN a run starts (keyed, as a client retrying a start would send it) and is approved
    path, key = f"/workflows/{flow.WORKFLOW}/runs", {"Idempotency-Key": ORDER}
    try:
        started = dev.http("POST", path, ORDER, headers=key)
    except (ConnectionError, http.client.HTTPException):  # dropped (see get): the key dedupes
        started = dev.http("POST", path, ORDER, headers=key)
    run_id = started["run_id"]
    answer_the_callback(dev, run_id)
    final = wait_until_finished(dev, run_id)

    # THEN the crash happened where asked, the worker was replaced, and the run completed
    assert once.exists(), f"the crash point was never reached; log:\n{dev.log_tail()}"
    assert once.read_text().startswith(f"{when} {target} "), once.read_text()
    assert get(dev, "/_local/status")["stats"]["died"] == 1, dev.log_tail()  # ours; none by itself
    assert final["status"] == "SUCCEEDED", final
    assert final["output"] == {
        "workspace": f"ws-{ORDER}",
        "rows": flow.CHUNKS,
        "shipment": f"shipped {ORDER} (ok)",
    }
    # AND the ledger holds each step once, in order, with its attempts accounted for
    ledger = [(s["position"], s["name"], s["kind"], s["status"]) for s in final["steps"]]
    assert ledger == [entry[:4] for entry in flow.EXPECTED_LEDGER]
    for step in final["steps"]:
        if step["kind"] in ("step", "compensation"):
            check_attempts(step)
    (provision,) = [s for s in final["steps"] if s["name"] == "provision"]
    assert [a.get("error_class") for a in provision["attempts"] if a.get("error")] == ["retryable"]
    # AND each side effect of a DONE step was asked for once and happened once: exactly the
    # effect keys of the recorded steps, no other
    kept = json.loads(books.read_text())
    incarnation = time_token(parse_time(final["created_at"]))  # see durable.engine.steps.step_key
    expected_keys = {
        f"effect:{run_id}.{incarnation}:{position}:{name}:{action}"
        for position, name, _, status, actions in flow.EXPECTED_LEDGER
        if status == "DONE"
        for action in actions
    }
    assert set(kept["by_key"]) == expected_keys
    assert kept["effects"] == flow.EXPECTED_EFFECTS
    assert kept["calls"] == flow.EXPECTED_EFFECTS
    # AND there is one run of the workflow (the keyed start was not duplicated)
    listed = get(dev, f"/runs?workflow={flow.WORKFLOW}")
    assert [r["run_id"] for r in listed["runs"]] == [run_id]


@pytest.mark.parametrize(("target", "k", "when"), CASES, ids=[case_id(*case) for case in CASES])
def test_a_sigkilled_worker_loses_and_doubles_nothing(
    target: str, k: int, when: str, sweep: dict[str, BaseException | None]
) -> None:
    error = sweep[case_id(target, k, when)]
    if error is not None:
        raise error


def test_the_crash_setting_is_local_only_and_checked() -> None:
    # The template never sets it (tests/handlers/test_template.py holds LOCAL_ONLY out of the
    # deployed variables), and a malformed point is refused with the variable's name.
    base = {
        "DURABLE_APP": "m:app",
        "DURABLE_LEDGER_TABLE": "led",
        "DURABLE_IDEMPOTENCY_TABLE": "idm",
    }
    assert Settings.from_env(base).crash_at is None
    ok = Settings.from_env({**base, "DURABLE_CRASH_AT": "ledger.claim:1:after:/tmp/x"})
    assert ok.crash_at == "ledger.claim:1:after:/tmp/x"
    for bad in (
        "ledger.claim",
        "ledger.claim:0:before",
        "disk.write:1:after",
        "ledger.claim:1:during",
    ):
        with pytest.raises(InvalidInput) as info:
            Settings.from_env({**base, "DURABLE_CRASH_AT": bad})
        assert info.value.field == "DURABLE_CRASH_AT"
