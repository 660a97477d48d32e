"""Start only what the workers can run: the API asks the worker alias what it serves.

During a deploy the API and the workers run different code for a while (CloudFormation
updates the functions one by one; an alias shift takes seconds to minutes). An API on the
new code would start runs of a version the old workers do not know, and an API left on
the old code would start a version the new workers dropped. The worker defers such a run
instead of failing it (``Endings.defer``), so nothing is lost either way; but a start the
API *knows* cannot run yet is refused up front, with 503 and Retry-After, and nothing is
written: the caller retries once the deploy has finished.

The answer (``{"workflow": [versions]}``) comes from a ``describe`` control event sent to
the worker alias (``durable.ops.deploy_gate``), kept ``ttl`` seconds. A refusal asks again
first, at most every ``recheck`` seconds, so a finished deploy is seen at once. When
the workers cannot be asked, the API starts the run (and says so in a metric): refusing
every start because of a describe failure would turn a small fault into an outage, and
the worker's deferral still covers the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from durable.api.errors import HttpError

log = logging.getLogger("durable.api")

Describe = Callable[[], dict[str, list[int]]]
# A client retrying a refused start waits this long: about one alias shift.
RETRY_AFTER_SECONDS = 30


class ServedVersions:
    def __init__(
        self,
        describe: Describe,
        *,
        ttl: float = 30.0,
        recheck: float = 5.0,
        now: Callable[[], float] = time.monotonic,
        metric: Callable[[str], None] = lambda name: None,
    ) -> None:
        self.describe = describe
        self.ttl = ttl
        self.recheck = recheck
        self.now = now
        self.metric = metric
        self._table: dict[str, list[int]] | None = None
        self._asked_at: float | None = None

    def refuse_unserved(self, workflow: str, version: int) -> None:
        """Raise 503 when the workers do not serve ``workflow`` at ``version``."""
        table = self._current(max_age=self.ttl)
        if table is None or version in table.get(workflow, ()):
            return
        table = self._current(max_age=self.recheck)  # the deploy may have just finished
        if table is None or version in table.get(workflow, ()):
            return
        self.metric("StartsRefusedVersionNotServed")
        versions = table.get(workflow)
        serving = (
            f"they serve version(s) {', '.join(map(str, versions))}"
            if versions
            else "they serve no version of it"
        )
        raise HttpError(
            503,
            "VersionNotServed",
            f"workflow {workflow!r} version {version} is not served by the workers ({serving}): "
            f"a deploy is in progress; nothing was started, try again in "
            f"{RETRY_AFTER_SECONDS} s",
            field="workflow",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def _current(self, max_age: float) -> dict[str, list[int]] | None:
        at = self.now()
        if self._asked_at is not None and at - self._asked_at < max_age:
            return self._table
        self._asked_at = at
        try:
            self._table = self.describe()
        except Exception as e:
            # Not known: start (the worker defers what it cannot run). Said once per ask.
            log.warning("could not ask the workers what they serve: %s", e)
            self.metric("ServedVersionsUnknown")
            self._table = None
        return self._table
