"""An ``async def`` workflow that asks several HTTP APIs at once (docs/async.md).

Each quote is an ``async def`` step: recorded once, retried on a 429 or a 5xx, and
awaited together with ``asyncio.gather``, so the requests overlap while the ledger still
gets one record per step, at the position of its call. The HTTP client is the standard
library's (``asyncio.open_connection``) so the example needs nothing installed; with
httpx, ``fetch_quote``'s body is ``async with httpx.AsyncClient() as client: ...``.

Try it against any server answering ``{"vendor": ..., "price": ...}``::

    python -m examples.async_fetch http://127.0.0.1:8000/a http://127.0.0.1:8000/b
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from durable import App, Context, RetryableError, RetryPolicy, TerminalError

app = App()


class Quote(BaseModel):
    vendor: str
    price: float


async def http_get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET ``url`` (HTTP/1.0: the body ends with the connection) -> (status, body)."""
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname or "localhost"
    port = parts.port or (443 if tls else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    async with asyncio.timeout(timeout):  # a step's own deadline for its I/O
        reader, writer = await asyncio.open_connection(host, port, ssl=tls or None)
        try:
            request = f"GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\n\r\n"
            writer.write(request.encode())
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
            await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@app.step(retry=RetryPolicy(max_attempts=4, initial_delay=timedelta(seconds=2)))
async def fetch_quote(url: str) -> Quote:
    status, body = await http_get(url)
    if status == 429 or status >= 500:
        raise RetryableError(f"{url} answered {status}")  # backs off, then tries again
    if status >= 400:
        raise TerminalError(f"{url} answered {status}")  # no retry: the request is wrong
    return Quote.model_validate_json(body)


@app.workflow(name="best-quote")
async def best_quote(ctx: Context, urls: list[str]) -> dict[str, Any]:
    # The calls take positions 0001, 0002, ... in this order; the requests run at once.
    quotes = await asyncio.gather(*(fetch_quote(url) for url in urls))
    best = min(quotes, key=lambda q: q.price)
    ctx.logger.info("best of %d quotes: %s", len(quotes), best.vendor)
    return {"vendor": best.vendor, "price": best.price, "asked": len(quotes)}


def main(urls: list[str]) -> None:
    from durable.testing import LocalRunner

    runner = LocalRunner(app)
    run = runner.start("best-quote", urls)
    runner.run_until_idle()
    runner.advance(timedelta(minutes=1))  # past any retry's backoff (a fake clock)
    print(json.dumps(runner.result(run.run_id)))


if __name__ == "__main__":
    main(sys.argv[1:])
