"""examples/async_fetch.py against a real HTTP server on 127.0.0.1: async steps open
sockets on the workflow's loop, concurrently, and a 503 is retried after its backoff."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from durable.testing import LocalRunner
from examples import async_fetch

PRICES = {"/acme": 12.5, "/globex": 9.75, "/initech": 11.0}


class Vendors(BaseHTTPRequestHandler):
    failed: set[str] = set()  # paths that already answered 503 once
    open_now = 0
    most_at_once = 0
    lock = threading.Lock()

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.open_now += 1
            cls.most_at_once = max(cls.most_at_once, cls.open_now)
        try:
            time.sleep(0.2)  # long enough for the other requests to arrive meanwhile
            if self.path == "/globex" and self.path not in cls.failed:
                cls.failed.add(self.path)
                self.send_response(503)
                self.end_headers()
                return
            body = json.dumps({"vendor": self.path[1:], "price": PRICES[self.path]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        finally:
            with cls.lock:
                cls.open_now -= 1

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def vendors() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vendors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_async_example_asks_every_vendor_at_once_and_retries_a_503(vendors: str) -> None:
    """GIVEN three vendors, one answering 503 once
    WHEN the example's workflow gathers its three async steps
    THEN the requests were open at the same time, the 503 was retried after its backoff
    (two attempts on that step's one record), and the cheapest quote wins."""
    runner = LocalRunner(async_fetch.app)
    urls = [f"{vendors}{path}" for path in PRICES]
    run = runner.start("best-quote", urls)
    runner.run_until_idle()
    assert Vendors.most_at_once == 3
    runner.advance(timedelta(seconds=5))
    assert runner.result(run.run_id) == {"vendor": "globex", "price": 9.75, "asked": 3}
    steps = runner.history(run.run_id)
    assert [(s.position, s.name, s.attempt) for s in steps] == [
        ("0001", "fetch_quote", 1),
        ("0002", "fetch_quote", 2),
        ("0003", "fetch_quote", 1),
    ]
