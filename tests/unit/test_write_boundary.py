"""The write boundary's scrub: a token redacted wherever it stands in what is written, the
record the same object after (the engine tells its own write by identity), nothing else
changed (issue 32, finding 1; the property test over DynamoDB Local is
tests/integration/test_no_token_at_rest.py)."""

from __future__ import annotations

from durable.core.model import Attempt, RunError, SignalRecord
from durable.core.ports import ChildReport, RunGuard
from durable.core.tokens import make_token
from durable.core.write_boundary import REDACTED_TOKEN, WriteBoundary, scrub, scrub_text
from tests.support.records import make_run, make_step, t

TOKEN = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003.0001", "n1")
URL = f"https://api.example.com/prod/callbacks/{TOKEN}"


def test_a_token_is_redacted_in_a_text_wherever_it_stands() -> None:
    assert (
        scrub_text(f"mail {URL} now")
        == f"mail https://api.example.com/prod/callbacks/{REDACTED_TOKEN} now"
    )
    assert scrub_text(TOKEN) == REDACTED_TOKEN
    assert scrub_text("01KDVDNA00NH4Y4J45KWBET2C0.0003") == "01KDVDNA00NH4Y4J45KWBET2C0.0003"
    assert scrub_text("no dots here") == "no dots here"


def test_a_token_among_many_dots_is_found_past_the_quick_search() -> None:
    """The quick search for a token's tail must never pass over a token: one in a long
    text full of dots and digits (a version, a price list, a URL), nested positions
    included, and two in one text."""
    deep = make_token(
        b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003.0001.0002", "n"
    )
    noise = "v1.2.3 costs 1.0000.5 at a.b.c/1234.5678. " * 40
    text = f"{noise}{URL} and {deep}.{noise}"
    scrubbed = scrub_text(text)
    assert TOKEN not in scrubbed and deep not in scrubbed
    assert scrubbed.count(REDACTED_TOKEN) == 2 and scrubbed.startswith(noise)
    assert scrub_text(noise) == noise


def test_every_field_of_a_step_is_scrubbed_in_place() -> None:
    step = make_step(
        output=f'{{"url":"{URL}"}}',
        error_summary=f"RuntimeError: {URL}",
        attempts=[Attempt(1, t(1), t(2), "retryable", f"boom at {URL}")],
        checkpoint={"payload_version": 1, "state": f'["{URL}"]'},
        refs=[{"kind": "link", "value": URL}],
        detail={"note": [URL]},
    )
    assert scrub(step) is step
    assert TOKEN not in repr(step) and REDACTED_TOKEN in step.output


def test_a_run_a_signal_changes_and_a_report_are_scrubbed() -> None:
    run = make_run(input=f'{{"u":"{URL}"}}', output=f'"{URL}"', error=RunError("E", URL))
    run.cancel_reason, run.operations = URL, [{"action": "cancel", "reason": URL}]
    assert scrub(run) is run and TOKEN not in repr(run)
    signal = SignalRecord("RUN1", "go", "01A", f'"{URL}"', t(1))
    assert scrub(signal) is signal and TOKEN not in signal.payload
    assert TOKEN not in repr(scrub({"error": RunError("E", URL), "output": URL}))


def test_the_boundary_scrubs_what_each_write_method_takes() -> None:
    seen: list[object] = []

    class Ledger:
        def __getattr__(self, name: str) -> object:
            return lambda *args, **kwargs: seen.append((name, args, kwargs))

    boundary = WriteBoundary(Ledger())  # type: ignore[arg-type]
    guard = RunGuard(fence=1, owner="w")
    report = ChildReport("P", "0001", "C", make_step().status, output=f'"{URL}"')
    boundary.update_run("R", guard, {"output": URL})
    boundary.finish_child("C", guard, {"output": URL}, report, now=t(1))
    boundary.operate(
        "R", statuses=("RUNNING",), changes={"cancel_reason": URL}, operation={"reason": URL}
    )
    boundary.add_signal(SignalRecord("R", "go", "01A", URL, t(1)), now=t(1))
    assert TOKEN not in repr(seen) and len(seen) == 4
