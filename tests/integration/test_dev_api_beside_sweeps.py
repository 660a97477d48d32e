"""``durable dev`` serves the API while a sweep is stuck on a store that does not answer
(issue 45, item 2): the API and the sweeper are two functions on AWS, each with its own
containers, so locally neither waits for the other (they shared one lock).

The dev server's HTTP front door is real (a request over 127.0.0.1); the API and sweeper
handlers are stand-ins, so no store is needed: the sweep blocks until the test ends.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable.local import server as dev_server
from durable.local.server import DevOptions, DevServer

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_an_api_request_is_answered_while_a_sweep_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweeping = threading.Event()
    release = threading.Event()

    def stuck_sweep(event: Any, context: Any) -> Any:
        sweeping.set()
        release.wait(60)  # a sweep whose query the store never answers
        return {}

    def api(event: Any, context: Any) -> Any:
        return {"statusCode": 200, "headers": {}, "body": json.dumps({"runs": []})}

    handlers: dict[str, Callable[[Any, Any], Any]] = {
        "durable.handlers.sweeper:handler": stuck_sweep,
        "durable.handlers.api:handler": api,
    }
    monkeypatch.setattr(dev_server, "load_handler", handlers.__getitem__)
    port = free_port()
    server = DevServer(DevOptions(app="x:app", port=port, state_dir=tmp_path, sweep_interval=0.05))
    server._start_http()
    server._serve_http()
    sweeper = threading.Thread(target=server._sweep_loop, daemon=True)
    sweeper.start()
    try:
        # GIVEN a sweep in flight that the store does not answer
        assert sweeping.wait(10)
        # WHEN a client calls the API
        began = time.monotonic()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/runs?workflow=greet", headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            status = response.status
        took = time.monotonic() - began
        print(f"answered in {took:.2f} s beside a stuck sweep")
        # THEN it is answered, not held until the sweep ends
        assert status == 200
    finally:
        server._stop.set()
        release.set()
        sweeper.join(5)
        assert server.http is not None
        server.http.shutdown()
        server.http.server_close()


def test_a_request_queued_behind_one_the_store_holds_gets_a_503_within_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = threading.Event()
    release = threading.Event()

    def api(event: Any, context: Any) -> Any:
        if event["path"] == "/runs/held":
            held.set()
            release.wait(60)  # a request whose store never answers (until its budget ends)
        return {"statusCode": 200, "headers": {}, "body": json.dumps({"runs": []})}

    handlers: dict[str, Callable[[Any, Any], Any]] = {"durable.handlers.api:handler": api}
    monkeypatch.setattr(dev_server, "load_handler", handlers.__getitem__)
    monkeypatch.setattr(dev_server, "API_QUEUE_SECONDS", 0.5)
    port = free_port()
    server = DevServer(DevOptions(app="x:app", port=port, state_dir=tmp_path))
    server._start_http()
    server._serve_http()

    def get(path: str) -> tuple[int, dict[str, str], float]:
        began = time.monotonic()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", headers={"Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), time.monotonic() - began
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), time.monotonic() - began

    first = threading.Thread(target=get, args=("/runs/held",), daemon=True)
    try:
        # GIVEN a request the store holds
        first.start()
        assert held.wait(10)
        # WHEN another request comes meanwhile
        status, headers, took = get("/runs?workflow=greet")
        print(f"queued request answered {status} in {took:.2f} s")
        # THEN it is answered 503 with Retry-After after its bounded wait, not held
        assert status == 503 and headers.get("Retry-After") == "5"
        assert took < 15  # (the held request is released only after this answer)
        # AND once the store answers again, requests are served
        release.set()
        first.join(10)
        assert get("/runs?workflow=greet")[0] == 200
    finally:
        server._stop.set()
        release.set()
        assert server.http is not None
        server.http.shutdown()
        server.http.server_close()
