"""Retryable error filters (issue 36, item 4): a policy retries only what its
``retryable_errors`` name, by exception type or by a pattern of the message, as the AWS
durable SDK's ``RetryStrategyConfig(retryable_errors=..., retryable_error_types=...)``."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from durable import App, Context, RetryPolicy, RunStatus, TerminalError
from durable.errors import RetryableError
from durable.testing import LocalRunner


class Upstream(Exception):
    pass


def test_a_message_pattern_or_a_type_decides_what_retries() -> None:
    policy = RetryPolicy(retryable_errors=(TimeoutError, r"rate limit|try again"))
    assert policy.should_retry(TimeoutError("slow"))
    assert policy.should_retry(Upstream("HTTP 429: rate limit exceeded"))
    assert policy.should_retry(ValueError("please try again later"))  # terminal by default
    assert not policy.should_retry(ConnectionError("reset"))  # retryable by default: not named
    assert not policy.should_retry(Upstream("bad request"))
    assert policy.should_retry(RetryableError("the code said so"))
    assert not policy.should_retry(TerminalError("rate limit, but terminal"))
    compiled = RetryPolicy(retryable_errors=(re.compile("LOCKED", re.IGNORECASE),))
    assert compiled.should_retry(Upstream("row locked")) and not compiled.should_retry(
        Upstream("x")
    )


def test_never_retry_wins_and_retry_on_adds_to_the_filters() -> None:
    policy = RetryPolicy(
        retry_on=(KeyError,), retryable_errors=(r"busy",), never_retry=(PermissionError,)
    )
    assert policy.should_retry(KeyError("k"))  # retry_on
    assert policy.should_retry(Upstream("server busy"))  # a pattern
    assert not policy.should_retry(PermissionError("busy"))  # never_retry wins
    assert not policy.should_retry(Upstream("gone"))


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ("rate limit", "takes a tuple"),
        ((r"([unclosed",), "is not a regular expression"),
        ((42,), "neither an exception type nor a message pattern"),
        ((int,), "neither an exception type nor a message pattern"),
    ],
)
def test_a_bad_filter_is_refused_at_the_policy_saying_the_fix(entries: object, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        RetryPolicy(retryable_errors=entries)  # type: ignore[arg-type]


def test_a_backoff_below_one_is_refused_saying_what_to_use_instead() -> None:
    with pytest.raises(ValueError, match=re.escape("backoff=1.0 is a fixed delay")):
        RetryPolicy(backoff=0.5)
    fixed = RetryPolicy(
        max_attempts=4, initial_delay=timedelta(seconds=3), backoff=1.0, jitter="none"
    )
    assert [fixed.next_delay(n, TimeoutError()) for n in (1, 2, 3)] == [timedelta(seconds=3)] * 3


def test_a_step_retries_the_message_it_was_told_to_and_fails_on_another() -> None:
    """Through the engine: the filter decides the attempts recorded, on replay too."""
    calls: list[str] = []
    messages = iter(["503: try again", "503: try again", "schema mismatch"])
    app = App()

    @app.step(
        name="sync",
        retry=RetryPolicy(
            max_attempts=5,
            initial_delay=timedelta(minutes=1),
            jitter="none",
            retryable_errors=(r"try again",),
        ),
    )
    def sync() -> str:
        message = next(messages)
        calls.append(message)
        raise Upstream(message)

    @app.workflow
    def job(ctx: Context) -> str:
        return sync()

    runner = LocalRunner(app)
    run_id = runner.start("job").run_id
    runner.advance(minutes=10)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert calls == ["503: try again", "503: try again", "schema mismatch"]
    (step,) = runner.history(run_id)
    assert len(step.attempts) == 3 and step.error_class == "terminal"
    assert step.error_summary is not None and "schema mismatch" in step.error_summary


def test_lists_are_taken_where_tuples_are_and_the_policy_stays_hashable() -> None:
    policy = RetryPolicy(retry_on=[KeyError], never_retry=[PermissionError])  # type: ignore[arg-type]
    assert policy.retry_on == (KeyError,) and policy.never_retry == (PermissionError,)
    assert hash(policy) == hash(RetryPolicy(retry_on=(KeyError,), never_retry=(PermissionError,)))
