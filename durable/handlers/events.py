"""Starts runs from EventBridge events and SQS messages."""

from durable.aws import events_handler
from durable.handlers import bootstrap

# The workflows come from DURABLE_APP (module:attribute), imported on the first event,
# or during INIT with provisioned concurrency or SnapStart.
handler = events_handler(None, bootstrap.settings, compose_at_init=bootstrap.composes_at_init())
