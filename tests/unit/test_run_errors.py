"""A failed run's error names its type once: ``type`` beside a ``message`` without it.

Runs used to store ``message="StepFailed: step ..."`` next to ``type="StepFailed"``, so every
reader that prints ``type: message`` (``durable show``, the dev console) said
"StepFailed: StepFailed: ...".
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from durable import App, Context, RetryPolicy, TerminalError
from durable.ops.render import error_line, render_run
from durable.testing import LocalRunner

app = App()


@app.step(retry=RetryPolicy(max_attempts=1))
def charge() -> None:
    raise TerminalError("card declined")


@app.workflow(name="pay", version=1)
def pay(ctx: Context) -> None:
    charge()


@app.workflow(name="own", version=1)
def own(ctx: Context) -> None:
    raise ValueError("bad input")


@app.workflow(name="ask", version=1)
def ask(ctx: Context) -> None:
    ctx.wait_for_callback("manager")


def failed(workflow: str) -> dict[str, object]:
    runner = LocalRunner(app)
    run_id = runner.start(workflow).run_id
    runner.run_until_idle()
    if workflow == "ask":
        runner.complete_wait(run_id, "manager", error={"type": "Rejected", "message": "no"})
        runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.error is not None
    return {**asdict(run), "error": run.error.to_dict()}


@pytest.mark.parametrize(
    ("workflow", "line"),
    [
        (
            "pay",
            "StepFailed: step 'charge' at position 0001 failed after 1 attempt(s): "
            "TerminalError: card declined",
        ),
        ("own", "ValueError: bad input"),
        ("ask", "CallbackFailed: Rejected: no"),
    ],
)
def test_the_stored_message_leaves_the_type_to_its_own_field(workflow: str, line: str) -> None:
    """GIVEN a run failed by a step, by its own code, by a rejected callback
    WHEN its error is stored and shown THEN the message does not start with the type and
    the shown line names the type once."""
    run = failed(workflow)
    error = run["error"]
    assert isinstance(error, dict)
    assert not error["message"].startswith(error["type"])
    assert f"  error  {line}" in render_run(run).splitlines()


def test_a_message_stored_with_its_type_is_shown_with_it_once() -> None:
    """Runs recorded before the change keep ``Type: ...`` in the message: shown once."""
    old = {"type": "StepFailed", "message": "StepFailed: step 'charge' failed"}
    assert error_line(old) == "StepFailed: step 'charge' failed"
    assert error_line({"type": "Canceled", "message": "customer left"}) == (
        "Canceled: customer left"
    )
    assert error_line({"type": "ValueError", "message": ""}) == "ValueError"
