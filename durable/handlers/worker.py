"""The worker: drives runs (`{run_id, reason, hop}` from hand-offs, timers, the sweeper)."""

from durable.aws import worker_handler
from durable.handlers import bootstrap

# The workflows come from DURABLE_APP (module:attribute), imported on the first event,
# or during INIT with provisioned concurrency or SnapStart.
handler = worker_handler(None, bootstrap.settings, compose_at_init=bootstrap.composes_at_init())
