"""The HTTP API behind API Gateway (REST proxy events).

The packaged entry point, ``durable.handlers.api``: named here so this repo's template
reads like a project made by ``durable init``.
"""

from durable.handlers.api import handler

__all__ = ["handler"]
