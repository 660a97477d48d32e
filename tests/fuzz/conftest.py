"""The bad-input suites' target: the API handler over template tables on moto in-process.

One stack per module (composing the handlers and creating the tables costs ~1 s; hypothesis
then calls it hundreds of times): a run waiting for its callback (its token), a run waiting
for a signal, a finished run. Every refused request must leave both tables as they were, so
the state is shared safely; the schema fuzzing, which may also be accepted, gets its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.conftest import _fresh_tables, aws_client
from tests.handlers import workflows
from tests.handlers.conftest import Reply, Stack, build_stack
from tests.handlers.events import api_event

# Bounded and deterministic: the same examples on every run (no example database either).
FUZZ = settings(
    max_examples=20,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # the stack is shared on purpose (see above)
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
JSON_TYPES = ("", "application/json", "application/json; charset=utf-8", "application/json;x=1")


@dataclass
class Target:
    stack: Stack
    waiting: str  # a run of "approval", waiting for its callback
    token: str  # that callback's token
    signalled: str  # a run of "signalled", waiting for the signal "go"
    finished: str  # a SUCCEEDED run of "greet"

    def call(self, event: dict[str, Any]) -> Reply:
        return self.stack.call(event)


def _run(stack: Stack, workflow: str, body: Any = None) -> str:
    reply = stack.call(api_event("POST", f"/workflows/{workflow}/runs", body))
    assert reply.status == 202, reply.body
    stack.drain()
    run_id: str = reply.body["run_id"]
    return run_id


def build_target() -> Target:
    stack = build_stack(aws_client("dynamodb", None), _fresh_tables)
    waiting = _run(stack, "approval", {"amount": 5})
    url = workflows.OUTBOX[waiting]
    signalled = _run(stack, "signalled")
    finished = _run(stack, "greet", {"user_id": "u1", "email": "u1@example.com"})
    return Target(stack, waiting, url.rsplit("/", 1)[1], signalled, finished)


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    """The stack inside moto for the module; the ``durable`` logger restored after it (the
    handlers configure it as Powertools' on their first event)."""
    from moto import mock_aws

    lib = logging.getLogger("durable")
    saved = {k: list(v) if isinstance(v, list) else v for k, v in vars(lib).items()}
    with mock_aws():
        yield build_target()
    lib.__dict__.clear()
    lib.__dict__.update(saved)
