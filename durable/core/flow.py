"""Flow control: at most N runs of a workflow active at once (per key of the input, if
asked), and at most N runs starting per period, held across every worker.

Each limit is a *gate*: one item in the ledger table (``GATE#<name>``) holding who has a
slot, who waits for one (in order) and, for a rate, when the last starts were booked.
Every decision reads the gate, computes its next state with the pure rules below, and
writes it back only if nobody wrote it since (a version check, like a lease's fence); a
lost race reads again and decides again. The rules are here, once, so that the memory
ledger and DynamoDB cannot disagree about who gets in.

Why a run waits without polling, and why no wake-up is lost: a run that finds the gate
full joins its queue and suspends with no due time. A run that leaves the gate (it ended,
or was canceled) removes itself and then wakes the queue's first runs that now fit, as an
outside event does (its inbox is bumped), so a waiter that is just suspending sees the
bump, fails its suspension write and looks at the gate again. Two backstops cover a
worker that died between its final write and leaving the gate, or between leaving and
waking: a waiting run also comes back after ``recheck`` on its own, and then takes out
of the gate the runs ahead of it that ended (``stale_ahead``): waiters at the head of
the line (a run canceled while it waited, whose worker died before leaving), and, once
it is first in line, holders (``stale_holders``).

A rate books each start at the earliest moment that keeps every window of ``period`` at
``limit`` starts or fewer: the ``limit``-th last booking plus ``period``, or now. The
run then sleeps until its booked time (a timer, as a sleep is), so a burst is spread out
in arrival order, durably, and a booking is never made twice (the run records it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from durable.core.model import format_time, parse_time
from durable.errors import RegistrationError

MAX_HOLDERS = 1000  # slots one gate item can hold with room for its queue
MAX_RATE = 1000  # bookings one gate item remembers
MAX_QUEUE = 5000  # runs one gate item holds in line (beyond: they come back later)
KEY_CHARS = 128  # a key value longer than this is cut (gate names stay small)

KeyFn = Callable[[Any], Any]
_READABLE = " !$&'()*+,-./:;<=>?@[]^_`{|}~"  # kept as is in a gate's name: all but % and #


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` runs active at once; with ``key`` (a field of the input, dotted
    for a nested one, or a function of the input) at most ``limit`` per key value."""

    limit: int
    key: str | KeyFn | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or not 1 <= self.limit <= MAX_HOLDERS:
            raise RegistrationError(
                f"concurrency limit must be an int from 1 to {MAX_HOLDERS}, not {self.limit!r}"
            )
        _check_key(self.key, "concurrency")


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` runs starting in any ``period``; the rest start later, in order.
    ``key`` as for ``Concurrency``."""

    limit: int
    period: timedelta
    key: str | KeyFn | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or not 1 <= self.limit <= MAX_RATE:
            raise RegistrationError(
                f"rate limit must be an int from 1 to {MAX_RATE}, not {self.limit!r}"
            )
        if not isinstance(self.period, timedelta) or self.period < timedelta(seconds=1):
            raise RegistrationError(
                "rate limit period must be a datetime.timedelta of at least one second"
            )
        _check_key(self.key, "rate limit")


def _check_key(key: object, what: str) -> None:
    if key is None or callable(key):
        return
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise RegistrationError(
            f"{what} key must be a field name of the input ('customer', 'order.customer') "
            f"or a function of the input, not {key!r}"
        )


def concurrency_of(value: int | Concurrency | None) -> Concurrency | None:
    """``concurrency=`` as registered: an int is a limit for the whole workflow."""
    if value is None or isinstance(value, Concurrency):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise RegistrationError(
            f"concurrency= takes an int or a durable.Concurrency, not {type(value).__name__}"
        )
    return Concurrency(value)


def key_value(key: str | KeyFn | None, value: Any, workflow: str) -> str:
    """The gate key of one run's input: '' for a limit on the whole workflow. A key the
    input does not have is a clear error when the run is started (nothing is written)."""
    if key is None:
        return ""
    if callable(key):
        try:
            found = key(value)
        except Exception as e:  # the function's own error: the input lacks what it reads
            from durable.errors import InvalidInput

            missing = f"input.{e.args[0]}" if isinstance(e, KeyError) and e.args else "input"
            name = getattr(key, "__name__", "key function")
            raise InvalidInput(
                f"workflow {workflow!r} limits runs per the key {name} finds in the input, "
                f"which failed on this input ({type(e).__name__}: {e}); send an input it "
                "can read",
                field=missing,
            ) from e
    else:
        found = value
        for part in key.split("."):
            if isinstance(found, dict) and part in found:
                found = found[part]
            elif not isinstance(found, dict) and hasattr(found, part):
                found = getattr(found, part)
            else:
                from durable.errors import InvalidInput

                raise InvalidInput(
                    f"workflow {workflow!r} limits runs per {key!r}, which its input lacks; "
                    f"send an input with {key!r}",
                    field=f"input.{key}",
                )
    if found is None:
        # Taken as the text "None", every run without a key would share one gate.
        from durable.errors import InvalidInput

        where = f"input.{key}" if isinstance(key, str) else "input"
        name = key if isinstance(key, str) else getattr(key, "__name__", "key function")
        raise InvalidInput(
            f"workflow {workflow!r} limits runs per {name!r}, which is null (None) in this "
            "input; send a value (runs without one would all wait behind one gate)",
            field=where,
        )
    if _sealed(found):
        from durable.errors import InvalidInput

        where = f"input.{key}" if isinstance(key, str) else "input"
        raise InvalidInput(
            f"workflow {workflow!r} limits runs per {where}, a secret-typed value: a gate's "
            "name holds its key in clear in the ledger, and a sealed value differs in every "
            "run; key on a field that is not secret (an account or customer id)",
            field=where,
        )
    text = str(found)
    # A gate's name holds its key in clear (in the ledger, and a run's record names its
    # gate): a token in the key would be stored where no scrub reaches it.
    from durable.core.tokens import refuse_token  # here: flow is imported by ports

    refuse_token(
        text,
        f"input.{key}" if isinstance(key, str) else "input",
        f"the flow-control key of workflow {workflow!r}",
        "another field of the input (key on an id, not a credential)",
    )
    return text[:KEY_CHARS]


def _sealed(value: Any) -> bool:
    """Whether a key reads a sealed secret (``durable.core.secrets``' stored form)."""
    from durable.core.secrets import SEALED

    return SEALED in str(value)


def gate_name(kind: str, workflow: str, key: str) -> str:
    """``C`` (concurrency), ``R`` (rate) or ``S`` (a schedule's), the workflow and the key
    value. The workflow's ``%`` and ``#`` are escaped (the key comes last), so no two
    workflow and key pairs share a gate: ``a#b`` with key ``c`` is not ``a`` with ``b#c``."""
    return f"{kind}#{quote(workflow, safe=_READABLE)}#{key}"


@dataclass(frozen=True)
class GateState:
    """A gate item as read: ``version`` 0 means there is none yet."""

    holders: tuple[str, ...] = ()  # runs holding a slot, in the order they got it
    queue: tuple[str, ...] = ()  # runs waiting for a slot, first come first served
    booked: tuple[str, ...] = ()  # a rate's last bookings (times, oldest first)
    version: int = 0


def enter(state: GateState, run_id: str, limit: int) -> tuple[GateState | None, bool]:
    """Whether ``run_id`` holds a slot, and the gate's new state (None: unchanged).

    A run gets a slot when its place in line (its index in the queue, or the queue's end
    for a newcomer) is within the free slots: nobody overtakes an earlier waiter, and
    when several slots free up at once, that many waiters may go. Asking again is
    harmless: a holder stays one, a waiter keeps its place."""
    if run_id in state.holders:
        return None, True
    place = state.queue.index(run_id) if run_id in state.queue else len(state.queue)
    if place < limit - len(state.holders):
        queue = tuple(r for r in state.queue if r != run_id)
        return replace(state, holders=(*state.holders, run_id), queue=queue), True
    if run_id in state.queue:
        return None, False
    return replace(state, queue=(*state.queue, run_id)), False


def leave(
    state: GateState, run_ids: tuple[str, ...], limit: int
) -> tuple[GateState | None, tuple[str, ...]]:
    """The gate without ``run_ids`` (holders or waiters), and the waiters that now fit
    (to wake); None when none of them was in it."""
    gone = set(run_ids)
    if not gone & (set(state.holders) | set(state.queue)):
        return None, ()
    new = replace(
        state,
        holders=tuple(r for r in state.holders if r not in gone),
        queue=tuple(r for r in state.queue if r not in gone),
    )
    return new, new.queue[: max(0, limit - len(new.holders))]


def book(
    state: GateState, now: datetime, limit: int, period: timedelta
) -> tuple[GateState, datetime]:
    """Book one start: the earliest moment at or after ``now`` (and after the last
    booking) that leaves at most ``limit`` bookings in every window of ``period``.

    Bookings stay in order, so any ``limit + 1`` consecutive ones span at least
    ``period``: the ``limit``-th last plus ``period`` is what the new one needs."""
    times = [parse_time(t) for t in state.booked]
    at = now
    if times:
        at = max(at, times[-1])
    if len(times) >= limit:
        at = max(at, times[-limit] + period)
    kept = (*state.booked, format_time(at))[-limit:]
    return replace(state, booked=kept), at


def stale_holders(holders: tuple[str, ...], active: Callable[[str], bool]) -> tuple[str, ...]:
    """The holders whose runs are no longer active (they ended, or expired, without
    leaving the gate): their slots are free."""
    return tuple(r for r in holders if not active(r))


def stale_ahead(
    state: GateState, run_id: str, limit: int, active: Callable[[str], bool]
) -> tuple[str, ...]:
    """What keeps the waiter ``run_id`` out although it ended without leaving the gate
    (its worker died between its final write and ``leave``): to take out of the gate.

    A waiter that ended never comes back to take its slot, so one at the head of the
    line would hold everyone behind it forever, however many slots free up. The line is
    looked at from its head: each waiter ahead of ``run_id`` that ended is stale, and the
    first that is still active stops the look (it is the one to look further, on its own
    next look). With nobody active ahead and every slot taken, ``run_id`` is the first in
    line, and the holders that ended are stale too. So a waiter reads one run per look
    (the head), or the holders when it is first; a dead run anywhere in the line reaches
    the head and is taken out there. ``()`` for a run not in line (a newcomer joins the
    line first, and looks at its next look)."""
    if run_id not in state.queue:
        return ()
    stale: list[str] = []
    for ahead in state.queue[: state.queue.index(run_id)]:
        if active(ahead):
            return tuple(stale)
        stale.append(ahead)
    if len(state.holders) >= limit:
        stale += stale_holders(state.holders, active)
    return tuple(stale)
