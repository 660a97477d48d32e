"""The workload of the chaos tier (``tests/chaos/test_chaos.py``), served by
``durable dev --app tests.chaos.chaos_workflow:app``.

One ``chaos-order`` run has every kind of wait: a step, a signal the driver sends (right
after the start, so it is usually buffered before the run asks for it), a durable sleep, a
callback the driver answers (it reads the link from the effects file, as the recipient of
a mail would), an inline map of three items and, for every tenth order, a child run. Each
wait that suspends the run costs a worker invocation; the workload keeps them few so a
few hundred runs fit a 2-core machine alongside DynamoDB Local.

Every side effect goes through ``current_step().effect`` and appends one line
``<order> TAB <action> TAB <effect key> TAB <detail>`` to the file ``DURABLE_CHAOS_EFFECTS``
names: a single ``write`` with ``O_APPEND`` lands whole, whichever worker process makes
it, so the file is an append-only record of every effect that really happened. The
reconcile function looks the key up there: an attempt that died between the effect and
its record finds it and does not repeat it. A key that appears twice is an effect that
ran twice.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable import App, Context, current_step
from durable.engine.waits import Callback

app = App()
WORKFLOW = "chaos-order"
CHILD = "chaos-child"
SIGNAL = "go"
CALLBACK = "approval"
PACKS = 3
# Virtual minutes: with the tier's time scale (60) the sleep takes 6 real seconds, past the
# 5 s an invocation waits in process: the run suspends and a durable timer wakes it (a
# shorter sleep would hold its worker meanwhile and test no timer).
SLEEP = timedelta(minutes=6)


def effects_path() -> Path:
    return Path(os.environ.get("DURABLE_CHAOS_EFFECTS", "chaos-effects.log"))


def has_child(order: int) -> bool:
    return order % 10 == 0


def expected_actions(order: int) -> set[str]:
    """The effect actions a finished run of ``order`` made, each exactly once."""
    packs = {f"pack-{i}" for i in range(PACKS)}
    return {"reserve", "link", *packs, "ship"} | ({"child"} if has_child(order) else set())


def expected_output(order: int) -> dict[str, Any]:
    return {
        "reservation": f"room-{order}",
        "signal": {"order": order},
        "approval": {"approved": order},
        "packs": [f"box-{order}-{i}" for i in range(PACKS)],
        "child": f"child-{order}" if has_child(order) else None,
        "shipment": f"shipped-{order}",
    }


def _lookup(key: str) -> str | None:
    """The reference an effect under ``key`` recorded, if it happened (its line exists)."""
    try:
        text = effects_path().read_text()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 4 and fields[2] == key:
            return fields[3] if fields[1] != "link" else "sent"
    return None


def effect(order: int, action: str, reference: str, detail: str | None = None) -> str:
    """Perform the effect ``action`` of ``order`` once: one line appended (``detail`` is
    what the line carries, ``reference`` what the step gets back)."""

    def perform(key: str) -> str:
        line = f"{order}\t{action}\t{key}\t{detail or reference}\n".encode()
        fd = os.open(effects_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return reference

    return str(current_step().effect(action, perform, reconcile=_lookup))


@app.step
def reserve(order: int) -> str:
    return effect(order, "reserve", f"room-{order}")


@app.step
def pack(order: int, item: int) -> str:
    return effect(order, f"pack-{item}", f"box-{order}-{item}")


@app.step
def ship(order: int) -> str:
    return effect(order, "ship", f"shipped-{order}")


@app.step
def make_child(order: int) -> str:
    return effect(order, "child", f"child-{order}")


def pack_branch(ctx: Context, job: list[int]) -> str:
    order, item = job
    return pack(order, item)


@app.workflow(name=CHILD)
def chaos_child(ctx: Context, order: int) -> str:
    return make_child(order)


@app.workflow(name=WORKFLOW)
def chaos_order(ctx: Context, order: int) -> dict[str, Any]:
    reservation = reserve(order)
    signal = ctx.wait_for_signal(SIGNAL, timeout=timedelta(days=1))
    ctx.sleep(SLEEP)

    def send_link(callback: Callback[Any]) -> str:
        # The link (with its token) goes into the effects file, where the driver reads it;
        # the step records "sent" (the engine redacts a token from what it stores anyway).
        return effect(order, "link", "sent", detail=callback.url)

    approval = ctx.wait_for_callback(CALLBACK, timeout=timedelta(days=1), submit=send_link)
    packs = ctx.map(pack_branch, [[order, i] for i in range(PACKS)], name="packs")
    child = ctx.run_child(chaos_child, order, id=f"child-{order}") if has_child(order) else None
    return {
        "reservation": reservation,
        "signal": signal,
        "approval": approval,
        "packs": packs.values(),
        "child": child,
        "shipment": ship(order),
    }
