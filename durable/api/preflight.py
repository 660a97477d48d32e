"""Checks on a request body before any route sees it: media type, nesting, Unicode.

The resolver's own parsing turns malformed JSON into a 400, but three inputs used to get
past it and fail later as 500s (found by tests/fuzz): JSON nested deep enough to exhaust
the parser's recursion, a ``\\ud800``-style escape that decodes to a lone surrogate no
store or hash can encode, and bodies labelled as forms or other media types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from durable.api.errors import HttpError

# Routes whose body is a request object (not a workflow input or a signal payload, which
# may be any JSON): Powertools would otherwise take the first item of a JSON array.
_OBJECT_BODY = re.compile(r"^/(callbacks/[^/]+/fail|runs/[^/]+/(cancel|retry|fork|waits/[^/]+))/?$")

MAX_DEPTH = 32  # far beyond any workflow input; far below the parser's recursion limit
JSON_TYPES = ("application/json", "text/json")
FORM = "application/x-www-form-urlencoded"


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return str(value)
    return None


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (the point is to never recurse on hostile input)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def check_body(event: Mapping[str, Any]) -> HttpError | None:
    """The refusal for a body no route should see, or None."""
    body = event.get("body")
    if not body or str(event.get("httpMethod", "")).upper() not in ("POST", "PUT", "PATCH"):
        return None
    media = _header(event.get("headers"), "content-type")
    if media is not None:
        kind = media.split(";", 1)[0].strip().lower()
        if kind == FORM and str(event.get("path", "")).startswith("/hooks/"):
            return None  # GitHub's default (JSON in a payload field): read after the signature
        if kind and kind not in JSON_TYPES and not kind.endswith("+json"):
            return HttpError(
                415,
                "UnsupportedMediaType",
                f"the body is {kind}; send it as application/json",
                field="Content-Type",
            )
    try:
        parsed = json.loads(body)
    except RecursionError:
        return HttpError(
            400, "MalformedJSON", f"the body nests deeper than {MAX_DEPTH} levels", field="body"
        )
    except ValueError:
        return None  # plain malformed JSON: the resolver answers it (400, same shape)
    if _depth(parsed) > MAX_DEPTH:
        return HttpError(
            400, "MalformedJSON", f"the body nests deeper than {MAX_DEPTH} levels", field="body"
        )
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return HttpError(
            400,
            "MalformedJSON",
            "the body holds an unpaired surrogate escape (\\ud800-\\udfff); send valid Unicode",
            field="body",
        )
    if not isinstance(parsed, dict) and _OBJECT_BODY.match(str(event.get("path", ""))):
        return HttpError(
            422,
            "InvalidInput",
            'the body must be a JSON object, e.g. {"reason": "..."}',
            field="body",
        )
    return None
