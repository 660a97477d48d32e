"""An app that declares no schedule and no webhook sender: what a worker loads for it is
the engine, never the schedules' code or the senders' signature checks."""

from __future__ import annotations

from durable import App, Context

app = App()


@app.step()
def shout(text: str) -> str:
    return text.upper()


@app.workflow(name="shout")
def shout_it(ctx: Context, text: str) -> str:
    return shout(text)
