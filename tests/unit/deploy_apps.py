"""Versions of one workflow, before and after a change, for the check-deploy tests (the
CLI imports them by module:attribute)."""

from __future__ import annotations

from datetime import timedelta

from durable import App, Context


def _app(second: str, *, versions: tuple[int, ...] = (1,)) -> App:
    app = App()

    def reserve(order: str) -> str:
        return f"reserved {order}"

    def charge(order: str) -> str:
        return f"charged {order}"

    def bill(order: str) -> str:
        return f"billed {order}"

    def ship(order: str) -> str:
        return f"shipped {order}"

    steps = {"charge": charge, "bill": bill}
    for version in versions:

        @app.workflow(name="order", version=version)
        def order(ctx: Context, order: str) -> str:
            ctx.step(reserve, order)
            ctx.step(steps[second], order)
            ctx.sleep(timedelta(hours=1))
            return ctx.step(ship, order)

    return app


old = _app("charge")
same = _app("charge")
renamed = _app("bill")  # the second step under another name: recorded runs diverge
only_v2 = _app("bill", versions=(2,))  # version 1 dropped
both = App().include(_app("charge")).include(_app("bill", versions=(2,)))


def _retyped() -> App:
    """The same calls, the input now an ``int``: every stored order ("o1") fails it."""
    app = App()

    def reserve(order: int) -> str:
        return f"reserved {order}"

    def charge(order: int) -> str:
        return f"charged {order}"

    def ship(order: int) -> str:
        return f"shipped {order}"

    @app.workflow(name="order", version=1)
    def order(ctx: Context, order: int) -> str:
        ctx.step(reserve, order)
        ctx.step(charge, order)
        ctx.sleep(timedelta(hours=1))
        return ctx.step(ship, order)

    return app


retyped = _retyped()  # replays the same calls, but the stored input no longer validates
