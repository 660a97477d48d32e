"""What the simulated world saw: step bodies started, effects performed, values returned
to workflow code, callback tokens handed out, outside events and their answers.

Workflow code and step bodies write here (never through the engine's ports), so the
invariants can compare what happened with what the ledger says. ``seq`` is the
scheduler's logical time, ``at`` the fake clock, ``actor`` who did it.
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Stamp:
    seq: int
    at: str
    actor: str
    zombie: bool = False  # a worker whose lease another worker has taken since


@dataclass(frozen=True)
class BodyStart:
    """A step body (or a submit, an undo, a condition's poll) began."""

    stamp: Stamp
    run: str  # run key: "<run id>.<incarnation>"
    position: str  # "" for polls (no step context)
    attempt: int
    kind: str  # step | submit | send | undo | poll
    semantics: str


@dataclass(frozen=True)
class Mail:
    """A callback token handed to the outside world by a submit or a send step."""

    stamp: Stamp
    run_id: str
    run: str
    position: str
    name: str


@dataclass(frozen=True)
class Event:
    """An outside event (or operator decision) and how the engine answered it."""

    stamp: Stamp
    kind: str  # start | callback | signal | cancel | retry | fork | purge
    run_id: str | None
    run: str | None  # run key when known (incarnation at the time)
    outcome: str  # "ok", "crashed" or the error's type
    done: Stamp  # when the engine answered (a cancel is acknowledged then)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    name: str
    detail: str
    seq: int = 0


@dataclass
class Journal:
    bodies: list[BodyStart] = field(default_factory=list)
    effects: dict[str, list[Stamp]] = field(default_factory=dict)  # key -> each call
    external: dict[str, str] = field(default_factory=dict)  # key -> reference (outside)
    # (run key, op index) -> what workflow code got back, every time it got there
    # (run, op index), or (run, "i.j.k") for op k of branch j of the batch at op i
    observed: dict[tuple[str, int | str], list[tuple[str, Stamp]]] = field(default_factory=dict)
    mailbox: dict[str, Mail] = field(default_factory=dict)  # token -> where it came from
    answered: set[str] = field(default_factory=set)  # tokens the outside world used
    polls: dict[tuple[str, int | str], int] = field(default_factory=dict)
    runs_seen: list[str] = field(default_factory=list)  # run ids workflow code ran in
    events: list[Event] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    # Each delivery of a schedule's fire: (fire key, its verdict, the run, run now or not).
    fires: list[tuple[str, str, str | None, bool]] = field(default_factory=list)
    # What the schedule made the system do, by name (``tests/simulation/coverage.py``):
    # a durable call workflow code made, an operator's action, an outside event.
    produced: Counter[str] = field(default_factory=Counter)
    # Which run a parent's record for a child is about: (parent id, the parent's creation,
    # position, child id) -> (when the parent wrote that, the creation of the run then
    # under the child's id), as ``World._child_starts`` keeps it. A keyed child's id
    # outlives its run, and a record's own ``updated_at`` moves when a look settles it,
    # so neither says whether the run now under the id is the record's
    # (``child_reports_match``, ``attached_result_is_chain_end``).
    child_starts: dict[tuple[str, str, str, str], tuple[str, str | None]] = field(
        default_factory=dict
    )

    def violate(self, name: str, detail: str, seq: int) -> None:
        self.violations.append(Violation(name, detail, seq))


def typed(value: Any) -> str:
    """A canonical text of a value *with its types*: ``1`` and ``1.0``, a tuple and a
    list, a model and its dict all differ."""
    if isinstance(value, BaseModel):
        return f"{type(value).__name__}({typed(value.model_dump())})"
    if isinstance(value, dict):
        items = ", ".join(f"{typed(k)}: {typed(v)}" for k, v in sorted(value.items(), key=str))
        return f"dict{{{items}}}"
    if isinstance(value, list | tuple | set | frozenset):
        members = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        return f"{type(value).__name__}[{', '.join(typed(v) for v in members)}]"
    if isinstance(value, dt.datetime):
        return f"datetime({value.isoformat()})"
    if isinstance(value, uuid.UUID | enum.Enum):
        return f"{type(value).__name__}({value})"
    return f"{type(value).__name__}({value!r})"
