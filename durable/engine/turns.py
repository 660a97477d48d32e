"""Whose turn it is to run a run's workflow code while its branches run on threads.

The engine's per-invocation state (the position counters, the step map, the run item
and its lease, the compensation lists) was written for one thread. Rather than lock each
piece, the branches of a batch take turns: a thread runs workflow code and every durable
call only while it holds the turn, and gives it up while it does something slow that
touches none of that state: a step body, an in-process sleep, waiting for a nested batch.
So branches are concurrent where the time goes (I/O in step bodies) and sequential where
the ledger's state changes, and a run without a batch never creates a turn at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Turn:
    """A lock that knows its holder, so code that may or may not hold it can give it up
    (``released``) or take it (``held``) without deadlocking itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: int | None = None

    def acquire(self) -> None:
        self._lock.acquire()
        self._holder = threading.get_ident()

    def release(self) -> None:
        self._holder = None
        self._lock.release()

    def mine(self) -> bool:
        return self._holder == threading.get_ident()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Around slow work: let the other branches run meanwhile, if this thread holds
        the turn (a step body called outside any batch holds nothing to give up)."""
        if not self.mine():
            yield
            return
        self.release()
        try:
            yield
        finally:
            self.acquire()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Around a durable call made from a step body (checkpoint, heartbeat), which
        runs without the turn: wait for it, unless this thread already has it."""
        if self.mine():
            yield
            return
        self.acquire()
        try:
            yield
        finally:
            self.release()
