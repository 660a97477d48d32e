"""Starts runs from EventBridge events and SQS messages.

The packaged entry point, ``durable.handlers.events``: named here so this repo's template
reads like a project made by ``durable init``.
"""

from durable.handlers.events import handler

__all__ = ["handler"]
