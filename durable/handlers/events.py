"""Starts runs from EventBridge events and SQS messages."""

from durable.aws import events_handler
from durable.handlers import bootstrap

# The workflows come from DURABLE_APP (module:attribute), imported on the first event.
handler = events_handler(None, bootstrap.settings)
