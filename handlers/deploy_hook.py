"""CodeDeploy's PreTraffic hook: replays in-flight runs on the new worker version.

The packaged entry point, ``durable.handlers.deploy_hook``: named here so this repo's
template reads like a project made by ``durable init``.
"""

from durable.handlers.deploy_hook import handler

__all__ = ["handler"]
