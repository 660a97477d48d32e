"""No live callback token and no secret reaches storage from any public input position
(issue 44): every attribute of every item of every table, and every stored object.

``POSITIONS`` classifies every parameter of the public API a caller or workflow code can
put text into (``Context``, ``StepContext``, ``Engine``, ``App``, ``Callback``,
``ChildHandle``), and ``test_every_public_input_position_is_classified_and_planted``
fails when a parameter appears that is not classified, or a classified one no scenario
plants: a new input position cannot ship untried.

The kinds:
- ``VALUE``: a value the engine stores; a token in it is stored redacted, a secret-typed
  value sealed. The scenario plants the live URL there (hypothesis draws the structure
  around it) and a ``SecretStr`` where a type allows one.
- ``NAME``: a name, id or key the engine stores in clear and must find again on replay;
  a token there is refused at the call (``InvalidInput`` naming the field), nothing
  written.
- ``ADDRESS``: names something that exists (a run id, a workflow); an unknown one is
  refused before anything is written (not stored).
- ``NOT_TEXT``: typed as something other than text (a duration, a policy, a function, a
  codec, a number) or the credential itself (a callback token given to answer, compared
  by its hash, never stored): no text a caller chooses is stored from it.
- ``INTERNAL``: a method of the engine's own plumbing that no user calls with text of
  their own (exempt as a whole method).

The property runs on DynamoDB Local (the ledger and the idempotency table) and the
folder payload store ``durable dev`` uses; after each example every item of both tables is
scanned, every file under the payload folder read, and none may hold the live token's MAC
or the secret's text.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import inspect
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from durable import (
    App,
    Callback,
    ChildHandle,
    Context,
    Engine,
    EngineConfig,
    InvalidInput,
    RetryPolicy,
    StepContext,
    StepFailed,
    current_step,
)
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.adapters.payload_stores import FolderPayloads
from durable.core.clock import FakeClock
from durable.core.secrets import LocalKeys
from durable.core.tokens import make_token
from durable.core.write_boundary import REDACTED_TOKEN
from tests.conftest import MakeTables

# The URL planted at the leaves of random JSON structures: the strategy the first test of
# the boundary (issue 32) draws with.
from tests.integration.test_no_token_at_rest import plant, shapes

VALUE, NAME, ADDRESS, NOT_TEXT, INTERNAL = "value", "name", "address", "not text", "internal"

# Every public method's every parameter: "Class.method:param" -> kind (or "Class.method" ->
# INTERNAL for the whole method).
POSITIONS: dict[str, str] = {
    # --- workflow code: Context --------------------------------------------------------
    "Context.changed:patch_id": NAME,
    "Context.compensate": NOT_TEXT,  # no parameter
    "Context.continue_as_new:input": VALUE,
    "Context.create_callback:name": NAME,
    "Context.create_callback:timeout": NOT_TEXT,
    "Context.create_callback:result_type": NOT_TEXT,
    "Context.create_callback:heartbeat_timeout": NOT_TEXT,
    "Context.create_callback:serdes": NOT_TEXT,
    "Context.map:fn": NOT_TEXT,
    "Context.map:items": VALUE,
    "Context.map:name": NAME,
    "Context.map:max_concurrency": NOT_TEXT,
    "Context.map:completion": NOT_TEXT,
    "Context.map:distributed": NOT_TEXT,
    "Context.map:item_name": NAME,
    "Context.map:serdes": VALUE,  # the codec's output: planted through a step's codec
    "Context.now": NOT_TEXT,
    "Context.parallel:branches": VALUE,  # what each branch returns
    "Context.parallel:name": NAME,
    "Context.parallel:max_concurrency": NOT_TEXT,
    "Context.parallel:completion": NOT_TEXT,
    "Context.parallel:branch_names": NAME,
    "Context.parallel:serdes": VALUE,
    "Context.random": NOT_TEXT,
    "Context.set_progress:done": NOT_TEXT,  # ints
    "Context.set_progress:total": NOT_TEXT,
    "Context.set_progress:note": VALUE,  # stored on the run item, shown as it is
    "Context.run_child:workflow": ADDRESS,
    "Context.run_child:input": VALUE,
    "Context.run_child:id": NAME,
    "Context.run_child:if_running": NOT_TEXT,
    "Context.run_child:reuse": NOT_TEXT,
    "Context.run_child:serdes": NOT_TEXT,  # decodes what the child stored; encodes nothing
    "Context.sleep:duration": NOT_TEXT,
    "Context.sleep:name": NAME,
    "Context.sleep_until:when": NOT_TEXT,
    "Context.sleep_until:name": NAME,
    "Context.start_child:workflow": ADDRESS,
    "Context.start_child:input": VALUE,
    "Context.start_child:id": NAME,
    "Context.start_child:if_running": NOT_TEXT,
    "Context.start_child:reuse": NOT_TEXT,
    "Context.start_child:serdes": NOT_TEXT,
    "Context.step:fn": VALUE,  # what the body returns, and what it raises
    "Context.step:args": VALUE,
    "Context.step:kwargs": VALUE,
    "Context.step:name": NAME,
    "Context.step:retry": NOT_TEXT,
    "Context.step:timeout": NOT_TEXT,
    "Context.step:semantics": NOT_TEXT,
    "Context.step:compensate": NOT_TEXT,
    "Context.step:serdes": VALUE,
    "Context.uuid": NOT_TEXT,
    "Context.wait_for_callback:name": NAME,
    "Context.wait_for_callback:timeout": NOT_TEXT,
    "Context.wait_for_callback:submit": VALUE,  # what the submitter returns
    "Context.wait_for_callback:result_type": NOT_TEXT,
    "Context.wait_for_callback:heartbeat_timeout": NOT_TEXT,
    "Context.wait_for_callback:serdes": VALUE,
    "Context.wait_for_condition:check": VALUE,
    "Context.wait_for_condition:interval": NOT_TEXT,
    "Context.wait_for_condition:timeout": NOT_TEXT,
    "Context.wait_for_condition:initial_state": VALUE,
    "Context.wait_for_condition:until": NOT_TEXT,
    "Context.wait_for_condition:name": NAME,
    "Context.wait_for_condition:backoff": NOT_TEXT,
    "Context.wait_for_condition:max_interval": NOT_TEXT,
    "Context.wait_for_condition:max_attempts": NOT_TEXT,
    "Context.wait_for_condition:jitter": NOT_TEXT,
    "Context.wait_for_condition:serdes": VALUE,
    "Context.wait_for_signal:name": NAME,
    "Context.wait_for_signal:timeout": NOT_TEXT,
    # --- inside a step: StepContext ----------------------------------------------------
    "StepContext.checkpoint:state": VALUE,
    "StepContext.checkpoint:payload_version": NOT_TEXT,
    "StepContext.effect:action": NAME,
    "StepContext.effect:call": VALUE,  # the reference it returns
    "StepContext.effect:reconcile": VALUE,
    "StepContext.heartbeat": NOT_TEXT,
    "StepContext.record_ref:kind": VALUE,  # a label stored beside the value, not looked up
    "StepContext.record_ref:value": VALUE,
    "Callback.result": NOT_TEXT,
    "ChildHandle.result": NOT_TEXT,
    # --- the outside world: Engine (the API, the CLI and the event sources call these) ---
    "Engine.cancel:run_id": ADDRESS,
    "Engine.cancel:reason": VALUE,
    "Engine.cancel:compensate": NOT_TEXT,
    "Engine.cancel:requested_by": VALUE,
    "Engine.complete_callback:token": NOT_TEXT,  # the credential: compared by its hash
    "Engine.complete_callback:result": VALUE,
    "Engine.complete_callback:error": VALUE,
    "Engine.complete_wait:run_id": ADDRESS,
    "Engine.complete_wait:name": ADDRESS,
    "Engine.complete_wait:result": VALUE,
    "Engine.complete_wait:error": VALUE,
    "Engine.complete_wait:requested_by": VALUE,
    "Engine.complete_wait:position": ADDRESS,
    "Engine.erase:run_id": ADDRESS,  # reads and deletes; writes nothing
    "Engine.fork:run_id": ADDRESS,
    "Engine.fork:from_step": ADDRESS,
    "Engine.fork:requested_by": VALUE,
    "Engine.get_run:run_id": ADDRESS,
    "Engine.heartbeat:token": NOT_TEXT,
    "Engine.history:run_id": ADDRESS,
    "Engine.list_runs:workflow": ADDRESS,
    "Engine.list_runs:status": ADDRESS,
    "Engine.list_runs:needs_attention": NOT_TEXT,
    "Engine.list_runs:version": NOT_TEXT,
    "Engine.list_runs:limit": NOT_TEXT,
    "Engine.list_runs:cursor": ADDRESS,
    "Engine.retry:run_id": ADDRESS,
    "Engine.retry:upgrade_to": NOT_TEXT,
    "Engine.retry:requested_by": VALUE,
    "Engine.run_by_key:workflow": ADDRESS,
    "Engine.run_by_key:key": ADDRESS,
    "Engine.signal:run_id": ADDRESS,
    "Engine.signal:name": NAME,
    "Engine.signal:payload": VALUE,
    "Engine.signal:key": NAME,  # a key, though stored as its hash only
    "Engine.signal:sent_by": VALUE,
    "Engine.start:workflow": ADDRESS,
    "Engine.start:input": VALUE,
    "Engine.start:idempotency_key": NAME,
    "Engine.start:requested_by": VALUE,
    "Engine.start:version": NOT_TEXT,
    "Engine.start:key_scope": NAME,
    "Engine.start:gate": NAME,
    "Engine.start:if_running": NOT_TEXT,
    "Engine.start:reuse": NOT_TEXT,
    "Engine.start_or_get:workflow": ADDRESS,
    "Engine.start_or_get:input": VALUE,
    "Engine.start_or_get:idempotency_key": NAME,
    "Engine.start_or_get:requested_by": VALUE,
    "Engine.start_or_get:version": NOT_TEXT,
    "Engine.start_or_get:key_scope": NAME,
    "Engine.start_or_get:gate": NAME,
    "Engine.start_or_get:if_running": NOT_TEXT,
    "Engine.start_or_get:reuse": NOT_TEXT,
    "Engine.answer_sealer": INTERNAL,
    "Engine.arm_timer": INTERNAL,
    "Engine.cancel_timers": INTERNAL,
    "Engine.invoke_worker": INTERNAL,
    "Engine.leave_gate": INTERNAL,
    "Engine.load": INTERNAL,
    "Engine.new_run": INTERNAL,
    "Engine.new_sealer": INTERNAL,
    "Engine.peek_run": INTERNAL,
    "Engine.purge_expired": INTERNAL,
    "Engine.resume": INTERNAL,
    "Engine.sweep": INTERNAL,
    # --- the app's own declarations (code, not input: no token exists when they run) ----
    "App.get_workflow": NOT_TEXT,
    "App.include": NOT_TEXT,
    "App.schedule": NOT_TEXT,
    "App.schedules": NOT_TEXT,
    "App.step": NOT_TEXT,
    "App.workflow": NOT_TEXT,
    "App.workflows": NOT_TEXT,
}

PUBLIC_CLASSES = (Context, StepContext, Engine, Callback, ChildHandle, App)


def public_positions() -> set[str]:
    """Every "Class.method:param" of the public classes (a method without parameters is
    "Class.method")."""
    found: set[str] = set()
    for cls in PUBLIC_CLASSES:
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or not callable(member) or isinstance(member, type):
                continue
            try:
                signature = inspect.signature(member)
            except (TypeError, ValueError):
                continue
            params = [p for p in signature.parameters if p not in ("self", "cls")]
            qualified = f"{cls.__name__}.{name}"
            if not params or POSITIONS.get(qualified) in (INTERNAL, NOT_TEXT):
                found.add(qualified)
            else:
                found.update(f"{qualified}:{p}" for p in params)
    return found


# --- what the scenarios plant, by position ----------------------------------------------
PLANTED: set[str] = set()


def plants(*positions: str) -> Callable[[Any], Any]:
    """Declare the positions a scenario plants the token (or a secret) in."""
    PLANTED.update(positions)
    return lambda scenario: scenario


app = App()


class Gzipped:
    """A codec that hides its text: base64 of a gzip, as JSON text."""

    def serialize(self, value: Any) -> str:
        packed = gzip.compress(json.dumps(value, sort_keys=True).encode())
        return json.dumps(base64.b64encode(packed).decode())

    def deserialize(self, data: str) -> Any:
        return json.loads(gzip.decompress(base64.b64decode(json.loads(data))))


class Plan(BaseModel):
    shape: dict[str, Any]
    secret: SecretStr
    round: int = 0


class Notice(BaseModel):
    link: SecretStr  # the documented way to hand a callback URL to another run
    secret: SecretStr
    carried: dict[str, Any]


class Kept(BaseModel):
    carried: Any
    secret: SecretStr


@app.workflow(name="holder")
def holder(ctx: Context, _: None = None) -> Any:
    """Mints the live token the outside world plants, and keeps it live."""
    approval = ctx.create_callback("approval", timeout=timedelta(days=1))
    return approval.result()


@app.workflow(name="notify")
def notify(ctx: Context, notice: Notice) -> dict[str, Any]:
    link = notice.link.get_secret_value()

    def mail() -> str:
        # The mail API echoes the message, link included: the effect's stored reference.
        current_step().effect("send-mail", lambda key: {"echo": f"sent {link}", "key": key})
        return "sent"

    ctx.step(mail, name="mail")
    # (a child returns no secret: its parent could not open it; the run's output holds the link)
    return {"carried": plant(notice.carried, link)}


@app.workflow(name="everywhere")
def everywhere(ctx: Context, plan: Plan) -> Kept:
    cb = ctx.create_callback(
        "answer", timeout=timedelta(days=1), heartbeat_timeout=timedelta(days=1)
    )
    url = cb.url
    carried = plant(plan.shape, url)
    # A status line naming the callback's URL: it rides in the run item's next write.
    ctx.set_progress(1, 2, note=f"waiting on {url}"[:200])
    if plan.round:
        raise RuntimeError(f"the successor fails on purpose: {carried}")
    ctx.step(lambda v: v, carried, name="args")
    ctx.step(functools.partial(lambda *, v: v, v=carried), name="kwargs")  # as the docs bind

    def kept() -> Kept:
        return Kept(carried=carried, secret=plan.secret)

    ctx.step(kept, name="kept")

    def raises() -> None:
        raise RuntimeError(f"could not reach {url}")

    with contextlib.suppress(StepFailed):
        ctx.step(raises, name="raises", retry=RetryPolicy(max_attempts=1))

    def inside() -> str:
        step = current_step()
        step.checkpoint({"carried": carried})
        step.record_ref(f"ticket of {url}", url)
        step.effect("echo", lambda key: {"echo": carried}, reconcile=lambda key: None)
        return "done"

    ctx.step(inside, name="inside")
    ctx.step(lambda: carried, name="coded", serdes=Gzipped())
    ctx.step(lambda: {"carried": carried, "pad": "x" * 3000}, name="offloaded")
    ctx.wait_for_condition(
        lambda state: {**state, "n": state["n"] + 1},
        timedelta(seconds=1),
        initial_state={"carried": carried, "n": 0},
        until=lambda state: state["n"] >= 2,
        name="condition",
        serdes=Gzipped(),
    )
    ctx.wait_for_condition(lambda: carried, timedelta(seconds=1), name="met")
    ctx.map(lambda c, item: item, [carried, url], name="mapped", serdes=Gzipped())
    ctx.parallel(lambda c: carried, lambda c: url, name="branches")
    notice = Notice(link=SecretStr(url), secret=plan.secret, carried=plan.shape)
    ctx.run_child("notify", notice)
    ctx.start_child("notify", notice).result()
    ctx.wait_for_callback(
        "submitted", submit=lambda token: {"sent": carried}, timeout=timedelta(days=1)
    )
    ctx.wait_for_signal("echo", timeout=timedelta(days=1))
    cb.result()
    ctx.continue_as_new(Plan(shape=plan.shape, secret=plan.secret, round=1))
    raise AssertionError("continue_as_new returns no more")  # pragma: no cover


plants(
    "Context.step:fn",
    "Context.step:args",
    "Context.step:kwargs",
    "Context.step:serdes",
    "StepContext.checkpoint:state",
    "StepContext.record_ref:kind",
    "StepContext.record_ref:value",
    "StepContext.effect:call",
    "StepContext.effect:reconcile",
    "Context.wait_for_condition:check",
    "Context.wait_for_condition:initial_state",
    "Context.wait_for_condition:serdes",
    "Context.map:items",
    "Context.map:serdes",
    "Context.parallel:branches",
    "Context.parallel:serdes",
    "Context.run_child:input",
    "Context.start_child:input",
    "Context.wait_for_callback:submit",
    "Context.wait_for_callback:serdes",
    "Context.continue_as_new:input",
    "Context.set_progress:note",
    "Engine.start:input",
    "Engine.start:requested_by",
    "Engine.start_or_get:input",
    "Engine.start_or_get:requested_by",
    "Engine.signal:payload",
    "Engine.signal:sent_by",
    "Engine.complete_callback:result",
    "Engine.complete_callback:error",
    "Engine.complete_wait:result",
    "Engine.complete_wait:error",
    "Engine.complete_wait:requested_by",
    "Engine.cancel:reason",
    "Engine.cancel:requested_by",
    "Engine.retry:requested_by",
    "Engine.fork:requested_by",
)


@app.workflow(name="two-waits")
def two_waits(ctx: Context, _: None = None) -> Any:
    first = ctx.wait_for_callback("first", timeout=timedelta(days=1))
    second = ctx.wait_for_callback("second", timeout=timedelta(days=1))
    return {"first": first, "second": second}


@app.workflow(name="fails")
def fails(ctx: Context, note: str) -> None:
    ctx.step(lambda: note, name="noted")
    raise RuntimeError(f"failed on purpose: {note}")


# --- names: each refused at the call --------------------------------------------------
def _name_calls(token: str) -> dict[str, Callable[[Context], Any]]:
    """Workflow code that gives ``token`` to one name, id or key position."""
    return {
        "Context.changed:patch_id": lambda ctx: ctx.changed(token),
        "Context.create_callback:name": lambda ctx: ctx.create_callback(token),
        "Context.map:name": lambda ctx: ctx.map(lambda c, i: i, [1], name=token),
        "Context.map:item_name": lambda ctx: ctx.map(
            lambda c, i: i, [1], item_name=lambda item, index: token
        ),
        "Context.parallel:name": lambda ctx: ctx.parallel(lambda c: 1, name=token),
        "Context.parallel:branch_names": lambda ctx: ctx.parallel(
            lambda c: 1, branch_names=[token]
        ),
        "Context.run_child:id": lambda ctx: ctx.run_child("fails", "x", id=token),
        "Context.start_child:id": lambda ctx: ctx.start_child("fails", "x", id=token),
        "Context.sleep:name": lambda ctx: ctx.sleep(timedelta(seconds=1), name=token),
        "Context.sleep_until:name": lambda ctx: ctx.sleep_until(
            ctx.now() + timedelta(seconds=1), name=token
        ),
        "Context.step:name": lambda ctx: ctx.step(lambda: 1, name=token),
        "Context.wait_for_callback:name": lambda ctx: ctx.wait_for_callback(token),
        "Context.wait_for_condition:name": lambda ctx: ctx.wait_for_condition(
            lambda: True, timedelta(seconds=1), name=token
        ),
        "Context.wait_for_signal:name": lambda ctx: ctx.wait_for_signal(token),
        "StepContext.effect:action": lambda ctx: ctx.step(
            lambda: current_step().effect(token, lambda key: 1), name="effect"
        ),
    }


NAME_IN_CODE = sorted(_name_calls("t"))
plants(*NAME_IN_CODE)


@app.workflow(name="names")
def names(ctx: Context, position: str) -> None:
    # A run's input is redacted when stored, so workflow code holds a live token only by
    # minting one: its own callback's.
    token = ctx.create_callback("own", timeout=timedelta(days=1)).url.rsplit("/", 1)[1]
    _name_calls(token)[position](ctx)


ENGINE_NAMES = {
    "Engine.start:idempotency_key": lambda e, t: e.start("fails", "x", idempotency_key=t),
    "Engine.start_or_get:idempotency_key": lambda e, t: e.start_or_get(
        "fails", "x", idempotency_key=t
    ),
    "Engine.start:key_scope": lambda e, t: e.start("fails", "x", idempotency_key="k", key_scope=t),
    "Engine.start_or_get:key_scope": lambda e, t: e.start_or_get(
        "fails", "x", idempotency_key="k", key_scope=t
    ),
    "Engine.start:gate": lambda e, t: e.start("fails", "x", gate=t),
    "Engine.start_or_get:gate": lambda e, t: e.start_or_get("fails", "x", gate=t),
}
plants(*ENGINE_NAMES, "Engine.signal:name", "Engine.signal:key")


# --- the stores -------------------------------------------------------------------------
TABLES: list[str] = []


class Stack:
    def __init__(self, client: Any, tables: list[str], folder: Path) -> None:
        self.client = client
        self.ledger_table, self.idem_table = tables
        self.folder = folder
        self.invoker = MemoryInvoker()
        self.engine = Engine(
            app,
            DynamoLedger(client, self.ledger_table),
            self.invoker,
            DynamoEffectStore(client, self.idem_table),
            clock=FakeClock(),
            config=EngineConfig(
                callback_secret=b"every-stored-byte-secret-0123456789",
                callback_base_url="https://api.example.com/prod",
                inprocess_wait_threshold=timedelta(0),
                payload_offload_bytes=2048,
            ),
            keys=LocalKeys(bytes(range(32))),
            payloads=FolderPayloads(folder),
        )

    def drain(self) -> None:
        """Run every invocation due, moving the clock on while a poll or a park waits."""
        clock = self.engine.clock
        assert isinstance(clock, FakeClock)
        for _ in range(300):
            item = self.invoker.pop()
            if item is None:
                clock.advance(timedelta(minutes=10))
                self.engine.sweep()
                item = self.invoker.pop()
                if item is None:
                    return
            self.engine.resume(item.run_id, reason=item.reason)

    def url_of(self, run_id: str, name: str) -> str:
        step = next(s for s in self.engine.history(run_id) if s.name == name)
        secret = self.engine.config.callback_secret
        assert secret is not None and step.token_nonce is not None
        token = make_token(secret, run_id, step.position, step.token_nonce)
        return f"{self.engine.config.callback_base_url}/callbacks/{token}"

    def stored(self) -> list[str]:
        """Every item of both tables (as JSON) and every object in the payload folder."""
        texts: list[str] = []
        for table in (self.ledger_table, self.idem_table):
            start: dict[str, Any] | None = None
            while True:
                extra = {"ExclusiveStartKey": start} if start else {}
                page = self.client.scan(TableName=table, **extra)
                texts += [json.dumps(item) for item in page["Items"]]
                start = page.get("LastEvaluatedKey")
                if not start:
                    break
        for path in sorted(self.folder.rglob("*")):
            if path.is_file():
                texts.append(path.read_bytes().decode("latin-1"))
        return texts


def mac_of(url: str) -> str:
    return url.rsplit(".", 1)[1]


@pytest.fixture
def stack(ddb_local_client: Any, make_tables: MakeTables, tmp_path: Path) -> Stack:
    if not TABLES:  # made once (a table takes seconds on DynamoDB Local)
        TABLES.extend(make_tables(ddb_local_client))
    return Stack(ddb_local_client, TABLES, tmp_path / "payloads")


@pytest.mark.unit
def test_every_public_input_position_is_classified_and_planted() -> None:
    found = public_positions()
    unclassified = sorted(found - set(POSITIONS))
    assert not unclassified, (
        f"public input positions without a kind: {unclassified}; classify each in POSITIONS "
        "and plant the VALUE and NAME ones in a scenario"
    )
    gone = sorted(set(POSITIONS) - found)
    assert not gone, f"POSITIONS names parameters that no longer exist: {gone}"
    must_plant = {p for p, kind in POSITIONS.items() if kind in (VALUE, NAME)}
    unplanted = sorted(must_plant - PLANTED)
    assert not unplanted, f"classified but planted by no scenario: {unplanted}"


@pytest.mark.integration
@settings(
    max_examples=3,
    deadline=None,
    # Each example is a few seconds on DynamoDB Local: a failure is reported as found,
    # unshrunk (the leaked text in the message shows where it came from).
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(shape=shapes, secret=st.uuids().map(lambda u: f"secret-{u.hex}"))
def test_no_live_token_nor_secret_is_stored_from_any_value_position(
    shape: dict[str, Any], secret: str, stack: Stack
) -> None:
    engine = stack.engine
    live = engine.start("holder")
    stack.drain()
    outside = stack.url_of(live.run_id, "approval")  # the outside world's live URL
    sent = plant(shape, outside)
    run = engine.start(
        "everywhere",
        {"shape": shape, "secret": secret},
        requested_by=f"ops via {outside}",
    )
    engine.start_or_get("fails", f"note {outside}", requested_by=f"again {outside}")
    stack.drain()
    inner = stack.url_of(run.run_id, "answer")
    submitted = stack.url_of(run.run_id, "submitted")
    engine.heartbeat(inner.rsplit("/", 1)[1])
    engine.complete_callback(submitted.rsplit("/", 1)[1], result=sent)
    engine.signal(run.run_id, "echo", sent, key="echo-1", sent_by=f"bot {outside}")
    stack.drain()
    engine.complete_callback(inner.rsplit("/", 1)[1], result=plant(shape, inner))
    stack.drain()
    successor = engine.get_run(run.run_id)
    assert successor.status.value in ("SUCCEEDED", "FAILED")

    # The operators' notes: an answer by name, a cancel, a retry and a fork.
    waits = engine.start("two-waits")
    stack.drain()
    engine.complete_wait(waits.run_id, "first", result=sent, requested_by=f"ops {outside}")
    stack.drain()
    first = stack.url_of(waits.run_id, "second")
    engine.complete_callback(first.rsplit("/", 1)[1], error={"message": f"no: {outside}"})
    stack.drain()
    other = engine.start("two-waits")
    stack.drain()
    engine.complete_wait(other.run_id, "first", error={"message": f"no {outside}"})
    stack.drain()
    failed = engine.start("fails", f"note {outside}")
    stack.drain()
    engine.retry(failed.run_id, requested_by=f"retry by {outside}")
    stack.drain()
    engine.fork(failed.run_id, 1, requested_by=f"fork by {outside}")
    stack.drain()
    waiting = engine.start("two-waits")
    stack.drain()
    engine.cancel(waiting.run_id, reason=f"cancel {outside}", requested_by=f"ops {outside}")
    stack.drain()

    stored = stack.stored()
    macs = {mac_of(outside), mac_of(inner), mac_of(submitted), mac_of(first)}
    leaked = [text for text in stored for mac in macs if mac in text]
    assert not leaked, f"a live token is stored in clear: {leaked[:2]}"
    assert not [text for text in stored if secret in text], "a secret is stored in clear"
    assert any(REDACTED_TOKEN in text for text in stored)  # it was there to redact
    assert any(stack.folder.rglob("*")), "a value was offloaded to the folder store"


@pytest.mark.integration
@pytest.mark.parametrize("position", NAME_IN_CODE)
def test_a_token_in_a_name_written_by_workflow_code_is_refused(position: str, stack: Stack) -> None:
    engine = stack.engine
    run = engine.start("names", position)
    stack.drain()
    ended = engine.get_run(run.run_id)
    assert ended.status.value == "FAILED", position
    # Refused at the call: in workflow code the run fails with it; inside a step body (an
    # effect's action) the step fails for good with it.
    assert ended.error is not None and ended.error.type in ("InvalidInput", "StepFailed")
    assert "InvalidInput" in f"{ended.error.type} {ended.error.message}", ended.error
    assert "holds a callback token" in ended.error.message
    own = stack.url_of(run.run_id, "own")
    assert not [text for text in stack.stored() if mac_of(own) in text]


@pytest.mark.integration
@pytest.mark.parametrize(
    "position", [*sorted(ENGINE_NAMES), "Engine.signal:name", "Engine.signal:key"]
)
def test_a_token_in_a_name_from_outside_is_refused_with_nothing_written(
    position: str, stack: Stack
) -> None:
    engine = stack.engine
    live = engine.start("holder")
    stack.drain()
    outside = stack.url_of(live.run_id, "approval")
    token = outside.rsplit("/", 1)[1]
    before = len(stack.stored())
    with pytest.raises(InvalidInput) as refused:
        if position == "Engine.signal:name":
            engine.signal(live.run_id, token, {"x": 1})
        elif position == "Engine.signal:key":
            engine.signal(live.run_id, "echo", {"x": 1}, key=token)
        else:
            ENGINE_NAMES[position](engine, token)
    assert refused.value.field, "the refusal names the field"
    assert token not in str(refused.value)  # the message does not echo it
    assert len(stack.stored()) == before, "nothing was written"
