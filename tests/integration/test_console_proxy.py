"""``durable console --endpoint``'s proxy: it serves the page, forwards the page's calls
signed with the developer's credentials, and refuses everything else.

The deployed API is stood in for by a recording HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from durable.console.proxy import TOKEN_HEADER, ConsoleProxy

pytestmark = pytest.mark.integration


class Upstream:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                upstream.seen.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": body,
                    }
                )
                status = 404 if self.path.startswith("/prod/runs/missing") else 200
                answer = json.dumps({"ok": status == 200, "path": self.path}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "3")
                self.send_header("Set-Cookie", "session=leak")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = _handle

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/prod"
        threading.Thread(target=self.http.serve_forever, args=(0.1,), daemon=True).start()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.http.shutdown()
    server.http.server_close()


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[ConsoleProxy]:
    running = ConsoleProxy(upstream.url, region="eu-west-1")
    running.start()
    yield running
    running.stop()


def send(
    proxy: ConsoleProxy,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{proxy.port}{path}", data=data, method=method, headers=headers or {}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def test_the_page_carries_this_proxys_token(proxy: ConsoleProxy) -> None:
    status, headers, body = send(proxy, "GET", "/console/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert f'name="durable-token" content="{proxy.token}"' in body.decode()
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    status, headers, _ = send(proxy, "GET", "/")
    assert status == 200  # urllib followed the redirect to the page


def test_a_call_from_the_page_is_forwarded_signed(
    proxy: ConsoleProxy, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCONSOLETEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    status, headers, body = send(
        proxy,
        "POST",
        "/runs/R1/signals/paid?x=1",
        {"amount": 5},
        {TOKEN_HEADER: proxy.token, "Idempotency-Key": "k-1", "Cookie": "mine=1"},
    )
    assert status == 200 and json.loads(body) == {
        "ok": True,
        "path": "/prod/runs/R1/signals/paid?x=1",
    }
    assert headers["Retry-After"] == "3" and "Set-Cookie" not in headers
    (seen,) = upstream.seen
    assert seen["method"] == "POST" and json.loads(seen["body"]) == {"amount": 5}
    sent = seen["headers"]
    assert sent["Idempotency-Key"] == "k-1"
    assert TOKEN_HEADER not in sent and "Cookie" not in sent  # only what the API reads
    assert re.match(
        r"AWS4-HMAC-SHA256 Credential=AKIDCONSOLETEST/\d{8}/eu-west-1/execute-api/aws4_request, "
        r"SignedHeaders=[a-z0-9;-]*idempotency-key[a-z0-9;-]*, Signature=[0-9a-f]{64}$",
        sent["Authorization"],
    )
    assert "X-Amz-Date" in sent


def test_an_api_error_comes_back_as_the_api_said_it(proxy: ConsoleProxy) -> None:
    status, _, body = send(proxy, "GET", "/runs/missing", headers={TOKEN_HEADER: proxy.token})
    assert status == 404 and json.loads(body)["ok"] is False


@pytest.mark.parametrize("token", [None, "", "not-the-token"])
def test_a_call_without_the_pages_token_is_refused_and_not_forwarded(
    proxy: ConsoleProxy, upstream: Upstream, token: str | None
) -> None:
    """A cross-site form post to the proxy (it would be signed as the developer)."""
    headers = {"Content-Type": "text/plain"} | ({TOKEN_HEADER: token} if token is not None else {})
    status, _, body = send(proxy, "POST", "/runs/R1/cancel", {"reason": "x"}, headers)
    assert status == 403 and json.loads(body)["error"]["type"] == "NotTheConsole"
    assert upstream.seen == []


def test_a_request_naming_another_host_is_refused(proxy: ConsoleProxy, upstream: Upstream) -> None:
    """DNS rebinding: a page from evil.example resolved to 127.0.0.1 is same-origin with
    itself, not with the proxy; its requests carry its own name in Host."""
    for path in ("/console/", "/runs/R1"):
        status, _, body = send(
            proxy, "GET", path, headers={"Host": "evil.example", TOKEN_HEADER: proxy.token}
        )
        assert status == 403 and json.loads(body)["error"]["type"] == "WrongHost"
    assert upstream.seen == []
    status, _, _ = send(proxy, "GET", "/console/", headers={"Host": f"localhost:{proxy.port}"})
    assert status == 200


def test_missing_credentials_are_said_not_sent_unsigned(
    proxy: ConsoleProxy, upstream: Upstream, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    status, _, body = send(proxy, "GET", "/runs/R1", headers={TOKEN_HEADER: proxy.token})
    assert status == 401 and "credentials" in json.loads(body)["error"]["message"]
    assert upstream.seen == []


def test_an_unreachable_api_is_a_502_that_names_it() -> None:
    gone = ConsoleProxy("http://127.0.0.1:9/prod", sign=False)
    gone.start()
    try:
        status, _, body = send(gone, "GET", "/workflows", headers={TOKEN_HEADER: gone.token})
    finally:
        gone.stop()
    assert (
        status == 502
        and "cannot reach http://127.0.0.1:9/prod" in json.loads(body)["error"]["message"]
    )


def test_signing_is_for_aws_endpoints_or_a_given_region() -> None:
    api = "https://abc123.execute-api.eu-central-1.amazonaws.com/prod"
    assert ConsoleProxy(api).sign
    assert not ConsoleProxy(api, sign=False).sign
    assert not ConsoleProxy("http://127.0.0.1:8787").sign
    assert ConsoleProxy("https://workflows.example.com", region="us-east-1").sign  # custom domain
