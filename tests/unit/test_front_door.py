"""What ``durable dev`` refuses before it serves anything (issue 32, finding 6): a rebound
Host, a foreign Origin, a state-changing request that is not JSON. Before, ``Host:
rebind.attacker.test`` got 200 and a form post from another local origin canceled a run;
tests/e2e/test_dev_port.py sends the same requests to a running ``durable dev``."""

from __future__ import annotations

import pytest

from durable.local.front_door import refusal

PORT = 8787
MINE = {"Host": f"127.0.0.1:{PORT}"}


@pytest.mark.parametrize(
    ("method", "path", "headers", "field"),
    [
        ("GET", "/runs", {"Host": "rebind.attacker.test"}, "Host"),
        ("GET", "/runs", {"Host": f"127.0.0.1:{PORT + 1}"}, "Host"),
        ("POST", "/runs/R/cancel", {**MINE, "Origin": "http://127.0.0.1:3000"}, "Origin"),
        ("POST", "/runs/R/cancel", {**MINE, "Origin": "https://evil.example"}, "Origin"),
        ("POST", "/runs/R/cancel", MINE, "Content-Type"),
        ("POST", "/runs/R/cancel", {**MINE, "Content-Type": "text/plain"}, "Content-Type"),
        (
            "DELETE",
            "/runs/R",
            {**MINE, "content-type": "application/x-www-form-urlencoded"},
            "Content-Type",
        ),
    ],
)
def test_what_a_page_elsewhere_could_send_is_refused(
    method: str, path: str, headers: dict[str, str], field: str
) -> None:
    refused = refusal(method, path, headers, PORT)
    assert refused is not None and refused[3] == field


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/runs", MINE),
        ("GET", "/console/", {"Host": f"localhost:{PORT}"}),
        ("POST", "/runs/R/cancel", {**MINE, "Content-Type": "application/json; charset=utf-8"}),
        (
            "POST",
            "/runs/R/cancel",
            {**MINE, "Content-Type": "application/json", "Origin": f"http://127.0.0.1:{PORT}"},
        ),
        ("POST", "/hooks/orders", {**MINE, "Content-Type": "application/x-www-form-urlencoded"}),
        ("POST", "/2015-03-31/functions/w/invocations", MINE),
    ],
)
def test_the_cli_the_console_senders_and_botocore_pass(
    method: str, path: str, headers: dict[str, str]
) -> None:
    assert refusal(method, path, headers, PORT) is None
