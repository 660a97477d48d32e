"""Invoke the worker Lambda: runs asynchronously (``InvocationType=Event``), control
events synchronously (``LambdaCaller``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_support import storage_error

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class LambdaInvoker:
    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self.client = client
        self.function = function_name

    def invoke(self, run_id: str, reason: str, hop: int = 0) -> None:
        payload = json.dumps({"run_id": run_id, "reason": reason, "hop": hop}).encode()
        try:
            self.client.invoke(FunctionName=self.function, InvocationType="Event", Payload=payload)
        except Exception as e:
            storage_error(e, f"invoking {self.function} for run {run_id}")


def split_qualifier(function: str) -> tuple[str, str | None]:
    """A function ARN (or name) and its alias or version: ``...:function:f:live`` gives
    (``...:function:f``, ``live``); an unqualified one gives (itself, None)."""
    parts = function.split(":")
    if function.startswith("arn:") and len(parts) == 8:
        return ":".join(parts[:7]), parts[7]
    if not function.startswith("arn:") and len(parts) == 2:  # name:qualifier
        return parts[0], parts[1]
    return function, None


class LambdaCaller:
    """A synchronous invoke (``RequestResponse``) of a worker version or alias with a
    control event (``durable.ops.deploy_gate``); its JSON answer, or an error naming why."""

    def __init__(self, client: LambdaClient, function: str, qualifier: str | None = None) -> None:
        self.client = client
        self.function = function
        self.qualifier = qualifier

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        target = f"{self.function}:{self.qualifier}" if self.qualifier else self.function
        options: dict[str, Any] = {"Qualifier": self.qualifier} if self.qualifier else {}
        try:
            response = self.client.invoke(
                FunctionName=self.function,
                InvocationType="RequestResponse",
                Payload=json.dumps(payload).encode(),
                **options,
            )
        except Exception as e:
            storage_error(e, f"invoking {target}")
        raw = response["Payload"].read()
        try:
            data = json.loads(raw or b"null")
        except ValueError:
            data = None
        if response.get("FunctionError"):
            said = data.get("errorMessage") if isinstance(data, dict) else repr(raw[:300])
            raise RuntimeError(f"{target} failed: {said}")
        if not isinstance(data, dict):
            raise RuntimeError(f"{target} answered {raw[:300]!r}, not a JSON object")
        return data
