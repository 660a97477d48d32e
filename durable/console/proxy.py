"""``durable console --endpoint URL``: the web console for a deployed stack.

A browser cannot sign requests with the developer's AWS credentials, and the deployed
API's operator routes are IAM-authorized. So this serves the console's page on
127.0.0.1 and forwards the page's API calls to the deployed API, each one SigV4-signed
with the credentials of whoever started the proxy (``durable.adapters.sigv4``).

A proxy that signs whatever reaches it would let any web page the developer visits act
on their stack (a cross-site form post to 127.0.0.1). So it forwards only requests that

* name this proxy in ``Host`` (``127.0.0.1:<port>`` or ``localhost:<port>``): a page
  served from another name that resolves to 127.0.0.1 (DNS rebinding) is refused; and
* carry ``X-Durable-Console`` with the secret this process made at start and wrote into
  the page it served. Another site cannot read that page (same-origin policy), and a
  custom header on a cross-site request needs a CORS preflight this proxy never grants.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from durable.adapters.sigv4 import NoCredentials, is_aws_api, signed_headers
from durable.console import HEADERS, PREFIX, allowed_host, asset, is_console_path

TOKEN_HEADER = "X-Durable-Console"
# Headers of the page's calls the API reads: the body's type and a signal's retry key.
FORWARDED = ("Content-Type", "Idempotency-Key")
TIMEOUT = 30.0


class ConsoleProxy:
    """The console's page and a signing proxy to ``endpoint``, on 127.0.0.1:``port``."""

    def __init__(
        self, endpoint: str, *, port: int = 0, sign: bool = True, region: str | None = None
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        # An execute-api URL names its region; a custom domain name needs it given.
        self.region = region
        self.sign = sign and (region is not None or is_aws_api(self.endpoint))
        self.token = secrets.token_urlsafe(32)
        self.port = port
        self._http: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PREFIX}"

    def start(self) -> None:
        """Listen (an ``OSError`` if the port is taken) and serve on a daemon thread."""
        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._http.daemon_threads = True
        self.port = int(self._http.server_address[1])
        threading.Thread(
            target=self._http.serve_forever, args=(0.1,), name="console", daemon=True
        ).start()

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()

    def allowed_host(self, host: str | None) -> bool:
        return allowed_host(host, self.port)

    def forward(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """The deployed API's answer to one call of the page (status, headers, body)."""
        url = self.endpoint + path
        wanted = {name.lower(): name for name in FORWARDED}
        sent = {wanted[k.lower()]: v for k, v in headers.items() if k.lower() in wanted}
        sent.setdefault("Content-Type", "application/json")
        if self.sign:
            try:
                sent = signed_headers(url, method, body or None, sent, region=self.region)
            except NoCredentials as e:
                return _error(401, "NoCredentials", str(e))
        request = urllib.request.Request(url, data=body or None, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                return response.status, _kept(response.headers), response.read()
        except urllib.error.HTTPError as e:
            return e.code, _kept(e.headers), e.read()
        except (urllib.error.URLError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            return _error(502, "Unreachable", f"cannot reach {self.endpoint} ({reason})")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the developer's terminal shows the console's URL, not every poll

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if not proxy.allowed_host(self.headers.get("Host")):
                    refused = _error(403, "WrongHost", f"open the console at {proxy.url}")
                    return self._reply(*refused)
                if self.path == "/" and self.command == "GET":
                    return self._reply(302, {"Location": PREFIX}, b"")
                if is_console_path(self.path) and self.command == "GET":
                    found = asset(self.path, token=proxy.token, where=proxy.endpoint)
                    if found is None:
                        return self._reply(*_error(404, "NotFound", f"no console file {self.path}"))
                    content_type, data = found
                    return self._reply(200, {"Content-Type": content_type, **HEADERS}, data)
                if not self.path.startswith("/"):  # an absolute-form target: not a page call
                    return self._reply(*_error(400, "BadPath", "a path is expected"))
                given = self.headers.get(TOKEN_HEADER) or ""
                if not hmac.compare_digest(given.encode(), proxy.token.encode()):
                    return self._reply(
                        *_error(403, "NotTheConsole", "this proxy answers its console page only")
                    )
                headers = dict(self.headers.items())
                self._reply(*proxy.forward(self.command, self.path, body, headers))

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        return Handler


def _kept(headers: Any) -> dict[str, str]:
    kept = {"Content-Type": headers.get("Content-Type") or "application/json"}
    if headers.get("Retry-After"):
        kept["Retry-After"] = headers["Retry-After"]
    return kept


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    return status, {"Content-Type": "application/json"}, body
