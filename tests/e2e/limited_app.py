"""A workflow behind a concurrency limit per account, for the dev stack's flow-control test."""

from __future__ import annotations

from typing import Any

from durable import App, Concurrency, Context

app = App()


@app.step
def export_rows(account: str) -> str:
    return f"exported {account}"


@app.workflow(name="export", concurrency=Concurrency(1, key="account"))
def export(ctx: Context, request: dict[str, Any]) -> str:
    ctx.wait_for_signal("go")
    return export_rows(request["account"])
