"""Real event shapes: API Gateway REST proxy, EventBridge, EventBridge Scheduler, SQS,
DynamoDB Streams.

The API Gateway event follows what a REST API with Lambda proxy integration delivers
(``sam local generate-event apigateway aws-proxy`` has the same fields), with the
resource path of the route that matched and an IAM caller in ``requestContext``.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"
OPERATOR_ARN = f"arn:aws:iam::{ACCOUNT}:user/operator"
ROUTES = [
    "/workflows/{name}/runs",
    "/hooks/{name}",
    "/runs/{run_id}/signals/{name}",
    "/runs/{run_id}/waits/{name}",
    "/runs/{run_id}/cancel",
    "/runs/{run_id}/retry",
    "/runs/{run_id}/fork",
    "/runs/{run_id}",
    "/runs",
    "/callbacks/{token}/fail",
    "/callbacks/{token}",
    "/workflows",
]


def _resource(path: str) -> tuple[str, dict[str, str] | None]:
    for resource in ROUTES:
        pattern = "^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", resource) + "$"
        found = re.match(pattern, path)
        if found:
            return resource, found.groupdict() or None
    return "/{proxy+}", {"proxy": path.lstrip("/")}


def api_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    caller: str | None = OPERATOR_ARN,
    base64_body: bool = False,
) -> dict[str, Any]:
    """A REST API proxy event; ``body`` is JSON-encoded unless ``raw`` is given."""
    text = raw if raw is not None else (None if body is None else json.dumps(body))
    if base64_body and text is not None:
        text = base64.b64encode(text.encode()).decode()
    resource, path_parameters = _resource(path)
    all_headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "Host": f"abcdef1234.execute-api.{REGION}.amazonaws.com",
        "User-Agent": "pytest",
        "X-Amzn-Trace-Id": "Root=1-67891233-abcdef012345678912345678",
        "X-Forwarded-For": "203.0.113.7",
        "X-Forwarded-Port": "443",
        "X-Forwarded-Proto": "https",
        **(headers or {}),
    }
    request_id = str(uuid.uuid4())
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": path_parameters,
        "stageVariables": None,
        "requestContext": {
            "resourceId": "a1b2c3",
            "resourcePath": resource,
            "httpMethod": method,
            "extendedRequestId": request_id[:16],
            "requestTime": "29/Nov/2026:08:00:00 +0000",
            "path": f"/test{path}",
            "accountId": ACCOUNT,
            "protocol": "HTTP/1.1",
            "stage": "test",
            "domainPrefix": "abcdef1234",
            "requestTimeEpoch": 1795939200000,
            "requestId": request_id,
            "identity": {
                "cognitoIdentityPoolId": None,
                "accountId": ACCOUNT if caller else None,
                "cognitoIdentityId": None,
                "caller": "AIDAEXAMPLE" if caller else None,
                "sourceIp": "203.0.113.7",
                "principalOrgId": None,
                "accessKey": "AKIAEXAMPLE" if caller else None,
                "cognitoAuthenticationType": None,
                "cognitoAuthenticationProvider": None,
                "userArn": caller,
                "userAgent": "pytest",
                "user": "AIDAEXAMPLE" if caller else None,
            },
            "domainName": f"abcdef1234.execute-api.{REGION}.amazonaws.com",
            "apiId": "abcdef1234",
        },
        "body": text,
        "isBase64Encoded": base64_body,
    }


def eventbridge_event(detail: Any, *, event_id: str | None = None) -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": "StartWorkflowRun",
        "source": "com.example.signup",
        "account": ACCOUNT,
        "time": "2026-11-29T08:00:00Z",
        "region": REGION,
        "resources": [],
        "detail": detail,
    }


def scheduler_target_input(run_id: str) -> dict[str, Any]:
    """What EventBridge Scheduler delivers to a Lambda target: its ``Input``, parsed."""
    return {"run_id": run_id, "reason": "timer"}


def scheduled_sweep_event() -> dict[str, Any]:
    """EventBridge Scheduler's event for a schedule without a custom input."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.scheduler",
        "account": ACCOUNT,
        "time": "2026-11-29T08:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/sweep"],
        "detail": "{}",
    }


def sqs_record(body: str, *, message_id: str | None = None) -> dict[str, Any]:
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a==",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1795939200000",
            "SenderId": ACCOUNT,
            "ApproximateFirstReceiveTimestamp": "1795939200001",
        },
        "messageAttributes": {},
        "md5OfBody": "7b270e59b47ff90a553787216d55d91d",
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:durable-start-test",
        "awsRegion": REGION,
    }


# What DynamoDB Streams puts on a record of an item that Time to Live deleted (and only
# there: a delete made by anyone else has no userIdentity).
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
_SEQUENCE = itertools.count(4_231_700_000_000_000_000_001)


def stream_record(
    event_name: str,
    pk: str,
    sk: str,
    *,
    by_ttl: bool = False,
    table: str = "durable-ledger-test",
) -> dict[str, Any]:
    """One record of a ``KEYS_ONLY`` DynamoDB stream as Lambda delivers it (in ``Records``):
    keys only, a sequence number that grows, ``userIdentity`` when TTL deleted the item."""
    keys = {"pk": {"S": pk}, "sk": {"S": sk}}
    record: dict[str, Any] = {
        "eventID": uuid.uuid4().hex,
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": 1795939200.0,
            "Keys": keys,
            "SequenceNumber": str(next(_SEQUENCE)),
            "SizeBytes": len(pk) + len(sk) + 4,
            "StreamViewType": "KEYS_ONLY",
        },
        "eventSourceARN": (
            f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}/stream/2026-11-01T00:00:00.000"
        ),
    }
    if by_ttl:
        record["userIdentity"] = dict(TTL_IDENTITY)
    return record


def ttl_removal(run_id: str) -> dict[str, Any]:
    """The record of TTL deleting the run item of ``run_id`` (its retention ended)."""
    return stream_record("REMOVE", f"RUN#{run_id}", "RUN", by_ttl=True)


def stream_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


@dataclass
class LambdaContext:
    """The attributes of the Lambda context object the handlers and Powertools read."""

    function_name: str = "durable-worker-test"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/durable-worker-test"
    log_stream_name: str = "2026/11/29/[$LATEST]0123456789abcdef"
    remaining_ms: int = 60_000

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
