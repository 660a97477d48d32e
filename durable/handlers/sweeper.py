"""The sweeper, scheduled every minute: wakes runs whose trigger was lost."""

from durable.aws import sweeper_handler
from durable.handlers import bootstrap

# The workflows come from DURABLE_APP (module:attribute), imported on the first event,
# or during INIT with provisioned concurrency or SnapStart.
handler = sweeper_handler(None, bootstrap.settings, compose_at_init=bootstrap.composes_at_init())
