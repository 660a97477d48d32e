"""Composition: settings + app + ports -> the engine and what the handlers need.

``Services`` is the set of ports a deployment provides: on AWS they come from
``durable.adapters.aws_services``; tests pass memory, moto or DynamoDB Local ones. Nothing
here reads the environment or imports a vendor SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from durable.core.clock import Clock, SystemClock
from durable.core.ports import EffectStore, Invoker, Ledger, NoTimers, PayloadStore, Timers
from durable.core.secrets import KeyService
from durable.core.tokens import parse_secret
from durable.core.usage import Meter
from durable.engine.determinism import WarningGuard
from durable.engine.engine import Engine
from durable.engine.registry import App
from durable.errors import InvalidInput
from durable.settings import Settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import (
        BasePersistenceLayer,
        IdempotencyConfig,
    )

    from durable.api.hooks import NonceStore
    from durable.api.served import ServedVersions
    from durable.api.service import ApiService
    from durable.engine.schedules import RecurringSchedules

SecretSource = Callable[[str], str]
MetricSink = Callable[[str], None]


def no_metric(name: str) -> None:
    return None


def no_secrets(name: str) -> str:
    raise InvalidInput(f"no secret store is configured to read {name!r}", field="secret")


@dataclass
class Services:
    ledger: Ledger
    effects: EffectStore
    invoker: Invoker
    nonces: NonceStore
    timers: Timers = field(default_factory=NoTimers)
    secrets: SecretSource = no_secrets
    clock: Clock = field(default_factory=SystemClock)
    # Builds Powertools' persistence for the API's duplicate-delivery guard; None: no
    # guard (the engine's derived run id still deduplicates keyed starts).
    idempotency: Callable[[], BasePersistenceLayer] | None = None
    # Seals secret-typed values (``durable.core.secrets``); None: they are refused.
    keys: KeyService | None = None
    # Asks the workers which workflow versions they serve (``durable.api.served``); None:
    # the API starts whatever its own code registers.
    served: Callable[[], dict[str, list[int]]] | None = None
    # Counts what each invocation uses (request units, time) for the run's bill
    # (``durable.core.usage``); None: runs record no usage.
    meter: Meter | None = None
    # The stack's recurring schedules (``durable.engine.schedules``); None: schedules are
    # declared in code but nothing here can create or change them.
    schedules: RecurringSchedules | None = None
    # Keeps values too large for a ledger item (``durable.core.claim_check``); None: they fail
    # as PayloadTooLarge.
    payloads: PayloadStore | None = None
    # Makes now what every event of a function uses (the store's client), for a handler
    # composed during Lambda's INIT (``durable.aws``: provisioned concurrency, SnapStart).
    prepare: Callable[[], None] | None = None
    # Forgets what environments restored from one snapshot must not share (open
    # connections); ``durable.aws.after_restore`` calls it. None: nothing to forget.
    after_restore: Callable[[], None] | None = None


def load_app(reference: str) -> App:
    """Import ``package.module:attribute`` and check it is a ``durable.App``."""
    import importlib

    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InvalidInput(
            f"DURABLE_APP={reference!r}: cannot import {module_name!r} ({e}); package the "
            "module with the function",
            field="DURABLE_APP",
        ) from e
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        raise InvalidInput(
            f"DURABLE_APP={reference!r}: {attribute!r} is not a durable.App in {module_name}",
            field="DURABLE_APP",
        )
    return app


class Runtime:
    """Everything one Lambda container needs, built once on its first event."""

    def __init__(
        self,
        settings: Settings,
        app: App,
        services: Services,
        *,
        callback_secret: bytes | None = None,
        callback_verify_only_secrets: tuple[bytes, ...] = (),
        metric: MetricSink = no_metric,
    ) -> None:
        self.settings = settings
        self.metric = metric
        self.app = app
        self.services = services
        self.clock = services.clock
        self.engine = Engine(
            app,
            services.ledger,
            services.invoker,
            services.effects,
            clock=services.clock,
            config=replace(
                settings.engine_config(callback_secret),
                callback_verify_only_secrets=callback_verify_only_secrets,
            ),
            timers=services.timers,
            keys=services.keys,
            payloads=services.payloads,
            guard=WarningGuard() if settings.determinism_warnings else None,
        )
        self.idempotency_config: IdempotencyConfig | None = None

    @classmethod
    def build(
        cls, settings: Settings, app: App, services: Services, metric: MetricSink = no_metric
    ) -> Runtime:
        """Fetch the callback keys (they mint and check tokens), then compose."""
        secret: bytes | None = None
        previous: tuple[bytes, ...] = ()
        if settings.callback_secret_name:
            secret, previous = parse_secret(services.secrets(settings.callback_secret_name))
        return cls(
            settings,
            app,
            services,
            callback_secret=secret,
            callback_verify_only_secrets=previous,
            metric=metric,
        )

    def webhook_secret(self) -> str | None:
        name = self.settings.webhook_secret_name
        return self.services.secrets(name) if name else None

    @cached_property
    def api(self) -> ApiService:
        from durable.api.service import ApiService, unguarded

        guard: Any = unguarded
        if self.services.idempotency is not None:
            from durable.api.idempotency import powertools_guard

            guard, self.idempotency_config = powertools_guard(
                self.services.idempotency(),
                expires_after_seconds=self.settings.retention_seconds,
            )
        return ApiService(
            self.engine,
            clock=self.clock,
            nonces=self.services.nonces,
            webhook_secret=self.webhook_secret,
            guard=guard,
            webhook_tolerance_seconds=self.settings.webhook_tolerance_seconds,
            webhook_shared_secret=self.settings.webhook_shared_secret,
            metric=self.metric,
            served=self._served(),
            prices=self.settings.price_table(),
            schedules=self.services.schedules,
        )

    def _served(self) -> ServedVersions | None:
        from durable.api.served import ServedVersions

        seconds = self.settings.served_check_seconds
        if self.services.served is None or seconds == 0:
            return None
        return ServedVersions(self.services.served, ttl=seconds, metric=self.metric)

    @cached_property
    def resolver(self) -> Any:
        from durable.api.routes import build_resolver

        return build_resolver(lambda: self.api)
