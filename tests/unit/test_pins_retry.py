"""Pins on retry policies and the failure taxonomy (durable/core/retry.py).

Each test names the mutants it kills (ids of ``python -m tests.mutation --module
durable/core/retry.py --list``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import RetryableError, RetryPolicy, TerminalError
from durable.core.retry import DEFAULT_RETRY, NO_RETRY, classify, error_type_name
from durable.errors import StorageError

# The tables in durable/core/retry.py, spelled out again: a code dropped or misspelt there fails.
THROTTLES_AND_FAULTS = [
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
    "PriorThrottling",
    "EC2ThrottledException",
    "LimitExceededException",
]
CALLER_MISTAKES = [
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
]


class AwsError(Exception):
    """Shaped like botocore's ClientError: the code and the HTTP status in ``response``."""

    def __init__(self, code: str | None, status: int | str | None = None) -> None:
        super().__init__(code)
        self.response: dict[str, Any] = {}
        if code is not None:
            self.response["Error"] = {"Code": code}
        if status is not None:
            self.response["ResponseMetadata"] = {"HTTPStatusCode": status}


class BadValue(ValueError):
    """A terminal builtin that also carries HTTP status attributes."""

    def __init__(self, status_code: int | None = None, status: int | None = None) -> None:
        super().__init__("bad")
        self.status_code = status_code
        self.status = status


class Response:
    def __init__(self, status_code: object) -> None:
        self.status_code = status_code


class HttpClientError(Exception):
    """requests/httpx style: the status on ``error.response.status_code``."""

    def __init__(self, status_code: object) -> None:
        super().__init__(f"HTTP {status_code}")
        self.response = Response(status_code)


# --- the taxonomy ---------------------------------------------------------------------


@pytest.mark.parametrize("code", THROTTLES_AND_FAULTS)
def test_every_throttle_and_fault_code_retries_even_with_a_400(code: str) -> None:
    """GIVEN an AWS error with a retryable code and HTTP 400 (how AWS sends throttles)
    WHEN classified THEN retryable: the code wins over the status.

    Kills each RETRYABLE_AWS_CODES entry -> "" (retry-dcb63328, retry-902fd529, ...: the
    400 would then make it terminal) and retry-4a5ab79c / d551eefa."""
    assert classify(AwsError(code, 400)) == "retryable"


@pytest.mark.parametrize("code", CALLER_MISTAKES)
def test_every_caller_mistake_code_is_terminal_even_with_a_500(code: str) -> None:
    """GIVEN an AWS error with a terminal code and HTTP 500 WHEN classified THEN terminal.

    Kills each TERMINAL_AWS_CODES entry -> "" and retry-a0e067f8 / 2bdb3837."""
    assert classify(AwsError(code, 500)) == "terminal"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (429, "retryable"),
        (428, "terminal"),
        (430, "terminal"),
        (500, "retryable"),
        (599, "retryable"),
        (400, "terminal"),
        (499, "terminal"),
    ],
)
def test_http_statuses_at_the_class_boundaries(status: int, expected: str) -> None:
    """GIVEN an error whose only hint is an HTTP status (an unknown AWS code)
    WHEN classified THEN 429 and 500-599 retry, the other 4xx are terminal.

    Kills retry-abba6ba1 (``>= 500`` -> ``> 500``), retry-90415899 (500 -> 501),
    retry-b4df0ce0 (429 -> 430), retry-594efd59 / a2438018 (``400 <=`` -> ``<``, 400 -> 401),
    retry-f1be0324 / d4121e54 (``< 500`` -> ``<= 500``), retry-542926ac / 46ed5eb3 /
    8980dfdd / 2bc0f0ac and the 4xx branch's negations."""
    assert classify(AwsError("SomethingNew", status)) == expected
    assert classify(BadValue(status_code=status)) == expected  # also by attribute


def test_an_informational_or_redirect_status_decides_nothing() -> None:
    """GIVEN errors with a 1xx or 3xx status WHEN classified THEN the status neither
    retries nor fails them: the exception's type decides (ValueError terminal, others
    retryable).

    Kills retry-8788eb26 / b9aadb54 / 54a1d61b (the 4xx test turned into a catch-all)."""
    assert classify(AwsError("SomethingNew", 302)) == "retryable"
    assert classify(BadValue(status_code=302)) == "terminal"
    assert classify(BadValue(status_code=100)) == "terminal"


