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


@cache
def settings() -> Settings:
    from durable.settings import Settings

    return Settings.from_env(os.environ)
