"""The purge, fed by the ledger table's stream: deletes what an expired run left behind."""

from durable.aws import purge_handler
from durable.handlers import bootstrap

# The workflows come from DURABLE_APP (module:attribute), imported on the first event,
# or during INIT with provisioned concurrency or SnapStart.
handler = purge_handler(None, bootstrap.settings, compose_at_init=bootstrap.composes_at_init())
