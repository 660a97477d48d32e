"""A flow-control key the input lacks (issue 31, hole 4): refused at the start, naming the
field, with nothing written; in a distributed map, for every item before any child starts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Concurrency, Context, RateLimit, RunStatus
from durable.core.model import StepKind
from durable.errors import InvalidInput
from durable.testing import LocalRunner


def _app() -> App:
    app = App()

    @app.workflow(name="sync", concurrency=Concurrency(1, key=lambda job: job["region"]))
    def sync(ctx: Context, job: dict[str, Any]) -> str:
        return str(job["region"])

    @app.workflow(name="mail", rate_limit=RateLimit(5, timedelta(minutes=1), key="tenant"))
    def mail(ctx: Context, job: dict[str, Any]) -> str:
        return str(job["tenant"])

    @app.workflow(name="sync-all")
    def sync_all(ctx: Context, jobs: list[dict[str, Any]]) -> list[str]:
        return ctx.map("sync", jobs, distributed=True, max_concurrency=1).values()

    return app


@pytest.mark.parametrize(
    ("workflow", "field"), [("sync", "input.region"), ("mail", "input.tenant")]
)
def test_a_start_whose_input_lacks_the_key_is_refused_naming_the_field(
    workflow: str, field: str
) -> None:
    """GIVEN a key function or field the input does not have WHEN the run is started THEN
    InvalidInput names the field and no run exists (it was a bare KeyError, a 500; a rate
    key was found only by the worker, failing the run)."""
    runner = LocalRunner(_app())
    with pytest.raises(InvalidInput) as refused:
        runner.start(workflow, {"other": 1})
    assert refused.value.field == field
    assert runner.memory_ledger.list_runs(workflow=workflow).items == []


def test_a_distributed_map_checks_every_items_key_before_the_first_child() -> None:
    """GIVEN a map whose third item lacks the gate key WHEN the map runs THEN it fails at
    the call naming the item, and no child was started (two ran to SUCCEEDED before)."""
    runner = LocalRunner(_app())
    run = runner.start("sync-all", [{"region": "eu"}, {"region": "us"}, {"zone": "x"}])
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED and failed.error is not None
    assert "map item 3 (of 3)" in failed.error.message and "region" in failed.error.message
    assert [s for s in runner.history(run.run_id) if s.kind == StepKind.CHILD] == []
    assert runner.memory_ledger.list_runs(workflow="sync").items == []
