"""Invoke the worker Lambda asynchronously (``InvocationType=Event``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

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
