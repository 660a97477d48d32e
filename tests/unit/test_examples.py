"""The example workflows, as users would test theirs, with LocalRunner."""

from __future__ import annotations

from typing import Any

from durable import RunStatus
from durable.testing import LocalRunner
from examples import app as combined
from examples.services import FakeServices, services

EXPENSE = {"employee": "ann", "amount": 120, "manager": "bob"}


def approval_run(runner: LocalRunner) -> tuple[str, str]:
    run = runner.start("expense-approval", EXPENSE)
    runner.run_until_idle()
    callback = runner.history(run.run_id)[0]
    assert callback.kind == "callback" and callback.status == "WAITING"
    # The token reached the manager by email; the test rebuilds it from the secret.
    return run.run_id, _token(runner, run.run_id, callback.position, callback.token_nonce)


def _token(runner: LocalRunner, run_id: str, position: str, nonce: Any) -> str:
    from durable.core.tokens import make_token

    secret = runner.config.callback_secret
    assert secret is not None
    return make_token(secret, run_id, position, nonce)


def test_an_approved_expense_is_paid_once() -> None:
    assert isinstance(services, FakeServices)
    services.reset()
    runner = LocalRunner(combined.app)
    run_id, token = approval_run(runner)
    assert services.effects["email"] == 1
    runner.complete_callback(token, "bob")
    runner.run_until_idle()
    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.SUCCEEDED
    assert stored.output == '{"status":"paid","receipt":"paid 120 to ann","approved_by":"bob"}'
    assert dict(services.effects) == {"email": 1, "payment": 1}


def test_a_rejected_expense_is_not_paid() -> None:
    assert isinstance(services, FakeServices)
    services.reset()
    runner = LocalRunner(combined.app)
    run_id, token = approval_run(runner)
    runner.complete_callback(token, error={"type": "Rejected", "message": "no receipt"})
    runner.run_until_idle()
    assert runner.get_run(run_id).output == '{"status":"rejected","why":"no receipt"}'
    assert services.effects["payment"] == 0


def test_an_unanswered_expense_expires_after_a_week() -> None:
    runner = LocalRunner(combined.app)
    run_id, _ = approval_run(runner)
    runner.advance(days=7)
    assert runner.get_run(run_id).output == '{"status":"expired"}'


def test_the_combined_app_serves_every_example() -> None:
    names = sorted(w.name for w in combined.app.workflows())
    assert names == [
        "answer-mention",
        "data-pull",
        "deploy-on-push",
        "expense-approval",
        "fulfil-payment",
        "import-record",
        "nightly-import",
        "onboarding",
        "onboarding-parallel",
        "ship-order",
    ]


def test_the_parallel_onboarding_sends_the_email_beside_the_setup_and_replays_it() -> None:
    from examples import onboarding
    from examples.services import services

    services.reset()
    runner = LocalRunner(onboarding.app)
    run_id = runner.start("onboarding-parallel", {"user_id": "u9", "email": "u9@x.io"}).run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING  # the three-day sleep
    runner.advance(days=3)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == (
        '{"workspace":"ws-u9","project":"proj-ws-u9","welcome":"msg-welcome-u9",'
        '"nudge":"msg-nudge-u9"}'
    )
    assert dict(services.effects) == {"workspace": 1, "email": 2, "project": 1}
    positions = [s.position for s in runner.history(run_id)]
    assert positions[:4] == ["0001", "0001.0001.0001", "0001.0001.0002", "0001.0002.0001"]


def test_the_nightly_import_maps_its_records_over_child_runs_and_tolerates_bad_ones() -> None:
    from examples.record_import import warehouse

    warehouse.rows.clear()
    runner = LocalRunner(combined.app)
    run = runner.start("nightly-import", {"source": "crm", "count": 1000, "window": 50})
    runner.run_until_idle(max_invocations=100_000)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.SUCCEEDED, stored.error
    summary = __import__("json").loads(stored.output or "{}")
    assert summary["failed"] == [996]  # the malformed one: 1 of 1000, under 1%
    assert summary["imported"] == 999 and summary["skipped"] == 0
    assert len(warehouse.rows) == 999
    assert stored.children == 1000