def test_only_100_to_599_is_an_http_status() -> None:
    """GIVEN a terminal builtin carrying status_code values around the range's ends
    WHEN classified THEN 100 and 599 are statuses (the first attribute holding one wins,
    ``status`` is not read); 99 and 600 are not, so ``status`` is read next, and without it
    the type decides.

    Kills retry-f40b3457 / e1dfb093 (``100 <=`` -> ``<``, 100 -> 101), retry-1bd5c986 /
    f33a1e79 (``<= 599`` -> ``<``, 599 -> 600), retry-2b68c31d / 0d8e8615, retry-a571ac51
    (``and`` -> ``or``), retry-6343e51d / 2de30483 (the attribute names)."""
    assert classify(BadValue(status_code=100, status=503)) == "terminal"
    assert classify(BadValue(status_code=599)) == "retryable"
    assert classify(BadValue(status_code=99, status=503)) == "retryable"
    assert classify(BadValue(status_code=600)) == "terminal"
    assert classify(BadValue(status=503)) == "retryable"


def test_the_status_of_a_requests_style_response() -> None:
    """GIVEN errors carrying ``response.status_code`` (requests, httpx) WHEN classified THEN
    503 retries and 404 fails for good; a non-integer status is ignored.

    Kills retry-f3f03dac / 8ab541ee / b504975e / 965bdf60 (the response.status_code path)."""
    assert classify(HttpClientError(503)) == "retryable"
    assert classify(HttpClientError(404)) == "terminal"
    assert classify(HttpClientError("404")) == "retryable"  # unknown: retryable


def test_the_status_in_aws_response_metadata() -> None:
    """GIVEN AWS-shaped errors without a code, only ResponseMetadata's HTTPStatusCode
    WHEN classified THEN 503 retries, 404 fails for good, a non-integer is ignored.

    Kills retry-8b10811b / b7a8d37c / aea7a316 / 9802a934 / 86bfe85a / 503ed222."""
    assert classify(AwsError(None, 503)) == "retryable"
    assert classify(AwsError(None, 404)) == "terminal"
    assert classify(AwsError(None, "404")) == "retryable"


def test_a_storage_error_says_itself_whether_it_retries() -> None:
    """GIVEN storage errors marked retryable and not WHEN classified THEN as marked.

    Kills retry-9669c783 / 4a005b82 / c1f320e2 / f0e92f41 / 65fd11ae."""
    assert classify(StorageError("throttled", retryable=True)) == "retryable"
    assert classify(StorageError("item too large", retryable=False)) == "terminal"


def test_the_error_type_name_carries_the_aws_code() -> None:
    """GIVEN an AWS error and a plain one WHEN named for the record THEN the AWS one reads
    ``AwsError(ThrottlingException)``, the plain one its class name.

    Kills retry-24df5b5f / f8c19e8e / b2c30a41 / 57cfc700 and retry-228e93b8 / 8159a512 /
    cde51062 / 0cb3bb6e / 5313eb17 (reading the code)."""
    assert error_type_name(AwsError("ThrottlingException", 400)) == "AwsError(ThrottlingException)"
    assert error_type_name(AwsError("", 400)) == "AwsError"
    assert error_type_name(KeyError("k")) == "KeyError"


# --- the policy -------------------------------------------------------------------------


def test_the_default_policy_tries_three_times_doubling_from_one_second() -> None:
    """GIVEN the default policy (without jitter, to read the ceiling)
    WHEN a step keeps failing THEN it is tried 3 times: waits of 1 s and 2 s, then it fails
    for good; delays are capped at 5 minutes; jitter is full by default.

    Kills retry-25169d69 (``max_attempts = 3`` -> 4), retry-9ffcba45 (1 s -> 0), retry-40563c73
    (backoff 2.0 -> 3.0), retry-3a39eabe (5 minutes -> 6)."""
    plain = RetryPolicy(jitter="none")
    delays = [plain.next_delay(n, ConnectionError()) for n in (1, 2, 3)]
    assert delays == [timedelta(seconds=1), timedelta(seconds=2), None]
    capped = RetryPolicy(jitter="none", max_attempts=20)
    assert capped.next_delay(15, ConnectionError()) == timedelta(minutes=5)
    assert DEFAULT_RETRY.max_attempts == 3 and DEFAULT_RETRY.jitter == "full"
    assert NO_RETRY.next_delay(1, ConnectionError()) is None


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_attempts": 0},
        {"backoff": 0.99},
        {"initial_delay": timedelta(microseconds=-1)},
        {"max_delay": timedelta(microseconds=-1)},
        {"jitter": "partial"},
    ],
)
def test_a_policy_refuses_arguments_out_of_range(arguments: dict[str, Any]) -> None:
    """GIVEN an argument just outside its range WHEN a policy is made THEN ValueError.

    Kills retry-59723c9e / 8ebfe894, retry-d5dd6182 / 28251850, retry-a59971ee / 52137c13 /
    e2f97e2a / 77730826 / 94a4898e, retry-75473f61 / 21214c66 (each check negated or its
    raise deleted)."""
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**arguments)


