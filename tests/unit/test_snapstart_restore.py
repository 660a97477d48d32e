"""Composition during INIT, and restore safety (issue 47 item 4).

Where Lambda initializes an environment before any event (provisioned concurrency,
SnapStart: ``AWS_LAMBDA_INITIALIZATION_TYPE``), a handler composes at construction, so
the first event finds it ready. A SnapStart snapshot is then restored into any number of
environments: here a fork after INIT stands in for two restores of one snapshot, each
child runs the after-restore hook as the runtime would, and the two must mint different
ids, nonces, lease owners and random draws.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from durable.adapters.aws_services import LazyClient
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.adapters.nonces import MemoryNonceStore
from durable.aws import after_restore, worker_handler
from durable.core.ids import new_ulid
from durable.core.retry import jitter_share
from durable.core.tokens import new_nonce
from durable.handlers.bootstrap import composes_at_init
from durable.runtime import Services
from durable.settings import Settings
from tests.handlers import workflows
from tests.handlers.conftest import WORKER_ARN
from tests.handlers.events import LambdaContext

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings(
    app="tests.handlers.workflows:app",
    ledger_table="durable-ledger-test",
    idempotency_table="durable-idempotency-test",
    worker_function=WORKER_ARN,
)


@dataclass
class OwnersSeen:
    """The ledger, with the lease owner of every claim written down."""

    ledger: MemoryLedger
    owners: list[str] = field(default_factory=list)

    def claim(self, run_id: str, owner: str, **kwargs: Any) -> Any:
        self.owners.append(owner)
        return self.ledger.claim(run_id, owner, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)


def _services(prepared: list[str]) -> tuple[Services, OwnersSeen]:
    ledger = OwnersSeen(MemoryLedger())
    services = Services(
        ledger=ledger,
        effects=MemoryEffectStore(),
        invoker=MemoryInvoker(),
        nonces=MemoryNonceStore(),
        prepare=lambda: prepared.append("client made"),
    )
    return services, ledger


@pytest.mark.parametrize("kind", ["snap-start", "provisioned-concurrency"])
def test_a_handler_composes_during_init_when_no_event_waits(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", kind)
    prepared: list[str] = []
    services, _ = _services(prepared)
    handler = worker_handler(
        workflows.app, SETTINGS, services=services, compose_at_init=composes_at_init()
    )
    assert handler.runtime is not None  # composed at construction: Lambda's INIT
    assert prepared == ["client made"]  # and what every event uses, made


@pytest.mark.parametrize("kind", [None, "on-demand"])
def test_an_on_demand_cold_start_still_composes_on_its_first_event(
    kind: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind is None:
        monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE", raising=False)
    else:
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", kind)
    prepared: list[str] = []
    services, _ = _services(prepared)
    handler = worker_handler(
        workflows.app, SETTINGS, services=services, compose_at_init=composes_at_init()
    )
    assert handler.runtime is None and prepared == []
    handler({"control": "describe"}, LambdaContext())
    assert handler.runtime is not None


def test_a_composition_failing_during_init_is_reported_by_the_first_event(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "snap-start")

    def broken() -> Settings:
        raise ValueError("DURABLE_LEDGER_TABLE is not set")

    with caplog.at_level(logging.WARNING, logger="durable.aws"):
        handler = worker_handler(
            workflows.app, broken, services=_services([])[0], compose_at_init=composes_at_init()
        )
    assert handler.runtime is None
    assert "DURABLE_LEDGER_TABLE is not set" in caplog.text
    with pytest.raises(ValueError, match="DURABLE_LEDGER_TABLE is not set"):
        handler({"control": "describe"}, LambdaContext())


def test_restore_drops_the_connections_of_the_clients_made_and_keeps_them_usable() -> None:
    closed: list[str] = []

    class Client:
        def close(self) -> None:
            closed.append("closed")

        def describe(self) -> str:
            return "answered"

    made, unmade = LazyClient(Client), LazyClient(Client)
    made.botocore_client()
    made.close_connections()
    unmade.close_connections()  # never made: nothing to close, and nothing made for it
    assert closed == ["closed"]
    assert made.describe() == "answered"


def test_the_aws_composition_makes_its_store_client_at_init_and_closes_it_on_restore(
    monkeypatch: pytest.MonkeyPatch, mock_aws_session: None
) -> None:
    from durable.adapters.aws_services import aws_services

    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "snap-start")
    session = botocore.session.get_session()
    session.set_config_variable("region", "us-east-1")
    services = aws_services(SETTINGS, session)
    handler = worker_handler(
        workflows.app, SETTINGS, services=services, compose_at_init=composes_at_init()
    )
    assert handler.runtime is not None
    closes: list[str] = []
    client = services.ledger.client.botocore_client()  # type: ignore[attr-defined]
    monkeypatch.setattr(client, "close", lambda: closes.append("dynamodb"))
    after_restore()
    assert closes == ["dynamodb"]


def _restored_child(handler: Any, run_id: str, ledger: OwnersSeen, write: int) -> None:
    """One environment restored from the snapshot: the runtime's hook, then what it mints."""
    try:
        after_restore()
        runtime = handler.runtime
        handler({"run_id": run_id, "reason": "start", "hop": 0}, LambdaContext())
        started = runtime.engine.start("greet", {"user_id": "u", "email": "u@example.com"})
        minted = {
            "ulid": new_ulid(runtime.clock.now()),
            "run_id": started.run_id,
            "nonce": new_nonce(),
            "lease_owner": ledger.owners[-1],
            "jitter": jitter_share(),
            "random": random.random(),
        }
        os.write(write, json.dumps(minted).encode())
    finally:
        os._exit(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a snapshot is stood in for by fork()")
def test_two_environments_restored_from_one_snapshot_mint_different_ids_and_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "snap-start")
    services, ledger = _services([])
    handler = worker_handler(
        workflows.app, SETTINGS, services=services, compose_at_init=composes_at_init()
    )
    assert handler.runtime is not None
    # A run waiting in the store the snapshot will see, and random state drawn at INIT.
    run = handler.runtime.engine.start("greet", {"user_id": "u", "email": "u@example.com"})
    jitter_share(), random.random()

    children = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child exits inside
            os.close(read)
            _restored_child(handler, run.run_id, ledger, write)
        os.close(write)
        children.append((pid, read))
    minted = []
    for pid, read in children:
        with os.fdopen(read, "rb") as pipe:
            text = pipe.read()
        os.waitpid(pid, 0)
        assert text, "a restored child failed before reporting"
        minted.append(json.loads(text))
    first, second = minted
    for name in first:
        assert first[name] != second[name], f"two restored environments share {name}"


