"""The handlers serve runs on the template's tables as CloudFormation creates them.

LocalStack runs no Lambda functions without Docker, so the stack is the template's storage
(``infra.local.cfn_tables``); the handlers run in-process against those tables: a start
through the API handler, the worker's invocation, the result read back through the API.
"""

from __future__ import annotations

import uuid

import pytest

from durable.adapters.schema import IDEMPOTENCY, LEDGER
from infra.local.cfn_tables import delete_stack, deploy_stack, storage_template
from tests.conftest import TEMPLATE, aws_client
from tests.handlers.conftest import build_stack
from tests.handlers.events import api_event

# Marked here, not only by folder: plain `pytest` then skips it where LocalStack is absent.
pytestmark = pytest.mark.localstack


def test_handlers_serve_runs_on_the_cloudformation_tables(localstack_endpoint: str) -> None:
    account = f"{uuid.uuid4().int % 10**12:012d}"  # a fresh LocalStack account
    cloudformation = aws_client("cloudformation", localstack_endpoint, account=account)
    stage = f"h{uuid.uuid4().hex[:8]}"
    name = f"durable-handlers-{stage}"
    outputs = deploy_stack(
        cloudformation, name, storage_template(TEMPLATE, parameters={"Stage": stage})
    )
    try:
        dynamodb = aws_client("dynamodb", localstack_endpoint, account=account)
        stack = build_stack(dynamodb, None, tables=(outputs[LEDGER], outputs[IDEMPOTENCY]))
        signup = {"user_id": "u", "email": "e"}
        reply = stack.call(api_event("POST", "/workflows/greet/runs", signup))
        assert reply.status == 202, reply.body
        assert [w["result"] for w in stack.drain()] == ["succeeded"]
        shown = stack.call(api_event("GET", f"/runs/{reply.body['run_id']}"))
        assert shown.body["output"] == {"greeting": "hello u"}
    finally:
        delete_stack(cloudformation, name)
