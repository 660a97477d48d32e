"""An Idempotency-Key holding a live callback token is refused with a 422 naming the header,
and nothing is written (issue 44, finding 3): a key is stored in clear (it derives its
run's id), so a token in one would be stored where no scrub reaches it."""

from __future__ import annotations

import pytest

from durable import cli
from durable.core.tokens import make_token
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event

TOKEN = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003", "n1")
NOTICE = "holds a callback token"


def test_a_start_s_idempotency_key_holding_a_token_is_a_422(stack: Stack) -> None:
    before = stack.snapshot()
    for key in (TOKEN, f"order-{TOKEN}"):
        headers = {"Idempotency-Key": key}
        reply = stack.call(api_event("POST", "/workflows/signalled/runs", headers=headers))
        assert reply.status == 422, reply.body
        assert reply.error["field"] == "Idempotency-Key"
        assert NOTICE in reply.error["message"] and TOKEN not in reply.error["message"]
    assert stack.snapshot() == before


def test_a_signal_s_idempotency_key_or_name_holding_a_token_is_a_422(stack: Stack) -> None:
    started = stack.call(api_event("POST", "/workflows/signalled/runs"))
    assert started.status in (201, 202), started.body
    run_id = started.body["run_id"]
    stack.drain()
    before = stack.snapshot()
    headers = {"Idempotency-Key": TOKEN}
    keyed = stack.call(api_event("POST", f"/runs/{run_id}/signals/go", 1, headers=headers))
    assert keyed.status == 422, keyed.body
    assert keyed.error["field"] == "Idempotency-Key" and NOTICE in keyed.error["message"]
    named = stack.call(api_event("POST", f"/runs/{run_id}/signals/{TOKEN}", 1))
    assert named.status == 422, named.body
    assert named.error["field"] == "name" and NOTICE in named.error["message"]
    assert stack.snapshot() == before


def test_the_cli_refuses_a_token_key_before_sending_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--endpoint", "http://127.0.0.1:1"]
    assert cli.main([*base, "start", "signalled", "--idempotency-key", TOKEN]) != 0
    err = capsys.readouterr().err
    assert "--idempotency-key" in err and NOTICE in err and TOKEN not in err
