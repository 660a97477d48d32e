"""Four puts under X-Ray's botocore patch, printed as JSON: run in a fresh interpreter
(``python -m tests.support.xray_probe``), since the patch is global and permanent.

Two through ``DirectPut`` and two through ``client.put_item`` (each a write, then the same
write refused by its condition), on moto, in one segment: the test compares the direct
puts' subsegments and trace headers with botocore's.
"""

from __future__ import annotations

import json
import os
from typing import Any

for name, value in {
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}.items():
    os.environ[name] = value

from aws_xray_sdk.core import patch, xray_recorder  # noqa: E402


class Kept:
    """An X-Ray emitter that keeps what it would send to the daemon."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send_entity(self, entity: Any) -> None:
        self.sent.append(json.loads(entity.serialize()))

    def set_daemon_address(self, address: str) -> None:
        pass


def main() -> None:
    kept = Kept()
    xray_recorder.configure(emitter=kept, sampling=False, context_missing="IGNORE_ERROR")
    patch(["botocore"])  # as Powertools' Tracer does

    import boto3
    from botocore.exceptions import ClientError
    from moto import mock_aws

    from durable.adapters.dynamodb_direct import DirectPut

    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        headers: list[str] = []
        client.meta.events.register(
            "before-send.dynamodb.PutItem",
            lambda request, **_: headers.append(_text(request.headers["X-Amzn-Trace-Id"])),
        )
        direct = DirectPut(client)
        outcomes: list[str] = []
        xray_recorder.begin_segment("probe")
        for side, put in (("direct", direct), ("botocore", client.put_item)):
            item = {"pk": {"S": side}}
            conditions: list[dict[str, Any]] = [
                {},
                {"ConditionExpression": "attribute_not_exists(pk)"},
            ]
            for condition in conditions:
                try:
                    put(TableName="ledger", Item=item, **condition)
                    outcomes.append("ok")
                except ClientError as error:
                    outcomes.append(error.response["Error"]["Code"])
        xray_recorder.end_segment()
    print(
        json.dumps(
            {"direct": direct.direct, "outcomes": outcomes, "sent": kept.sent, "headers": headers}
        )
    )


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


if __name__ == "__main__":
    main()
