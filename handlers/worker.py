"""The worker: drives runs (hand-offs, timers, the sweeper).

The packaged entry point, ``durable.handlers.worker``: named here so this repo's template
reads like a project made by ``durable init``.
"""

from durable.handlers.worker import handler

__all__ = ["handler"]
