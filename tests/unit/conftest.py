"""Fixtures shared by the unit tests of one feature across files."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from durable.engine import fanout
from tests.conftest import MakeTables, aws_client


@pytest.fixture
def decided(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Set the moment a batch (``ctx.parallel``, ``ctx.map``) is told to stop its
    branches: its rule was decided. A branch's step body waits on it to be the one still
    running when that happens, instead of sleeping and hoping."""
    event = threading.Event()
    original = fanout._must_stop

    def watching(runs: Any, rule: Any) -> bool:
        stop = original(runs, rule)
        if stop:
            event.set()
        return stop

    monkeypatch.setattr(fanout, "_must_stop", watching)
    yield event


@pytest.fixture
def dynamo(mock_aws_session: None, make_tables: MakeTables) -> Iterator[tuple[Any, str]]:
    """A DynamoDB client (moto in-process) and a fresh ledger table's name, for tests that
    look at the items and requests themselves."""
    client = aws_client("dynamodb", None)
    name, _ = make_tables(client)
    yield client, name
