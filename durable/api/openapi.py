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
from typing import Any

from durable.api.spec import PUBLIC, RAW_BODIES, SIGV4, TITLE, VERSION, document  # noqa: F401


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
