"""The composition root: the one place that reads environment variables.

Handlers take their settings from here; everything else receives a ``Settings`` value.
``settings()`` is called by each handler on its first event (never at import), and the
workflows are imported from ``DURABLE_APP`` then too.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from durable.settings import Settings


# How Lambda initializes this environment (``AWS_LAMBDA_INITIALIZATION_TYPE``, set by
# Lambda, not a setting): "on-demand" while an event waits for it; these two before any
# event exists, so the time spent composing there is nobody's latency.
PREPARED_INITIALIZATIONS = frozenset({"provisioned-concurrency", "snap-start"})


def composes_at_init() -> bool:
    """Whether a handler should compose now, during INIT (``durable.aws``)."""
    return os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE", "") in PREPARED_INITIALIZATIONS


@cache
def settings() -> Settings:
    from durable.settings import Settings

    return Settings.from_env(os.environ)
