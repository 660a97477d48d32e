"""Issue 47 item 6: the API tells an unknown path (404) from a method the path does not
answer (405, with ``Allow``) from its own route table, not from Powertools' private lists
(``_static_routes``/``_dynamic_routes``), whose rename would have turned every 404 and 405
into a 500."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from durable.api.routes import build_resolver
from tests.handlers.events import LambdaContext, api_event

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
# Values for a rule's <name> segment: plain, with the RFC 3986 characters Powertools takes,
# percent-encoded (an encoded slash too), and one character it does not take (a quote).
SEGMENTS = ("greet", "a.b~c", "x%2Fy", "k:1@2", "with space", 'quo"te')


def _no_service() -> Any:
    raise RuntimeError("no service in this test: a found route fails with 500")


def _answer(app: Any, method: str, path: str) -> tuple[int, str, str | None]:
    """Status, error type and Allow header of one request through the resolver."""
    reply = app.resolve(api_event(method, path, {} if method != "GET" else None), LambdaContext())
    body = json.loads(reply["body"]) if reply.get("body") else {}
    error = body.get("error", {}).get("type", "") if isinstance(body, dict) else ""
    headers = {**(reply.get("headers") or {}), **(reply.get("multiValueHeaders") or {})}
    allow = headers.get("Allow")
    return reply["statusCode"], error, allow if isinstance(allow, str | None) else allow[0]


def _paths() -> list[str]:
    """Every path the API documents, with each {parameter} given each awkward value, with
    and without a trailing slash; and paths one segment longer and shorter (unknown)."""
    documented = [*json.loads((ROOT / "openapi.json").read_text())["paths"], "/openapi.json"]
    paths = ["/", "/nothing", "/runs/x/y/z"]
    for rule in documented:
        for segment in SEGMENTS:
            path = re.sub(r"\{\w+\}", segment, rule)
            paths += [path, path + "/", path + "/extra", path.rsplit("/", 1)[0]]
    return sorted(set(paths))


def test_the_route_table_answers_as_the_resolver_routes() -> None:
    """For every route's path (with awkward segment values, and a trailing slash) and every
    method: the resolver runs a route exactly when the table lists that method for the
    path, and otherwise answers 405 naming the table's methods, or 404 when it lists none."""
    app = build_resolver(_no_service)
    assert len(app.route_table) > 20
    checked = 0
    for path in _paths():
        allowed = app.allowed_methods(path)
        for method in METHODS:
            status, error, allow = _answer(app, method, path)
            if method in allowed:
                assert error not in {"NotFound", "MethodNotAllowed"}, (method, path)
            elif allowed:
                assert (status, allow) == (405, ", ".join(allowed)), (method, path)
            else:
                assert (status, error) == (404, "NotFound"), (method, path)
            checked += 1
    assert checked > 2000


def test_404_and_405_do_not_read_powertools_private_route_lists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN Powertools' private route lists gone from our code's view (as a rename would
    make them; Powertools' own routing still works) WHEN an unknown path and a wrong
    method are asked THEN 404 and 405 as ever (the old code failed with a 500)."""
    app = build_resolver(_no_service)
    real = type(app)

    class Renamed(real):  # type: ignore[valid-type,misc]
        def __getattribute__(self, name: str) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if name in {"_static_routes", "_dynamic_routes"} and caller.startswith("durable."):
                raise AttributeError(name)
            return super().__getattribute__(name)

    monkeypatch.setattr(app, "__class__", Renamed)
    assert _answer(app, "GET", "/workflows/greet/runs/x/y")[:2] == (404, "NotFound")
    assert _answer(app, "PUT", "/workflows") == (405, "MethodNotAllowed", "GET")
