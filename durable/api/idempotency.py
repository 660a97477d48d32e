"""Duplicate deliveries of a keyed start, guarded with Powertools idempotency.

Two layers, on purpose:

* Powertools' record (idempotency table, key ``durable-start#<hash of workflow, key scope
  and key>``) makes a retried request get the *original response* back without touching the
  ledger, and refuses a reused key whose body differs (payload validation -> 409).
* The engine derives the run id from (workflow, key), so the conditional put of the run
  item is the dedupe that cannot fail: it still holds when two identical requests race
  (Powertools reports the second as "in progress"; it then goes straight to the engine
  and gets the same run) and after Powertools' record has expired.

Records live as long as finished runs do (the retention period), never a fixed window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from durable.api.service import StartGuard
from durable.errors import IdempotencyConflict, StorageError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import (
        BasePersistenceLayer,
        IdempotencyConfig,
    )

KEY_PREFIX = "durable-start"


def powertools_guard(
    persistence: BasePersistenceLayer, *, expires_after_seconds: int
) -> tuple[StartGuard, IdempotencyConfig]:
    """A ``StartGuard`` and its config (register each Lambda context with the config)."""
    from aws_lambda_powertools.utilities.idempotency import (
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyPersistenceLayerError,
        IdempotencyValidationError,
    )

    config = IdempotencyConfig(
        # The scope keeps a hook's keys apart from an operator's (and each hook's apart).
        event_key_jmespath="[workflow, scope, key]",
        payload_validation_jmespath="input_hash",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=expires_after_seconds,
        hash_function="sha256",
    )

    def call(*, fingerprint: dict[str, str], start: Callable[[], dict[str, Any]]) -> Any:
        return start()

    once = idempotent_function(
        call,
        data_keyword_argument="fingerprint",
        persistence_store=persistence,
        config=config,
        key_prefix=KEY_PREFIX,
    )

    def guard(fingerprint: dict[str, str], start: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = once(fingerprint=fingerprint, start=start)
        except IdempotencyValidationError as e:
            raise IdempotencyConflict(
                f"Idempotency-Key {fingerprint['key']!r} was already used with a different "
                'body; use a new key for a new run, or if_running="attach" to take the run '
                "it started while that run is still going"
            ) from e
        except IdempotencyAlreadyInProgressError:
            # The same delivery is being handled right now: the run id derived from the
            # key makes the engine return that very run.
            return start()
        except IdempotencyPersistenceLayerError as e:
            # The idempotency table is unavailable: the same answer as any storage outage
            # (503 with Retry-After), never a 500 to a sender that should simply retry.
            raise StorageError(f"the idempotency table is unavailable: {e}", retryable=True) from e
        return result

    return guard, config
