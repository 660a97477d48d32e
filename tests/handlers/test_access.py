"""Per-workflow access: routes scoped to a workflow act on its runs only, and the
template's example policies allow what their names say (checked against execute-api ARNs
with IAM's wildcard rules)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.handlers.conftest import Stack
from tests.handlers.events import OPERATOR_ARN, api_event
from tests.handlers.test_api_events import run_to_wait, show
from tests.handlers.test_template import RESOURCES

# --- scoped routes ----------------------------------------------------------------------


def test_a_scoped_route_answers_for_its_own_workflows_runs(stack: Stack) -> None:
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    got = stack.call(api_event("GET", f"/workflows/approval/runs/{run_id}"))
    assert (got.status, got.body["run_id"]) == (200, run_id)
    listed = stack.call(api_event("GET", "/workflows/approval/runs"))
    assert run_id in [r["run_id"] for r in listed.body["runs"]]
    answered = stack.call(
        api_event("POST", f"/workflows/approval/runs/{run_id}/waits/manager", {"result": "ok"})
    )
    assert answered.status == 202
    stack.drain()
    shown = show(stack, run_id)
    assert shown["output"] == {"approved": "ok"}
    (wait,) = [s for s in shown["steps"] if s["name"] == "manager"]
    assert wait["completed_by"] == OPERATOR_ARN
    # the run's audit, as the console shows it: who approved what
    assert [(a["action"], a["by"], a["what"]) for a in shown["audit"]] == [
        ("approved", OPERATOR_ARN, f"manager at {wait['position']}")
    ]


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("POST", "/waits/manager", {"result": "ok"}),
        ("POST", "/signals/go", {"n": 1}),
        ("POST", "/cancel", {"reason": "not mine"}),
        ("POST", "/retry", {}),
        ("POST", "/fork", {"from_step": "0001"}),
    ],
)
def test_a_scoped_route_cannot_reach_another_workflows_run(
    stack: Stack, method: str, suffix: str, body: Any
) -> None:
    """A caller allowed on workflow A's routes puts A in the path of workflow B's run:
    404, as for a run that does not exist, and nothing written."""
    other = run_to_wait(stack, "approval", {"amount": 5})
    before = stack.snapshot()
    reply = stack.call(api_event(method, f"/workflows/greet/runs/{other}{suffix}", body))
    assert reply.status == 404 and reply.error["type"] == "RunNotFound", reply.body
    assert "of workflow 'greet'" in reply.error["message"]
    assert stack.snapshot() == before and stack.invoker.pop() is None


# --- the example policies ----------------------------------------------------------------

API, STAGE, ACCOUNT, REGION = "abc123", "dev", "123456789012", "us-east-1"


def _resources(policy: str) -> list[str]:
    values = {
        "AWS::Partition": "aws",
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        "Api": API,
        "Stage": STAGE,
        "ApproverWorkflow": "expense-approval",
    }
    (statement,) = RESOURCES[policy]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow" and statement["Action"] == "execute-api:Invoke"
    subs = (
        statement["Resource"]
        if isinstance(statement["Resource"], list)
        else [statement["Resource"]]
    )
    return [re.sub(r"\$\{([^}]+)\}", lambda m: values[m.group(1)], s["Sub"]) for s in subs]


def _allows(policy: str, method: str, path: str) -> bool:
    """IAM's rule for a resource ARN: '*' matches any characters ('/' included), '?' one."""
    arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API}/{STAGE}/{method}{path}"
    for pattern in _resources(policy):
        regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        if re.fullmatch(regex, arn):
            return True
    return False


RUN = "01JAAAAAAAAAAAAAAAAAAAAAAA"
CASES = [
    # (method, path, operator, auditor, approver of expense-approval)
    ("POST", "/workflows/expense-approval/runs", True, False, False),
    ("GET", "/workflows/expense-approval/runs", True, True, True),
    ("GET", f"/workflows/expense-approval/runs/{RUN}", True, True, True),
    ("POST", f"/workflows/expense-approval/runs/{RUN}/waits/manager", True, False, True),
    ("POST", f"/workflows/expense-approval/runs/{RUN}/cancel", True, False, False),
    ("POST", f"/workflows/expense-approval/runs/{RUN}/signals/paid", True, False, False),
    ("POST", f"/workflows/onboarding/runs/{RUN}/waits/manager", True, False, False),
    ("GET", f"/workflows/onboarding/runs/{RUN}", True, True, False),
    ("GET", f"/workflows/expense-approval-eu/runs/{RUN}", True, True, False),
    ("POST", f"/runs/{RUN}/waits/manager", True, False, False),  # the unscoped route
    ("GET", f"/runs/{RUN}", True, True, False),
    ("POST", f"/runs/{RUN}/retry", True, False, False),
    ("GET", "/workflows", True, True, False),
    ("GET", "/schedules", True, True, False),
    ("POST", "/schedules/nightly/pause", True, False, False),
    ("POST", "/schedules/nightly/run", True, False, False),
]


