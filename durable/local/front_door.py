"""What a server of ours on 127.0.0.1 refuses before it serves anything.

``durable dev`` answers its API, its console and Lambda's Invoke API on 127.0.0.1, with no
credentials (the developer is every caller). Listening on loopback keeps other machines
out, not the web pages the developer visits: a page can post to 127.0.0.1 (a cross-site
``fetch(..., {mode: "no-cors"})``), or resolve a name of its own to 127.0.0.1 (DNS
rebinding) and then read the answers as same-origin. So every request must

* name this server in ``Host`` (``127.0.0.1:<port>`` or ``localhost:<port>``): a rebound
  name is refused;
* carry no ``Origin`` but this server's own (the console's page): a browser sends one on
  every cross-site request that could change something;
* send JSON when it changes something (``POST``, ``PUT``, ``PATCH``, ``DELETE``), except a
  webhook delivery (its sender's own content type; its signature is checked anyway) and
  Lambda's Invoke API (botocore's): a cross-site page can only send a form, plain text or
  multipart without a CORS preflight, which this server never grants.

The CLI (``durable start``, ``approve``...) sends JSON to ``127.0.0.1:<port>`` and passes.
The deployed console's signing proxy (``durable console --endpoint``) applies the same
``Host`` rule and a token of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

# Shared with the deployed console's proxy, which does not import durable.local.
from durable.console import allowed_host

CHANGES = ("POST", "PUT", "PATCH", "DELETE")
# Paths whose bodies are not ours to type: a provider's webhook, botocore's invocations.
OWN_CONTENT = ("/hooks/", "/2015-03-31/")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def refusal(
    method: str, path: str, headers: Mapping[str, str], port: int
) -> tuple[int, str, str, str] | None:
    """(status, error type, message, field) for a request to refuse, or None."""
    if not allowed_host(_header(headers, "host"), port):
        return (
            403,
            "WrongHost",
            f"this server answers requests to 127.0.0.1:{port} only (a page under another "
            "name that resolves here is refused)",
            "Host",
        )
    origin = _header(headers, "origin")
    if origin is not None and origin not in (
        f"http://127.0.0.1:{port}",
        f"http://localhost:{port}",
    ):
        return (
            403,
            "CrossOrigin",
            f"a request from {origin[:100]} is refused: only the console this server serves "
            "may call it from a browser",
            "Origin",
        )
    if method.upper() in CHANGES and not path.startswith(OWN_CONTENT):
        media = (_header(headers, "content-type") or "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            return (
                415,
                "UnsupportedMediaType",
                "a request that changes something must send Content-Type: application/json "
                "(the CLI and the console do)",
                "Content-Type",
            )
    return None
