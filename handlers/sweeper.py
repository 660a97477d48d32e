"""The sweeper, scheduled every minute: wakes runs whose trigger was lost.

The packaged entry point, ``durable.handlers.sweeper``: named here so this repo's template
reads like a project made by ``durable init``.
"""

from durable.handlers.sweeper import handler

__all__ = ["handler"]