def test_a_policy_accepts_arguments_at_the_edge_of_their_range() -> None:
    """GIVEN arguments exactly at their limits (1 attempt, backoff 1.0, zero delays, either
    jitter) WHEN a policy is made THEN it is valid and behaves so.

    Kills retry-a5e611a3 / 502195bc (``max_attempts < 1`` -> ``<= 1``, 1 -> 0), retry-082cc6a2
    / b6bff545 (backoff ``< 1.0`` -> ``<=``, 1.0 -> 2.0), retry-21800f80 / 5caeaccc / a38f921d
    / 6a54d191 (zero delays refused), retry-448546f7 / fd89f3e1 (a jitter name -> "")."""
    edge = RetryPolicy(
        max_attempts=1,
        backoff=1.0,
        initial_delay=timedelta(0),
        max_delay=timedelta(0),
        jitter="none",
    )
    assert edge.next_delay(1, ConnectionError()) is None
    flat = RetryPolicy(max_attempts=3, backoff=1.0, jitter="none")
    assert flat.next_delay(2, ConnectionError()) == timedelta(seconds=1)
    zero = RetryPolicy(initial_delay=timedelta(0), jitter="full")
    assert zero.next_delay(1, ConnectionError()) == timedelta(0)


def test_never_retry_stops_only_the_types_it_names() -> None:
    """GIVEN a policy that never retries KeyError WHEN other errors fail the step THEN they
    still retry by the taxonomy (and terminal ones still do not).

    Kills retry-109318b8 (``never_retry and isinstance(...)`` -> ``or``: nothing would
    retry once never_retry is set) and retry-bcc1b8cc / 70225b50."""
    policy = RetryPolicy(never_retry=(KeyError,), jitter="none")
    assert policy.next_delay(1, KeyError("k")) is None
    assert policy.next_delay(1, ConnectionError()) == timedelta(seconds=1)
    assert policy.next_delay(1, RetryableError("again")) == timedelta(seconds=1)
    assert policy.next_delay(1, PermissionError()) is None


def test_retry_on_keeps_retryable_errors_and_terminal_errors_stop_everything() -> None:
    """GIVEN ``retry_on=(TimeoutError,)`` WHEN a RetryableError or a TerminalError (even a
    subclass named in retry_on) fails the step THEN the first retries, the second never.

    Kills retry-9af7c162 / 628870be / 822118ea / 78ae5525."""

    class StopTimeout(TerminalError, TimeoutError):
        pass

    policy = RetryPolicy(retry_on=(TimeoutError,), jitter="none")
    assert policy.next_delay(1, RetryableError("again")) == timedelta(seconds=1)
    assert policy.next_delay(1, StopTimeout("stop")) is None
    assert policy.next_delay(1, ValueError()) is None
    assert RetryPolicy(jitter="none").next_delay(1, TerminalError("no")) is None


def test_the_last_attempt_is_the_policys_max_attempts() -> None:
    """GIVEN max_attempts=4 WHEN attempt 3 and 4 fail THEN 3 gets a delay (4 s: the
    exponent is attempt - 1), 4 none.

    Kills retry-68c94203 (``attempt >= max_attempts`` -> ``>``), retry-37e5590a /
    b4d5bf00 / 29125e74, retry-fb56c2e5 / ea1e6212 / d21bafa5 / 2532bbbd (the exponent)."""
    policy = RetryPolicy(max_attempts=4, jitter="none")
    assert policy.next_delay(3, ConnectionError()) == timedelta(seconds=4)
    assert policy.next_delay(4, ConnectionError()) is None
    assert RetryPolicy(max_attempts=9, backoff=3.0, jitter="none").next_delay(
        3, ConnectionError()
    ) == timedelta(seconds=9)


def test_retry_after_is_honoured_up_to_the_maximum_delay() -> None:
    """GIVEN a RetryableError asking for 10 minutes, and one asking for nothing
    WHEN the policy (max 5 minutes) computes the delay THEN 5 minutes, then the backoff.

    Kills retry-c6e036b9 / 13a0f692 / 4b043730 / f0877e00."""
    policy = RetryPolicy(jitter="none")
    long_ask = RetryableError("later", retry_after=timedelta(minutes=10))
    assert policy.next_delay(1, long_ask) == timedelta(minutes=5)
    assert policy.next_delay(1, RetryableError("again")) == timedelta(seconds=1)


def test_full_jitter_draws_between_zero_and_the_ceiling() -> None:
    """GIVEN full jitter with a 10 ms first delay WHEN 50 delays are drawn THEN each lies in
    [0, 10 ms] and they are not all equal.

    Kills retry-ace21247 (``uniform(0, ...)`` -> ``uniform(1, ...)``), retry-50452221 /
    3f920879 (jitter ignored)."""
    policy = RetryPolicy(initial_delay=timedelta(milliseconds=10))
    delays = [policy.next_delay(1, ConnectionError()) for _ in range(50)]
    assert all(d is not None and timedelta(0) <= d <= timedelta(milliseconds=10) for d in delays)
    assert len(set(delays)) > 1