@pytest.mark.parametrize(("method", "path", "operator", "auditor", "approver"), CASES)
def test_the_example_policies_allow_what_their_names_say(
    method: str, path: str, operator: bool, auditor: bool, approver: bool
) -> None:
    assert _allows("OperatorAccessPolicy", method, path) is operator
    assert _allows("AuditorAccessPolicy", method, path) is auditor
    assert _allows("ApproverAccessPolicy", method, path) is approver


def test_the_cli_reads_and_approves_through_the_scoped_routes(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable import cli
    from tests.handlers.test_api_events import cli_through

    run_id = run_to_wait(stack, "approval", {"amount": 5})
    seen: list[str] = []
    real_call = stack.call

    def recording(event: dict[str, Any]) -> Any:
        seen.append(event["path"])
        return real_call(event)

    monkeypatch.setattr(stack, "call", recording)
    cli_through(stack, monkeypatch)
    base = ["--endpoint", "http://127.0.0.1:1"]
    assert cli.main([*base, "show", run_id, "--workflow", "approval"]) == 0
    assert cli.main([*base, "approve", run_id, "manager", "--workflow", "approval"]) == 0
    assert seen == [
        f"/workflows/approval/runs/{run_id}",
        f"/workflows/approval/runs/{run_id}/waits/manager",
    ]
    assert cli.main([*base, "show", run_id, "--workflow", "greet"]) != 0  # not its run
    capsys.readouterr()


# --- one spelling per path ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/workflows/approva%6C/runs/{run}", None),
        ("POST", "/workflows/%61pproval/runs/{run}/waits/manager", {"result": "ok"}),
        ("POST", "/workflows/approval/runs/{run}/waits/m%61nager", {"result": "ok"}),
        ("POST", "/workflows/approval/runs", {"amount": 1}),
        ("POST", "/workflows/appr%6Fval/runs", {"amount": 1}),
        ("POST", "/runs/{run}/cancel", {"reason": "x"}),
        ("POST", "/runs/{run}%2D/cancel", {"reason": "x"}),
        ("POST", "/schedules/nightly%2Dimport/pause", {}),
    ],
)
def test_a_path_spelled_with_an_encoded_letter_is_refused_before_anything_is_read(
    stack: Stack, method: str, path: str, body: Any
) -> None:
    """An IAM rule names a workflow by its path: '/workflows/approva%6C/...' would reach
    'approval' past a Deny on '/workflows/approval/*' if the API decoded it. Refused
    with 400 naming the canonical spelling; nothing written. The plain spelling in the
    same list is the control: it is served."""
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    before = stack.snapshot()
    reply = stack.call(api_event(method, path.format(run=run_id), body))
    if "%" not in path:
        assert reply.status in (201, 202), reply.body
        return
    assert reply.status == 400 and reply.error["type"] == "NonCanonicalPath", reply.body
    assert reply.error["field"] == "path"
    assert "%" in reply.error["message"] and "send it as" in reply.error["message"]
    assert stack.snapshot() == before and stack.invoker.pop() is None


def test_characters_that_must_be_encoded_may_come_either_way(stack: Stack) -> None:
    """Python's quote encodes '(' and ')', the console's encodeURIComponent does not:
    both spellings name the same wait, and a space must come encoded."""
    run_id = run_to_wait(stack, "approval", {"amount": 5})
    for spelled in ("manager%20%28lead%29", "manager%20(lead)"):
        reply = stack.call(api_event("POST", f"/runs/{run_id}/waits/{spelled}", {"result": "ok"}))
        assert reply.status == 404 and reply.error["type"] != "NonCanonicalPath", reply.body
        assert "manager (lead)" in reply.error["message"], reply.body
