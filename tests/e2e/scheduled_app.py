"""A scheduled workflow for the dev stack's schedule test."""

from __future__ import annotations

from durable import App, Context

app = App()


@app.step
def stamp(note: str) -> str:
    return note


@app.workflow(name="tick", schedule="rate(1 minute)")
def tick(ctx: Context) -> str:
    return stamp("tick")
