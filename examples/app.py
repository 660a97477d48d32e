"""Every example workflow in one app, as ``durable dev --app examples.app:app`` serves it."""

from __future__ import annotations

from durable import App
from examples import approval, data_pull, onboarding, record_import, webhooks

app = (
    App()
    .include(onboarding.app)
    .include(approval.app)
    .include(data_pull.app)
    .include(webhooks.app)
    .include(record_import.app)
)
