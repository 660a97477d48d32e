"""One workflow before and after a change, for ``python -m examples.deploy_demo`` and the
version-skew test (``tests/e2e/test_deploy_skew.py``); durable dev and ``durable
check-deploy`` load them by module:attribute."""

from __future__ import annotations

from durable import App, Context


def reserve(order: str) -> str:
    return f"reserved {order}"


def hold_stock(order: str) -> str:  # the unsafe change renames `reserve` to this
    return f"reserved {order}"


def ship(order: str) -> str:
    return f"shipped {order}"


def _app(*versions: int, first_step: str = "reserve") -> App:
    app = App()
    first = {"reserve": reserve, "hold_stock": hold_stock}[first_step]
    for version in versions:

        @app.workflow(name="order", version=version)
        def order(ctx: Context, order: str) -> str:
            ctx.step(first, order)
            ctx.wait_for_signal("paid")
            return ctx.step(ship, order)

    return app


old = _app(1)  # what is deployed
renamed = _app(1, first_step="hold_stock")  # unsafe: runs in flight recorded `reserve`
# The safe change: the new code as version 2 for new runs, version 1 kept for old ones.
both = App().include(_app(1)).include(_app(2, first_step="hold_stock"))
only_v2 = _app(2, first_step="hold_stock")  # unsafe: version 1 dropped, runs pinned to it
