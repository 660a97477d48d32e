"""The API's OpenAPI document: generated from the routes, committed as ``openapi.json``.

    python -m durable.api.openapi            # rewrite openapi.json
    python -m durable.api.openapi --check    # exit 1 when openapi.json is out of date

Powertools derives paths, parameters and the schema'd bodies from the routes; this module
adds what it cannot see: the raw-JSON bodies (a workflow's input, a signal's payload), the
webhook signature headers, and which routes need IAM (SigV4) credentials.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
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


def render() -> str:
    from durable.api.routes import build_resolver

    def no_service() -> Any:
        raise RuntimeError("the document is built without a service")

    return json.dumps(document(build_resolver(no_service)), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    parser.add_argument("--path", type=Path, default=Path("openapi.json"))
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
        if current != text:
            print(f"{args.path} is out of date: run python -m durable.api.openapi", file=sys.stderr)
            return 1
        return 0
    args.path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
