"""Durable workflows for AWS Lambda: plain Python functions replayed from a DynamoDB ledger.

from durable import App, Context, RetryPolicy

app = App()

@app.step(retry=RetryPolicy(max_attempts=5))
def provision_workspace(user_id: str) -> str: ...

@app.workflow(name="onboarding", version=1)
def onboarding(ctx: Context, user_id: str) -> dict[str, str]:
    return {"workspace": provision_workspace(user_id)}
"""

from durable.active import current_step
from durable.children import ChildHandle
from durable.codecs import Serdes
from durable.completion import BatchFailed, BatchItem, BatchResult, BranchFailed, Completion
from durable.config import EngineConfig
from durable.context import Context
from durable.engine import Engine, Outcome
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
from durable.flow import Concurrency, RateLimit
from durable.model import RunRecord, RunStatus, StepRecord, StepStatus
from durable.registry import App
from durable.retry import RetryPolicy
from durable.run_logging import RunKeys
from durable.step_context import StepContext
from durable.waits import Callback

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
