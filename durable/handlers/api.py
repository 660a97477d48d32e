"""The HTTP API behind API Gateway (REST proxy events)."""

from durable.aws import api_handler
from durable.handlers import bootstrap

# The workflows come from DURABLE_APP (module:attribute), imported on the first event,
# or during INIT with provisioned concurrency or SnapStart.
handler = api_handler(None, bootstrap.settings, compose_at_init=bootstrap.composes_at_init())
