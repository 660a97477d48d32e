"""Where the workflow code is in its sequence of durable calls: the position counter.

The top-level code has one cursor; each branch of a batch (``ctx.parallel``, ``ctx.map``)
has its own, whose positions are paths under the batch's position (``0004.0002.0001``
is the first call of branch 2 of the batch at ``0004``). A branch's cursor is bound to the
thread running it through a context variable, so the same ``Context`` object works in
every branch and the engine's code never passes cursors around: ``Execution.cursor``
finds the one of the calling thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from durable.core.model import position_key, position_path

# (position, undo, result, args, kwargs) of a completed compensable step
Compensation = tuple[str, Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]]


@dataclass(slots=True, eq=False)
class Cursor:
    prefix: tuple[int, ...] = ()
    counter: int = 0
    # The last own index recorded before this view was loaded: the code before it runs
    # again on every replay (``Execution.replaying``, ``ctx.logger``).
    frontier: int = 0
    compensations: list[Compensation] = field(default_factory=list)
    compensating: bool = False  # compensation steps run even after a cancel request
    # Set by the batch when it is decided or the run must stop: the branch replays what
    # it recorded and ends where it would do new work (``BranchStopped``).
    stopped: bool = False
    # Rebuilding a decided batch's compensations: replay records only, never run a body.
    # ``limit`` is the branch's last own index when the batch was decided (a canceled
    # branch's compensations follow it).
    replay_only: bool = False
    limit: int | None = None
    # The cursor of the code that started this branch's batch (None at the top level):
    # a branch stops when any batch it is nested in stops it.
    parent: Cursor | None = None
    # Whether a wait that is not over parks this code (a branch: its batch decides) or
    # suspends the run (the top level).
    parks: bool = False

    def halted(self) -> bool:
        """Whether this code, or a batch branch it runs in, was told to stop."""
        cursor: Cursor | None = self
        while cursor is not None:
            if cursor.stopped:
                return True
            cursor = cursor.parent
        return False

    def path(self, index: int) -> str:
        return position_path(*self.prefix, index)

    def own_index(self, position: str) -> int | None:
        """The index at this cursor's level of a position under it, else None."""
        key = position_key(position)
        depth = len(self.prefix)
        if len(key) <= depth or key[:depth] != self.prefix:
            return None
        return key[depth]

    def last_index(self, positions: Iterable[str]) -> int:
        return max((i for p in positions if (i := self.own_index(p)) is not None), default=0)


_bound: ContextVar[tuple[object, Cursor] | None] = ContextVar("durable_cursor", default=None)


def bound_cursor(owner: object) -> Cursor | None:
    """The cursor bound to this thread for ``owner`` (an Execution), if any."""
    bound = _bound.get()
    if bound is not None and bound[0] is owner:
        return bound[1]
    return None


@contextmanager
def bind_cursor(owner: object, cursor: Cursor) -> Iterator[None]:
    token = _bound.set((owner, cursor))
    try:
        yield
    finally:
        _bound.reset(token)
