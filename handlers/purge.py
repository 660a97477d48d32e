"""The purge, fed by the ledger table's stream: deletes what an expired run left behind.

The packaged entry point, ``durable.handlers.purge``: named here so this repo's template
reads like a project made by ``durable init``.
"""

from durable.handlers.purge import handler

__all__ = ["handler"]
