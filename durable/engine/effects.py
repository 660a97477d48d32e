"""``StepContext.effect``: side effects keyed in the idempotency table (seed 000).

The key is persisted before the call and the external reference after it, so a retry,
whenever it comes, either gets the reference back or reconciles. The record lives as long
as any retry of its run could come: the run's lifetime bound plus the retention period,
never a fixed window (seed 002's 24-hour Redis TTL is the failure this avoids). The bound
holds because the engine enforces it: no wait may end past it, a run woken past it fails,
and a run past it cannot be retried. Expiry is judged on the engine's clock, the one the
expiration was computed on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from durable.core import serde
from durable.core.config import EngineConfig
from durable.core.model import parse_time
from durable.core.ports import EffectStore
from durable.core.token_shape import scrub_text
from durable.core.tokens import refuse_token

if TYPE_CHECKING:
    from durable.core.clock import Clock
    from durable.core.model import RunRecord

COMPLETED = "COMPLETED"


class EffectRun(Protocol):
    """What an effect reads of the run's execution (``durable.engine.execution.Execution``)."""

    @property
    def run(self) -> RunRecord: ...

    @property
    def clock(self) -> Clock: ...

    def check_lease_alive(self) -> None: ...

    def redact(self, text: str) -> str: ...


class EffectStep(Protocol):
    """The step an effect runs in (``durable.engine.steps.StepRun``), as an effect uses it."""

    @property
    def x(self) -> EffectRun: ...

    @property
    def name(self) -> str: ...

    @property
    def idempotency_key(self) -> str: ...

    @property
    def effect_actions(self) -> set[str]: ...


class Effects:
    def __init__(self, store: EffectStore, config: EngineConfig) -> None:
        self.store = store
        self.config = config

    def expiration_for(self, created_at: str) -> int:
        horizon = parse_time(created_at) + self.config.max_run_lifetime + self.config.retention
        return int(horizon.timestamp())

    def perform(
        self,
        step: EffectStep,
        action: str,
        call: Callable[[str], Any],
        reconcile: Callable[[str], Any] | None,
    ) -> Any:
        if not action or not isinstance(action, str):
            raise ValueError("effect(action, ...) needs a non-empty action name, e.g. 'charge'")
        # The action is part of the effect's key, stored in clear in the idempotency table.
        refuse_token(action, "action", "effect action", "the step's input")
        if action in step.effect_actions:
            # The key is the step's and the action's: a second effect under one action
            # would be taken for the first and silently return its reference.
            raise ValueError(
                f"effect action {action!r} already ran in this attempt of step "
                f"{step.name!r}; give each effect its own action name, e.g. "
                f"effect(f'{action}:{{recipient}}', ...)"
            )
        step.effect_actions.add(action)
        key = f"effect:{step.idempotency_key}:{action}"
        expiration = self.expiration_for(step.x.run.created_at)
        now = int(step.x.clock.now().timestamp())
        existing = self.store.begin(key, expiration, now=now)
        if existing is not None and existing.status == COMPLETED:
            return serde.decode(existing.reference)
        # A worker that stalled since it vouched for its lease (perhaps inside ``begin``)
        # must not call now: a new owner may already have reconciled and called.
        step.x.check_lease_alive()
        if existing is not None and reconcile is not None:
            # An earlier attempt persisted the key and died before storing the result:
            # the effect may or may not have happened; the caller's lookup decides.
            found = reconcile(key)
            if found is not None:
                return self._store(step, key, found, expiration)
        return self._store(step, key, call(key), expiration)

    def _store(self, step: EffectStep, key: str, reference: Any, expiration: int) -> Any:
        try:
            text = serde.dumps_plain(reference)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"effect call must return a plain-JSON reference (an id or a dict): {e}"
            ) from e
        # No token is stored, this run's or any other's: a call may echo a token it was
        # given by another run (a mail API answering with the mail it sent). Every text of
        # a token's shape goes, then this run's own tokens. What the attempt gets back is
        # what a later attempt will read: redacted alike.
        text = step.x.redact(scrub_text(text))
        self.store.complete(key, text, expiration)
        return serde.decode(text)
