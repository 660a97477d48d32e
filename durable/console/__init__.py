"""The web console: a small static page that is a client of the management API.

It is served beside the API, from the same origin, so its calls need no CORS: by
``durable dev`` at ``/console/``, and for a deployed stack by ``durable console
--endpoint URL``, a proxy on 127.0.0.1 that signs each call with the caller's AWS
credentials (``durable.console.proxy``). The assets are plain HTML, CSS and JavaScript
committed here and shipped in the wheel: nothing to build on the user's machine.
"""

from __future__ import annotations

import html
from importlib import resources

PREFIX = "/console/"
_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# The page may load only its own script and style and call only its own origin.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def asset(path: str, *, token: str = "", where: str = "") -> tuple[str, bytes] | None:
    """The content type and bytes of the console's file at ``path`` (``/console/…``), or
    None. The page carries ``token`` (the proxy's per-process secret, sent back on every
    API call) and a label of the stack it shows, both escaped."""
    name = path.split("?", 1)[0].removeprefix(PREFIX.rstrip("/")).strip("/") or "index.html"
    if name not in _TYPES:
        return None
    data = resources.files(__package__).joinpath("assets", name).read_bytes()
    if name == "index.html":
        text = data.decode()
        text = text.replace("{{TOKEN}}", html.escape(token, quote=True))
        text = text.replace("{{WHERE}}", html.escape(where))
        data = text.encode()
    return _TYPES[name], data


def is_console_path(path: str) -> bool:
    return path == PREFIX.rstrip("/") or path.startswith(PREFIX)


def allowed_host(host: str | None, port: int) -> bool:
    """A request names this server of ours on 127.0.0.1 in ``Host`` (``durable dev``'s and
    the console proxy's rule, ``durable.local.front_door``): a rebound name is refused."""
    return host in (f"127.0.0.1:{port}", f"localhost:{port}")