@pytest.mark.parametrize("kind", ["snap-start", "on-demand"])
def test_the_packaged_handlers_compose_at_init_as_lambda_says(kind: str) -> None:
    """``handlers.<name>`` as Lambda imports them: composed during the import (INIT) only
    when the environment is provisioned or snapshotted; nothing is sent anywhere."""
    code = (
        "import handlers.worker, handlers.api, handlers.sweeper, handlers.events, "
        "handlers.purge\n"
        "print(*(m.handler.runtime is not None for m in (handlers.worker, handlers.api, "
        "handlers.sweeper, handlers.events, handlers.purge)))"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_LAMBDA_INITIALIZATION_TYPE": kind,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "DURABLE_APP": "tests.handlers.workflows:app",
        "DURABLE_LEDGER_TABLE": "durable-ledger-test",
        "DURABLE_IDEMPOTENCY_TABLE": "durable-idempotency-test",
        "DURABLE_WORKER_FUNCTION": WORKER_ARN,
        # Unroutable on purpose: composing must not connect anywhere.
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = "True" if kind == "snap-start" else "False"
    assert done.stdout.split() == [expected] * 5, done.stderr


def test_the_template_offers_snapstart_for_the_worker_off_by_default() -> None:
    """SnapStart applies to published versions on python3.12 and later: the worker's (the
    live alias runs them). Off unless the stack turns it on (it is billed)."""
    from durable.adapters.schema import load_template

    template = load_template(ROOT / "template.yaml")
    parameter = template["Parameters"]["WorkerSnapStart"]
    assert parameter["Default"] == "None"
    assert set(parameter["AllowedValues"]) == {"None", "PublishedVersions"}
    worker = template["Resources"]["WorkerFunction"]["Properties"]
    assert worker["SnapStart"] == {"ApplyOn": {"Ref": "WorkerSnapStart"}}
    assert worker["AutoPublishAlias"] == "live"
    runtime = template["Globals"]["Function"]["Runtime"]
    assert tuple(int(p) for p in runtime.removeprefix("python").split(".")) >= (3, 12)
