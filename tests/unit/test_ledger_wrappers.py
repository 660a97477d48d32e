"""Every wrapper of the ledger port implements every method of it, writes above all (issue 44).

The wrappers used to pass what they did not implement on by ``__getattr__``: a write added
to the port later went past the write boundary (and the history cache, the read-only
ledger of a deploy check...) with nobody deciding it should, and mypy could not tell. Now
the port is split into ``LedgerReads`` and ``LedgerWrites``, each wrapper subclasses
``Ledger`` explicitly (mypy then refuses to build one that leaves a method out), and these
tests hold the same at run time: no ``__getattr__``, every method written out below the
Protocol, and the write boundary scrubbing a token out of every write that takes a value.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest

from durable.adapters.memory import MemoryLedger
from durable.adapters.otel import TracingLedger
from durable.core.claim_check import ClaimCheck
from durable.core.history_cache import CachingLedger
from durable.core.ledger_forward import ForwardReads
from durable.core.ledger_watch import WatchedLedger
from durable.core.model import RunStatus, SignalRecord, StepKind, StepStatus
from durable.core.ports import (
    CRASH_TARGETS,
    LEDGER_READS,
    LEDGER_WRITES,
    ChildReport,
    EffectStore,
    Invoker,
    Ledger,
    LedgerReads,
    LedgerWrites,
    RunGuard,
)
from durable.core.usage import UsageLedger
from durable.core.write_boundary import REDACTED_TOKEN, TOKEN_TEXT, WriteBoundary
from durable.engine.deploy_check import CheckWrote, ReadOnlyLedger, Refusing
from durable.local.console import ConsoleLedger
from durable.ops.observability import MeteredLedger
from tests.support.records import make_run, make_step, t

pytestmark = pytest.mark.unit

WRAPPERS: list[type[Any]] = [
    WriteBoundary,
    ClaimCheck,
    UsageLedger,
    CachingLedger,
    WatchedLedger,
    TracingLedger,
    ConsoleLedger,
    MeteredLedger,
    ReadOnlyLedger,
]
METHODS = (*LEDGER_READS, *LEDGER_WRITES)


def _methods(protocol: type[Any]) -> set[str]:
    """The methods a Protocol class declares itself (not inherited ones, not attributes)."""
    return {
        name
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def call_with_placeholders(method: Callable[..., Any]) -> Any:
    """``method`` called with None for each parameter it requires: for a method that must
    refuse before it looks at its arguments."""
    params = inspect.signature(method).parameters.values()
    args = [None for p in params if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty]
    kwargs = {p.name: None for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
    return method(*args, **kwargs)


# --- the port's two halves ---------------------------------------------------------------


def test_reads_and_writes_split_the_ports_methods_exactly() -> None:
    """A method added to the port must be put in one half: ``Ledger`` declares none of its
    own, and the name tuples are the halves' methods, with no name in both."""
    assert _methods(Ledger) == set()
    assert set(LEDGER_READS) == _methods(LedgerReads)
    assert set(LEDGER_WRITES) == _methods(LedgerWrites)
    assert not set(LEDGER_READS) & set(LEDGER_WRITES)
    assert len(METHODS) == len(set(METHODS))
    assert "shards" in vars(LedgerReads)  # the one attribute: a read


def test_the_crash_targets_name_every_method_of_the_ledger() -> None:
    ledger = {target.split(".", 1)[1] for target in CRASH_TARGETS if target.startswith("ledger.")}
    assert ledger == set(METHODS)


# --- each wrapper implements each method itself ---------------------------------------------


@pytest.mark.parametrize("cls", WRAPPERS, ids=lambda c: c.__name__)
def test_no_wrapper_forwards_by_getattr(cls: type[Any]) -> None:
    assert [k.__name__ for k in cls.__mro__ if "__getattr__" in vars(k)] == []


@pytest.mark.parametrize("cls", WRAPPERS, ids=lambda c: c.__name__)
def test_every_wrapper_implements_every_method_below_the_protocol(cls: type[Any]) -> None:
    """Each wrapper subclasses ``Ledger`` (so mypy checks it is whole), and no method it
    answers with is the Protocol's empty body, which would do nothing and return None."""
    assert Ledger in cls.__mro__
    for name in METHODS:
        found = getattr(cls, name, None)
        assert found is not None, f"{cls.__name__} has no {name}"
        assert found is not getattr(Ledger, name), f"{cls.__name__}.{name} is the Protocol's"
    assert isinstance(vars(ForwardReads)["shards"], property)


def test_the_deploy_checks_stand_ins_implement_their_ports() -> None:
    assert "__getattr__" not in vars(Refusing)
    assert {Invoker, EffectStore} <= set(Refusing.__mro__)
    for port in (Invoker, EffectStore):
        for name in _methods(port):
            assert getattr(Refusing, name) is not getattr(port, name)
            with pytest.raises(CheckWrote, match=f"effects.{name}"):
                call_with_placeholders(getattr(Refusing("effects"), name))


@pytest.mark.parametrize("name", LEDGER_WRITES)
def test_the_read_only_ledger_refuses_every_write(name: str) -> None:
    """Every write, called, raises ``CheckWrote`` naming it and writes nothing: the five
    the old list of names left out (a child's start or finish, a gate, a heartbeat)
    included. Reads pass."""
    memory = MemoryLedger()
    read_only = ReadOnlyLedger(memory)
    with pytest.raises(CheckWrote, match=f"ledger.{name}"):
        call_with_placeholders(getattr(read_only, name))
    assert read_only.get_run("RUN1") is None and read_only.shards == memory.shards


