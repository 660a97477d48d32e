"""The API's OpenAPI document from a resolver (``document``): what Powertools derives from
the routes, plus what it cannot see (the raw-JSON bodies, the webhook signature headers,
which routes need IAM). Served by ``durable.api.routes`` at ``/openapi.json``; written to
``openapi.json`` by ``durable.api.openapi``, which builds the routes (so this module does
not import them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable.api.hooks import SIGNATURE_HEADER, TIMESTAMP_HEADER

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

TITLE = "durable workflows API"
VERSION = "1"
SIGV4 = {
    "type": "apiKey",
    "name": "Authorization",
    "in": "header",
    "x-amazon-apigateway-authtype": "awsSigv4",
    "description": "IAM: sign requests with SigV4 (execute-api:Invoke on the route)",
}
# Routes authorized by something other than IAM: the token in the path, the signature.
PUBLIC = {
    ("/callbacks/{token}", "post"),
    ("/callbacks/{token}/fail", "post"),
    ("/callbacks/{token}/heartbeat", "post"),
    ("/hooks/{name}", "post"),
}
RAW_BODIES = {
    ("/workflows/{name}/runs", "post"): "The workflow's input: any JSON value matching its "
    "parameter type (see GET /workflows). Empty for workflows without input.",
    ("/hooks/{name}", "post"): "The workflow's input, exactly as signed.",
    ("/runs/{run_id}/signals/{name}", "post"): "The signal's payload: any JSON value.",
}


def document(app: APIGatewayRestResolver) -> dict[str, Any]:
    schema = app.get_openapi_schema(
        title=TITLE,
        version=VERSION,
        description="Start, inspect and steer durable workflow runs.",
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    schema.setdefault("components", {}).setdefault("securitySchemes", {})["sigv4"] = SIGV4
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            where = (path, method)
            operation["security"] = [] if where in PUBLIC else [{"sigv4": []}]
            if where in RAW_BODIES:
                operation["requestBody"] = {
                    "required": False,
                    "description": RAW_BODIES[where],
                    "content": {"application/json": {"schema": {}}},
                }
            if path == "/hooks/{name}":
                operation.setdefault("parameters", []).extend(
                    [
                        {
                            "name": TIMESTAMP_HEADER,
                            "in": "header",
                            "required": True,
                            "schema": {"type": "integer"},
                            "description": "Unix seconds when the delivery was signed",
                        },
                        {
                            "name": SIGNATURE_HEADER,
                            "in": "header",
                            "required": True,
                            "schema": {"type": "string"},
                            "description": "v1=<hex HMAC-SHA256(secret, timestamp + '.' + body)>",
                        },
                    ]
                )
    return schema
