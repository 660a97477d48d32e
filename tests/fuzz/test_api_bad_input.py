"""Bad input to the API, as API Gateway REST proxy events: always a clean 4xx, nothing written.

GIVEN the API handler over template tables on moto in-process, with a run waiting for a
callback, one waiting for a signal and a finished one (``conftest.Target``)
WHEN it gets a start, callback or signal request that is wrong in one way (JSON of the wrong
type, malformed JSON, oversized bodies, unicode and control characters in workflow names,
signal names, tokens and idempotency keys, odd content types, bad base64)
THEN it answers a 4xx with a JSON ``{"error": {"type", "message", "field"}}`` naming the field
at fault, both tables are exactly as they were, and no worker was invoked.

Deeply nested JSON, lone surrogate escapes and non-JSON media types got a 500 until
``durable.api.preflight`` (written after this suite found them), and JSON arrays were taken
for objects on the request-object routes; the tests at the end pin those fixes.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.fuzz.conftest import (
    FUZZ,
    JSON_TYPES,
    Target,
    build_target,
)
from tests.handlers.events import api_event
from tests.handlers.workflows import Signup

LIMIT = 256 * 1024  # Settings.max_body_bytes, the stack's default
WORKFLOWS = {"greet", "approval", "signalled", "sleeper", "flaky", "counter", "report"}
# Unicode without lone surrogates (a REST event's strings come from UTF-8); control chars in.
TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
CONTROL = st.characters(max_codepoint=31)


def refused(target: Target, event: dict[str, Any], status: int | None = None) -> dict[str, Any]:
    """Send ``event``; assert a clean 4xx that changed nothing; return the error object."""
    before = target.stack.snapshot()
    reply = target.call(event)
    assert 400 <= reply.status < 500, (reply.status, reply.body)
    if status is not None:
        assert reply.status == status, reply.body
    error: dict[str, Any] = reply.body["error"]
    assert isinstance(error["type"], str) and error["type"]
    assert isinstance(error["message"], str) and error["message"]
    assert target.stack.snapshot() == before, "a refused request wrote to the ledger"
    assert target.stack.invoker.pop() is None, "a refused request invoked a worker"
    return error


def not_json(text: str) -> bool:
    if not text.strip():
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def signup_error(value: Any) -> str | None:
    """The field the engine names for an invalid greet input; None when it is valid."""
    try:
        Signup.model_validate(value)
    except ValidationError as e:
        return ".".join(str(p) for p in e.errors()[0]["loc"]) or "input"
    return None


def start(body: Any = None, *, raw: str | None = None, **kw: Any) -> dict[str, Any]:
    return api_event("POST", "/workflows/greet/runs", body, raw=raw, **kw)


# --- start --------------------------------------------------------------------------------


def bad_key(key: str) -> bool:
    """The one rule of every idempotency key: 1-256 characters, not blank, no controls."""
    controls = any(ord(c) < 32 or 127 <= ord(c) < 160 for c in key)
    return not key.strip() or len(key) > 256 or controls


@FUZZ
@given(body=JSON.filter(lambda v: signup_error(v) is not None), key=st.none() | TEXT)
@example(body={"user_id": 5, "email": "x@y"}, key=None)
@example(body={"user_id": "u1"}, key="k")
@example(body=[{"user_id": "u1", "email": "e"}], key=None)
@example(body="u1", key=None)
def test_a_start_input_of_the_wrong_shape_names_the_field(
    target: Target, body: Any, key: str | None
) -> None:
    headers = {"Idempotency-Key": key} if key is not None else None
    error = refused(target, start(body, headers=headers), 422)
    if key is not None and bad_key(key):
        assert error["field"] == "Idempotency-Key"
    else:
        # Powertools' idempotency record for a keyed start was removed again: no table changed.
        assert error["type"] == "InvalidInput"
        assert error["field"] == signup_error(body)


@FUZZ
@given(
    key=st.text(" \t", max_size=5)
    | st.text(st.characters(codec="utf-8"), min_size=257)
    | st.builds(
        lambda a, c, b: a + c + b, TEXT, st.sampled_from(["\x00", "\n", "\x7f", "\x85"]), TEXT
    )
)
def test_a_blank_overlong_or_control_character_key_is_refused_before_anything(
    target: Target, key: str
) -> None:
    body = {"user_id": "u1", "email": "u1@example.com"}  # a valid input: only the key is wrong
    error = refused(target, start(body, headers={"Idempotency-Key": key}), 422)
    assert error["field"] == "Idempotency-Key"


@FUZZ
@given(name=st.text(st.characters(codec="utf-8"), min_size=1, max_size=300))
@example(name="greet\x00")
@example(name="../greet")
@example(name="x" * 5000)
def test_an_unknown_workflow_name_is_a_404_naming_it(target: Target, name: str) -> None:
    if name in WORKFLOWS:
        return
    event = api_event("POST", f"/workflows/{quote(name, safe='')}/runs", {"user_id": "u1"})
    error = refused(target, event, 404)
    assert error["type"] == "WorkflowNotFound"
    assert "workflow" in error["message"]


@FUZZ
@given(
    text=st.text(st.characters(codec="utf-8"), max_size=200).filter(not_json),
    route=st.sampled_from(["start", "signal", "callback", "cancel", "retry", "fork"]),
)
@example(text="{bad", route="start")
@example(text="NaN", route="callback")
@example(text='{"user_id": "u1", "email": "e",}', route="signal")
@example(text="\x00", route="cancel")
def test_malformed_json_is_a_400_naming_the_body_on_every_route(
    target: Target, text: str, route: str
) -> None:
    path = {
        "start": "/workflows/greet/runs",
        "signal": f"/runs/{target.signalled}/signals/go",
        "callback": f"/callbacks/{target.token}",
        "cancel": f"/runs/{target.waiting}/cancel",
        "retry": f"/runs/{target.finished}/retry",
        "fork": f"/runs/{target.finished}/fork",
    }[route]
    error = refused(target, api_event("POST", path, raw=text))
    assert error["field"] == "body", (path, error)
    # Python's parser (Powertools') takes NaN and Infinity: then the value is the wrong type.
    assert error["type"] == "MalformedJSON" or text.strip() in ("NaN", "Infinity", "-Infinity")


@settings(FUZZ, max_examples=5)
@given(
    size=st.integers(LIMIT + 1, LIMIT + 40_000),
    char=st.sampled_from(["x", "é", "€", "😀", "\x00"]),
    encoded=st.booleans(),
)
@pytest.mark.parametrize("route", ["start", "signal", "callback", "cancel"])
def test_an_oversized_body_is_a_413_on_every_route(
    target: Target, route: str, size: int, char: str, encoded: bool
) -> None:
    path = {
        "start": "/workflows/greet/runs",
        "signal": f"/runs/{target.signalled}/signals/go",
        "callback": f"/callbacks/{target.token}",
        "cancel": f"/runs/{target.waiting}/cancel",
    }[route]
    width = len(char.encode())
    text = json.dumps(char * (size // width + 1), ensure_ascii=False)
    error = refused(target, api_event("POST", path, raw=text, base64_body=encoded), 413)
    assert (error["type"], error["field"]) == ("PayloadTooLarge", "body")


@FUZZ
@given(raw=st.text(st.characters(codec="ascii"), min_size=1, max_size=60))
@example(raw="!!!not base64")
@example(raw=base64.b64encode(b"\xff\xfe{}").decode())
def test_a_body_that_is_not_base64_of_utf8_is_a_400(target: Target, raw: str) -> None:
    try:
        base64.b64decode(raw, validate=True).decode("utf-8")
    except ValueError:
        event = start(raw=raw)
        event["isBase64Encoded"] = True
        error = refused(target, event, 400)
        assert (error["type"], error["field"]) == ("MalformedBody", "body")


OTHER_TYPES = st.sampled_from(
    ["text/plain", "application/xml", "multipart/form-data", "application/x-www-form-urlencoded"]
) | st.builds(lambda a, b: f"{a}/{b}", TEXT.filter(str.isalpha), TEXT.filter(str.isalpha))


def route_path(target: Target, route: str) -> str:
    return {
        "start": "/workflows/greet/runs",
        "signal": f"/runs/{target.signalled}/signals/go",
        "callback": f"/callbacks/{target.token}",
        "cancel": f"/runs/{target.waiting}/cancel",
    }[route]


@FUZZ
@given(
    body=JSON.filter(lambda v: signup_error(v) is not None),
    content_type=st.sampled_from([*JSON_TYPES, "APPLICATION/JSON", "text/json"]),
    encoded=st.booleans(),
)
def test_a_json_labelled_start_of_the_wrong_shape_is_a_422(
    target: Target, body: Any, content_type: str, encoded: bool
) -> None:
    event = start(body, headers={"Content-Type": content_type}, base64_body=encoded)
    assert refused(target, event, 422)["field"] == signup_error(body)


@FUZZ
@given(
    content_type=OTHER_TYPES,
    body=JSON.filter(lambda v: v is not None),  # no body: no media type to judge
    route=st.sampled_from(["start", "signal", "callback", "cancel"]),
)
@example(content_type="multipart/form-data; boundary=xyz", body={"result": "yes"}, route="callback")
@example(content_type="application/x-www-form-urlencoded", body="result=yes", route="callback")
def test_a_body_labelled_other_than_json_is_a_415_on_every_route(
    target: Target, content_type: str, body: Any, route: str
) -> None:
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind in ("application/json", "text/json") or kind.endswith("+json"):
        return
    event = api_event(
        "POST", route_path(target, route), body, headers={"Content-Type": content_type}
    )
    error = refused(target, event, 415)
    assert (error["type"], error["field"]) == ("UnsupportedMediaType", "Content-Type")


@FUZZ
@given(
    depth=st.integers(33, 3000),
    brackets=st.sampled_from(["[]", "{}"]),
    route=st.sampled_from(["start", "signal", "callback", "cancel"]),
)
def test_deeply_nested_json_is_a_400_naming_the_body(
    target: Target, depth: int, brackets: str, route: str
) -> None:
    opening, closing = ('{"a":', "}") if brackets == "{}" else ("[", "]")
    raw = opening * depth + "1" + closing * depth
    error = refused(target, api_event("POST", route_path(target, route), raw=raw), 400)
    assert (error["type"], error["field"]) == ("MalformedJSON", "body")


@FUZZ
@given(
    unit=st.integers(0xD800, 0xDFFF),
    before=TEXT,
    route=st.sampled_from(["start", "signal", "callback"]),
)
def test_a_lone_surrogate_escape_is_a_400_naming_the_body(
    target: Target, unit: int, before: str, route: str
) -> None:
    text = json.dumps(before)[:-1] + f"\\u{unit:04x}" + '"'  # an unpaired escape, at the end
    raw = {
        "start": f'{{"user_id": {text}, "email": "e"}}',
        "signal": text,
        "callback": text,
    }[route]
    error = refused(target, api_event("POST", route_path(target, route), raw=raw), 400)
    assert (error["type"], error["field"]) == ("MalformedJSON", "body")


# --- callbacks ----------------------------------------------------------------------------


@FUZZ
@given(token=st.text(st.characters(codec="utf-8"), min_size=1, max_size=120))
@example(token="01ARZ3NDEKTSV4RRFFQ69G5FAV.0001." + "A" * 43)
@example(token="..")
def test_a_malformed_or_unknown_callback_token_is_refused(target: Target, token: str) -> None:
    if token == target.token:
        return
    event = api_event("POST", f"/callbacks/{quote(token, safe='')}", {"result": "yes"}, caller=None)
    error = refused(target, event)
    if error["type"] == "InvalidInput":
        assert error["field"] == "token"
    else:
        assert error["type"] in ("CallbackNotFound", "NotFound"), error


@FUZZ
@given(
    mac=st.text(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=43, max_size=43
    )
)
def test_a_forged_token_for_a_real_callback_is_a_404(target: Target, mac: str) -> None:
    run_id, position, real = target.token.split(".")
    if mac == real:
        return
    event = api_event("POST", f"/callbacks/{run_id}.{position}.{mac}", {"result": 1}, caller=None)
    assert refused(target, event, 404)["type"] == "CallbackNotFound"


REJECTION_BODIES = st.one_of(
    # not an object (lists of objects included: Powertools once took the first item)
    JSON.filter(lambda v: not isinstance(v, dict | None)),
    st.dictionaries(  # unknown keys
        TEXT.filter(lambda k: k not in ("type", "message")), JSON, min_size=1, max_size=3
    ),
    st.builds(  # fields of the wrong type or size
        lambda t, m: {"type": t, "message": m},
        st.one_of(st.just(""), st.integers(), st.text(min_size=201, max_size=220)),
        TEXT,
    ),
    st.builds(
        lambda m: {"type": "Rejected", "message": m},
        st.one_of(st.integers(), st.lists(TEXT), st.text(min_size=10_001, max_size=10_010)),
    ),
)


@FUZZ
@given(body=REJECTION_BODIES)
@example(body={"bogus": 1})
@example(body=[1, {"type": "No"}])
def test_a_rejection_of_the_wrong_shape_names_the_field(target: Target, body: Any) -> None:
    event = api_event("POST", f"/callbacks/{target.token}/fail", body, caller=None)
    error = refused(target, event, 422)
    assert isinstance(error.get("field"), str) and error["field"], error
    if isinstance(body, dict) and error["field"] != "body":
        assert error["field"].split(".")[0] in body, error  # the offending key, as sent


def test_a_callback_result_that_is_not_json_is_a_422_naming_it(target: Target) -> None:
    event = api_event("POST", f"/callbacks/{target.token}", raw="1e999", caller=None)
    assert refused(target, event, 422)["field"] == "result"


# --- signals ------------------------------------------------------------------------------

BAD_SIGNAL_NAMES = st.one_of(
    st.text(" \t", min_size=1, max_size=4),  # blank
    st.text(st.characters(codec="utf-8"), min_size=129, max_size=200),  # too long
    st.builds(  # a C0 control character somewhere
        lambda a, c, b: a + c + b, TEXT, CONTROL, TEXT
    ).filter(lambda n: 0 < len(n) <= 128 and n.strip() != ""),
)


@FUZZ
@given(name=BAD_SIGNAL_NAMES, payload=JSON)
@example(name="go\n", payload=1)
@example(name="g" * 129, payload=None)
def test_a_bad_signal_name_is_a_422_naming_it(target: Target, name: str, payload: Any) -> None:
    path = f"/runs/{target.signalled}/signals/{quote(name, safe='')}"
    error = refused(target, api_event("POST", path, payload))
    if error["type"] == "NotFound":
        return  # "." and ".." segments, or a path API Gateway would not route
    assert (error["type"], error["field"]) == ("InvalidInput", "name")


@FUZZ
@given(name=st.text(st.characters(codec="utf-8", min_codepoint=32), min_size=1, max_size=128))
def test_a_signal_to_a_finished_run_is_a_409_and_to_no_run_a_404(target: Target, name: str) -> None:
    if not name.strip():
        return
    encoded = quote(name, safe="")
    finished = api_event("POST", f"/runs/{target.finished}/signals/{encoded}", {"a": 1})
    assert refused(target, finished)["type"] in ("InvalidState", "InvalidInput", "NotFound")
    missing = api_event("POST", f"/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/signals/{encoded}", 1)
    assert refused(target, missing)["type"] in ("RunNotFound", "InvalidInput", "NotFound")


@FUZZ
@given(run_id=st.text(st.characters(codec="utf-8"), min_size=1, max_size=60))
def test_a_signal_to_a_malformed_run_id_is_a_404(target: Target, run_id: str) -> None:
    path = f"/runs/{quote(run_id, safe='')}/signals/go"
    assert refused(target, api_event("POST", path, 1), 404)["type"] in ("RunNotFound", "NotFound")


def test_a_signal_payload_that_is_not_json_is_a_422_naming_it(target: Target) -> None:
    event = api_event("POST", f"/runs/{target.signalled}/signals/go", raw="[1e999]")
    assert refused(target, event, 422)["field"] == "payload"


# --- bugs this suite found, kept fixed -------------------------------------------------------


# Was a bug: Powertools took the first item of a JSON array for the object; the preflight
# now refuses non-object bodies on these routes.
@pytest.mark.parametrize(
    ("route", "body"),
    [("rejection", [{"type": "No"}, {"bogus": 1}]), ("cancel", [{"reason": "by a list"}])],
)
def test_a_list_body_is_refused_where_an_object_is_expected(
    target: Target, route: str, body: Any
) -> None:
    own = build_target()  # its own tables: were it accepted, the shared ones would change
    path = f"/callbacks/{own.token}/fail" if route == "rejection" else f"/runs/{own.waiting}/cancel"
    before = own.stack.snapshot()
    reply = own.call(api_event("POST", path, body))
    assert reply.status == 422, reply.body
    assert own.stack.snapshot() == before