# --- the write boundary scrubs every value written -------------------------------------------

# A text with a minted token's shape, built here so the test stands on the pattern alone.
TOKEN = "01KDVDNA00NH4Y4J45KWBET2C0" + ".0003." + "aZ09_-" * 7 + "x"
assert TOKEN_TEXT.fullmatch(TOKEN)
SAID = f"see https://api.example.com/callbacks/{TOKEN} now"
JSON_SAID = json.dumps(SAID)


class Received(MemoryLedger):
    """A memory ledger that keeps the repr of what each write was given: what crossed the
    boundary, before the memory ledger's own rule (``durable.core.stored_bytes``) could
    redact anything."""

    def __init__(self) -> None:
        super().__init__()
        self.given: dict[str, str] = {}


def _recording(name: str) -> Callable[..., Any]:
    def write(self: Received, *args: Any, **kwargs: Any) -> Any:
        self.given[name] = self.given.get(name, "") + repr((args, kwargs))
        return getattr(MemoryLedger, name)(self, *args, **kwargs)

    return write


for _name in LEDGER_WRITES:
    setattr(Received, _name, _recording(_name))


def test_the_write_boundary_scrubs_a_token_from_every_write_that_takes_a_value() -> None:
    """GIVEN a token in each value of each write method that takes one WHEN the writes go
    through the boundary onto a memory ledger THEN what the ledger was given holds none
    (the redaction mark instead), and neither does anything it stored."""
    inner = Received()
    ledger = WriteBoundary(inner)
    every = tuple(s.value for s in RunStatus)

    ledger.create_run(make_run("P", input=JSON_SAID))
    claim = ledger.claim("P", "w", now=t(1), lease_until=t(900), stale_before=t(1))
    assert claim is not None
    guard = RunGuard(fence=claim.run.fence, owner="w")
    ledger.update_run("P", guard, {"output": JSON_SAID, "cancel_reason": SAID})
    ledger.write_step(make_step("P", "0001", output=JSON_SAID, error_summary=SAID), guard)
    running = make_step(
        "P", "0002", status=StepStatus.RUNNING, output=None, checkpoint={"state": JSON_SAID}
    )
    ledger.write_step_fenced(running, guard, {"cancel_reason": SAID})

    def child_record(position: str, child: str) -> Any:
        return make_step(
            "P",
            position,
            status=StepStatus.WAITING,
            kind=StepKind.CHILD,
            output=None,
            error_summary=SAID,  # the detail names the child alone, or the report is refused
            detail={"child": child},
        )

    ledger.start_child(child_record("0003", "C1"), guard, make_run("C1", input=JSON_SAID))
    ledger.start_children(
        [child_record("0004", "C2"), child_record("0005", "C3")],
        guard,
        [make_run("C2", input=JSON_SAID), make_run("C3", input=JSON_SAID)],
    )
    signal = SignalRecord("P", "go", "01A", JSON_SAID, t(2))
    ledger.add_signal(signal, now=t(2))
    consumed = make_step("P", "0006", kind=StepKind.SIGNAL, output=JSON_SAID)
    assert ledger.consume_signal(consumed, signal, guard) is consumed

    wait = make_step(
        "P",
        "0007",
        status=StepStatus.WAITING,
        kind=StepKind.CALLBACK,
        output=None,
        token_hash="h",
        expires_at=t(1000),
    )
    ledger.write_step(wait, guard)
    beat = make_step(
        "P",
        "0007",
        status=StepStatus.WAITING,
        kind=StepKind.CALLBACK,
        output=None,
        token_hash="h",
        expires_at=t(2000),
        detail={"heartbeat": SAID},
    )
    ledger.extend_wait(beat, token_hash="h", now=t(3))
    answered = make_step("P", "0007", kind=StepKind.CALLBACK, output=JSON_SAID, token_hash="h")
    ledger.complete_waiting(answered, token_hash="h", now=t(4))

    child_claim = ledger.claim("C1", "w2", now=t(5), lease_until=t(900), stale_before=t(5))
    assert child_claim is not None
    child_guard = RunGuard(fence=child_claim.run.fence, owner="w2")
    report = ChildReport("P", "0003", "C1", StepStatus.DONE, output=JSON_SAID)
    _, taken = ledger.finish_child("C1", child_guard, {"output": JSON_SAID}, report, now=t(6))
    assert taken

    ledger.write_step(make_step("P", "0008", status=StepStatus.TERMINAL_FAILED), guard)
    reopen = make_step("P", "0008", status=StepStatus.PENDING, output=None, error_summary=SAID)
    ledger.operate(
        "P",
        statuses=every,
        changes={"cancel_reason": SAID},
        operation={"action": "retry", "reason": SAID},
        reopen=reopen,
    )
    ledger.continue_run("P", guard, {"output": JSON_SAID}, make_run("S", input=JSON_SAID))

    takes_a_value = set(LEDGER_WRITES) - {
        *("purge_leftovers", "delete_run", "claim", "write_gate", "claim_trigger")
    }
    assert set(inner.given) >= takes_a_value  # each was called, and reached the ledger
    for name in takes_a_value:
        assert TOKEN not in inner.given[name], f"{name} was given a live token"
        assert REDACTED_TOKEN in inner.given[name], f"{name} was given no value to scrub"
    stored = repr((inner._runs, inner._steps, inner._signals, inner._gates))
    assert TOKEN not in stored and REDACTED_TOKEN in stored
