"""Retry policies and the failure taxonomy (retryable vs terminal)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from durable.core.backoff import capped_delay
from durable.errors import (
    InvalidInput,
    NonDeterminismError,
    PayloadTooLarge,
    RetryableError,
    StorageError,
    TerminalError,
)

# AWS error codes, read by duck typing from ``err.response["Error"]["Code"]`` so this
# module never imports botocore.
RETRYABLE_AWS_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalServerError",
        "InternalServerErrorException",
        "InternalFailure",
        "InternalError",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionInProgressException",
        "TransactionConflictException",
        "PriorThrottling",
        "EC2ThrottledException",
        "LimitExceededException",
    }
)
TERMINAL_AWS_CODES = frozenset(
    {
        "ValidationException",
        "ValidationError",
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ResourceNotFoundException",
        "NoSuchKey",
        "NoSuchBucket",
        "NotFound",
        "InvalidParameterValue",
        "InvalidParameterException",
        "ConditionalCheckFailedException",
    }
)

_TRANSIENT_BUILTINS: tuple[type[BaseException], ...] = (
    TimeoutError,
    ConnectionError,
)
_TERMINAL_BUILTINS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    KeyError,
    LookupError,
    AttributeError,
    PermissionError,
    NotImplementedError,
    FileNotFoundError,
)

ErrorClass = Literal["retryable", "terminal"]

# Jitter needs randomness but not reproducibility; a private generator keeps it out of
# the determinism guard's way and away from user seeding of the global one.
_JITTER = random.Random()


def reseed_jitter() -> None:
    """A fresh seed from the OS for the jitter: environments restored from one snapshot
    (Lambda SnapStart) would otherwise draw the same delays, and retry in step."""
    _JITTER.seed()


def jitter_share() -> float:
    """A random share in [0, 1) for a jittered delay (recorded by whoever uses it)."""
    return _JITTER.random()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _aws_code(error: BaseException) -> str | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def _http_status(error: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(error, attr, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(value, int):
            return value
    value = getattr(response, "status_code", None)  # requests/httpx style
    return value if isinstance(value, int) else None


def classify(error: BaseException) -> ErrorClass:
    """Default taxonomy: transient failures retry, caller mistakes fail for good.

    Order matters: the user's explicit ``TerminalError``/``RetryableError`` wins, then
    AWS error codes, then HTTP statuses, then well-known Python exception types. An
    unknown exception is retryable: a bug then shows up as exhausted attempts with the
    error recorded, rather than a silent single failure.
    """
    if isinstance(error, TerminalError | InvalidInput | PayloadTooLarge | NonDeterminismError):
        return "terminal"
    if isinstance(error, RetryableError):
        return "retryable"
    if isinstance(error, StorageError):
        return "retryable" if error.retryable else "terminal"
    code = _aws_code(error)
    if code in RETRYABLE_AWS_CODES:
        return "retryable"
    if code in TERMINAL_AWS_CODES:
        return "terminal"
    status = _http_status(error)
    if status is not None:
        if status == 429 or status >= 500:
            return "retryable"
        if 400 <= status < 500:
            return "terminal"
    if isinstance(error, _TRANSIENT_BUILTINS):
        return "retryable"
    if isinstance(error, _TERMINAL_BUILTINS):
        return "terminal"
    return "retryable"


def error_type_name(error: BaseException) -> str:
    code = _aws_code(error)
    name = type(error).__qualname__
    return f"{name}({code})" if code else name


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how soon a failed step is tried again.

    A step gets at most ``max_attempts`` attempts in total (1: never retried). The delay
    before attempt ``n + 1`` is ``initial_delay * backoff ** (n - 1)``, capped at
    ``max_delay``; with ``jitter="full"`` a random delay between zero and that is taken,
    so many runs failing together do not retry together. A ``RetryableError`` with
    ``retry_after`` sets the delay itself (still capped).

    Which failures retry follows the default taxonomy (throttling, timeouts, connection
    errors, HTTP 429 and 5xx retry; validation, permission, not-found and other 4xx do
    not). ``retry_on`` / ``never_retry`` narrow it: when ``retry_on`` is given only those
    exception types (and ``RetryableError``) retry; ``never_retry`` types never do.
    ``retryable_errors`` narrows it the same way by type or by message: each entry is an
    exception type (``isinstance``), or a regular expression (a text or a compiled
    pattern) searched in ``str(error)``, so ``retryable_errors=(TimeoutError, r"rate
    limit|try again")`` retries those and nothing else; with both ``retry_on`` and
    ``retryable_errors``, matching either is enough. ``TerminalError`` never retries.

    ``backoff`` below 1.0 is refused: each wait would be shorter than the one before, the
    opposite of backing off from a service that is struggling. ``backoff=1.0`` waits
    ``initial_delay`` every time (a fixed delay).
    """

    max_attempts: int = 3
    initial_delay: timedelta = timedelta(seconds=1)
    backoff: float = 2.0
    max_delay: timedelta = timedelta(minutes=5)
    jitter: Literal["full", "none"] = "full"
    retry_on: tuple[type[BaseException], ...] = ()
    never_retry: tuple[type[BaseException], ...] = ()
    retryable_errors: tuple[type[BaseException] | str | re.Pattern[str], ...] = ()

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be >= 1 (1 means never retry)")
        if not _is_number(self.backoff) or not math.isfinite(self.backoff):
            raise ValueError(f"RetryPolicy.backoff must be a finite number, not {self.backoff!r}")
        if self.backoff < 1.0:
            raise ValueError(
                f"RetryPolicy.backoff must be >= 1.0, not {self.backoff}: below 1 each wait "
                "would be shorter than the last; backoff=1.0 is a fixed delay"
            )
        if isinstance(self.retryable_errors, str | re.Pattern) or not isinstance(
            self.retryable_errors, tuple | list
        ):
            raise ValueError(
                "RetryPolicy.retryable_errors takes a tuple of exception types and message "
                'patterns, e.g. retryable_errors=(TimeoutError, r"rate limit")'
            )
        for field in ("retry_on", "never_retry"):  # a list works too (kept hashable)
            value = getattr(self, field)
            if isinstance(value, list):
                object.__setattr__(self, field, tuple(value))
        matchers: list[type[BaseException] | re.Pattern[str]] = []
        for entry in self.retryable_errors:
            if (isinstance(entry, type) and issubclass(entry, BaseException)) or isinstance(
                entry, re.Pattern
            ):
                matchers.append(entry)
            elif isinstance(entry, str):
                try:
                    matchers.append(re.compile(entry))
                except re.error as e:
                    raise ValueError(
                        f"RetryPolicy.retryable_errors: {entry!r} is not a regular "
                        f"expression ({e}); escape it with re.escape() to match it as text"
                    ) from None
            else:
                raise ValueError(
                    f"RetryPolicy.retryable_errors: {entry!r} is neither an exception type "
                    "nor a message pattern (a str or re.compile(...))"
                )
        # Compiled once, in order; a frozen dataclass with slots keeps it as a field.
        object.__setattr__(self, "retryable_errors", tuple(matchers))
        for name in ("initial_delay", "max_delay"):
            delay = getattr(self, name)
            if not isinstance(delay, timedelta) or delay < timedelta(0):
                raise ValueError(
                    f"RetryPolicy.{name} must be a non-negative datetime.timedelta, not {delay!r}"
                )
        if self.jitter not in ("full", "none"):
            raise ValueError("RetryPolicy.jitter must be 'full' or 'none'")

    def should_retry(self, error: BaseException) -> bool:
        """Whether ``error`` is worth another attempt (ignoring the attempt count)."""
        if self.never_retry and isinstance(error, self.never_retry):
            return False
        if isinstance(error, TerminalError):
            return False
        if self.retry_on or self.retryable_errors:
            return isinstance(error, (*self.retry_on, RetryableError)) or self._matches_retryable(
                error
            )
        return classify(error) == "retryable"

    def _matches_retryable(self, error: BaseException) -> bool:
        message: str | None = None
        for entry in self.retryable_errors:
            if isinstance(entry, re.Pattern):
                if message is None:
                    message = str(error)
                if entry.search(message):
                    return True
            elif isinstance(entry, type) and isinstance(error, entry):
                return True
        return False

    def next_delay(self, attempt: int, error: BaseException) -> timedelta | None:
        """Delay before attempt ``attempt + 1``, or None when the step fails for good."""
        if attempt >= self.max_attempts or not self.should_retry(error):
            return None
        if isinstance(error, RetryableError) and error.retry_after is not None:
            return max(timedelta(0), min(error.retry_after, self.max_delay))
        # Capped before it is computed: 10_000 attempts with backoff=10 reach max_delay,
        # not a float overflow.
        ceiling = capped_delay(
            self.initial_delay, self.backoff, max(0, attempt - 1), self.max_delay
        )
        if self.jitter == "full":
            return ceiling * _JITTER.random()
        return ceiling


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(max_attempts=1)
