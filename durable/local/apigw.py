"""HTTP requests as API Gateway REST proxy events, and proxy results as responses.

The event has the shape API Gateway sends a Lambda proxy integration (version 1.0),
including ``requestContext`` with a caller identity, so ``handlers/api`` runs locally
exactly as deployed. Operator routes are IAM-authorized on AWS; locally every caller is
the developer, named in ``requestContext.identity``.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

LOCAL_ACCOUNT = "000000000000"
LOCAL_USER_ARN = f"arn:aws:iam::{LOCAL_ACCOUNT}:user/local-developer"


def to_rest_event(
    method: str,
    raw_path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    stage: str = "local",
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    split = urlsplit(raw_path)
    query = parse_qs(split.query, keep_blank_values=True)
    multi_headers: dict[str, list[str]] = {}
    for key, value in headers.items():
        multi_headers.setdefault(key, []).append(value)
    try:
        text: str | None = body.decode("utf-8") if body else None
        encoded = False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    now = time.time()
    return {
        "resource": split.path,
        "path": split.path,
        "httpMethod": method.upper(),
        "headers": dict(headers) or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "accountId": LOCAL_ACCOUNT,
            "apiId": "local",
            "domainName": headers.get("Host", "127.0.0.1"),
            "httpMethod": method.upper(),
            "path": f"/{stage}{split.path}",
            "protocol": "HTTP/1.1",
            "requestId": str(uuid.uuid4()),
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "resourcePath": split.path,
            "stage": stage,
            "identity": {
                "sourceIp": source_ip,
                "userAgent": headers.get("User-Agent", ""),
                "accountId": LOCAL_ACCOUNT,
                "caller": "local-developer",
                "user": "local-developer",
                "userArn": LOCAL_USER_ARN,
            },
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


def from_proxy_result(result: Mapping[str, Any]) -> tuple[int, dict[str, str], bytes]:
    status = int(result.get("statusCode", 502))
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers[str(key)] = ", ".join(str(v) for v in values)
    body = result.get("body") or ""
    data = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    return status, headers, data
