"""One workflow before and after a deploy, for the version-skew test on durable dev
(``tests/e2e/test_deploy_skew.py``); durable dev imports them by module:attribute."""

from __future__ import annotations

from durable import App, Context


def _app(*versions: int) -> App:
    app = App()

    def reserve(order: str) -> str:
        return f"reserved {order}"

    def ship(order: str) -> str:
        return f"shipped {order}"

    for version in versions:

        @app.workflow(name="order", version=version)
        def order(ctx: Context, order: str) -> str:
            ctx.step(reserve, order)
            ctx.wait_for_signal("paid")
            return ctx.step(ship, order)

    return app


old = _app(1)  # what is deployed
both = _app(1, 2)  # the safe new code: version 2 for new runs, version 1 kept for old ones
only_v2 = _app(2)  # the unsafe new code: version 1 dropped while runs are pinned to it