def test_the_async_quote_example_gathers_its_steps_and_retries_a_busy_vendor(
    monkeypatch: Any,
) -> None:
    """examples/async_fetch.py with its HTTP call faked (tests/integration/
    test_async_example.py runs it against a real server): a 503 is retried after its
    backoff, a 404 fails the step for good without a retry, the cheapest quote wins."""
    import asyncio
    from datetime import timedelta

    from examples import async_fetch

    answers = {"/a": [(503, b""), (200, b'{"vendor":"a","price":3}')]}
    answers["/b"] = [(200, b'{"vendor":"b","price":5}')]
    answers["/gone"] = [(404, b"")]

    async def fake_get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
        await asyncio.sleep(0)
        return answers[url].pop(0)

    monkeypatch.setattr(async_fetch, "http_get", fake_get)
    runner = LocalRunner(async_fetch.app)
    run = runner.start("best-quote", ["/a", "/b"])
    runner.run_until_idle()
    runner.advance(timedelta(seconds=5))
    assert runner.result(run.run_id) == {"vendor": "a", "price": 3.0, "asked": 2}
    assert [s.attempt for s in runner.history(run.run_id)] == [2, 1]
    gone = runner.start("best-quote", ["/gone"])
    runner.run_until_idle()
    stored = runner.get_run(gone.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert "answered 404" in stored.error.message
    assert runner.history(gone.run_id)[0].attempt == 1


def test_the_async_guide_example_runs_as_written(monkeypatch: Any) -> None:
    """docs/async.md's first example, with a stand-in for httpx (the reader's own
    dependency, not this project's): a 503 is retried after its backoff, the quotes are
    gathered, the plain workflow runs the async step with ``ctx.step``."""
    import re
    import sys
    import types
    from datetime import timedelta
    from pathlib import Path

    prices = {"https://a.example/q": 7.0, "https://b.example/q": 4.0}
    busy = {"https://b.example/q"}  # answers 503 once

    class HTTPStatusError(Exception):
        def __init__(self, response: Any) -> None:
            super().__init__(f"HTTP {response.status_code}")
            self.response = response

    class Response:
        def __init__(self, url: str) -> None:
            self.url = url
            self.status_code = 503 if url in busy else 200
            busy.discard(url)

        def raise_for_status(self) -> None:
            if self.status_code >= 400:
                raise HTTPStatusError(self)

        def json(self) -> Any:
            base = self.url.split("?")[0]
            return {"vendor": base.split("/")[2], "price": prices[base]}

    class AsyncClient:
        def __init__(self, timeout: float) -> None:
            self.timeout = timeout

        async def __aenter__(self) -> AsyncClient:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def get(self, url: str) -> Response:
            return Response(url)

    httpx = types.ModuleType("httpx")
    httpx.AsyncClient = AsyncClient  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "httpx", httpx)
    guide = (Path(__file__).resolve().parents[2] / "docs" / "async.md").read_text()
    code = re.search(r"```python\n(.*?)```", guide, re.S)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "async_guide"}
    exec(compile(code.group(1), "docs/async.md", "exec"), namespace)
    runner = LocalRunner(namespace["app"])
    run = runner.start("best-quote", list(prices))
    runner.run_until_idle()
    runner.advance(timedelta(hours=1, seconds=2))
    assert runner.result(run.run_id) == namespace["Quote"](vendor="b.example", price=4.0)
    assert [s.attempt for s in runner.history(run.run_id) if s.kind == "step"] == [1, 2, 1]
    one = runner.start("one-quote", "https://a.example/q")
    runner.run_until_idle()
    assert runner.result(one.run_id).price == 7.0
