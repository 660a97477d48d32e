"""Durable workflows for AWS Lambda: plain Python functions replayed from a DynamoDB ledger.

from durable import App, Context, RetryPolicy

app = App()

@app.step(retry=RetryPolicy(max_attempts=5))
def provision_workspace(user_id: str) -> str: ...

@app.workflow(name="onboarding", version=1)
def onboarding(ctx: Context, user_id: str) -> dict[str, str]:
    return {"workspace": provision_workspace(user_id)}
"""

from durable.core.codecs import Serdes
from durable.core.completion import BatchFailed, BatchItem, BatchResult, BranchFailed, Completion
from durable.core.config import EngineConfig
from durable.core.flow import Concurrency, RateLimit
from durable.core.model import RunRecord, RunStatus, StepRecord, StepStatus
from durable.core.retry import RetryPolicy
from durable.engine.children import ChildHandle
from durable.engine.context import Context
from durable.engine.engine import Engine, Outcome
from durable.engine.registry import App
from durable.engine.run_logging import RunKeys
from durable.engine.step_context import StepContext, current_step
from durable.engine.waits import Callback
from durable.errors import (
    CallbackFailed,
    CallbackTimeout,
    ChildFailed,
    DurableError,
    IdempotencyConflict,
    InvalidInput,
    NonDeterminismError,
    PayloadTooLarge,
    RetryableError,
    RunNotFound,
    SerdesError,
    StepFailed,
    TerminalError,
    WorkflowNotFound,
)

__all__ = [
    "App",
    "BatchFailed",
    "BatchItem",
    "BatchResult",
    "BranchFailed",
    "Callback",
    "CallbackFailed",
    "CallbackTimeout",
    "ChildFailed",
    "ChildHandle",
    "Completion",
    "Concurrency",
    "Context",
    "DurableError",
    "Engine",
    "EngineConfig",
    "IdempotencyConflict",
    "InvalidInput",
    "NonDeterminismError",
    "Outcome",
    "PayloadTooLarge",
    "RateLimit",
    "RetryPolicy",
    "RetryableError",
    "RunKeys",
    "RunNotFound",
    "RunRecord",
    "RunStatus",
    "Serdes",
    "SerdesError",
    "StepContext",
    "StepFailed",
    "StepRecord",
    "StepStatus",
    "TerminalError",
    "WorkflowNotFound",
    "current_step",
]
