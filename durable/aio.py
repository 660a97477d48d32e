"""Small asyncio helpers for ``async def`` steps and workflows (``durable.engine.async_workflow``).

A step body that is a coroutine runs to completion where a plain body would return: on a
loop of its own when the calling thread runs none (a plain workflow, a batch's branch), or
on a loop of its own on a thread of its own when the calling thread already runs one (an
``async def`` workflow's ``ctx.step(fetch, url)``, which returns the value as it does in a
plain workflow, so it cannot await on the caller's loop).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Coroutine, Generator
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# The name of the threads that finish a coroutine body for a caller that runs a loop.
BODY_THREAD = "durable-async-body"


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end and return its value (or raise its error), on a fresh loop.

    A fresh loop per body: nothing the body started (a task, a connection pool bound to
    its loop) outlives it, as nothing may outlive an invocation (Lambda freezes a stray
    task with the process and thaws it in another invocation)."""
    import asyncio  # here: a plain app's handler never pays for importing it

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # This thread runs a loop (an async workflow's) and waits here: the body runs on a
    # thread of its own, with this thread's context (the step's ``current_step()``).
    context = contextvars.copy_context()
    outcome: list[Any] = []

    def finish() -> None:
        try:
            outcome.append((True, context.run(asyncio.run, coro)))
        except BaseException as error:  # handed to the caller, whatever it is
            outcome.append((False, error))

    thread = threading.Thread(target=finish, name=BODY_THREAD, daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


class Scoped(Generic[T]):
    """Awaits ``coro`` with ``scope()`` entered around each of its steps, not around the
    whole await: a thread-local state (the determinism guard's "workflow code is running")
    then follows the coroutine, not the thread, while other tasks of the loop run between
    its steps with theirs.

    ``before``, when given, is called before each step the coroutine is sent a value (not
    one it is thrown an error: a cancellation goes in as it is); what it raises is thrown
    into the coroutine at its ``await``, as if the awaited call had raised it, and
    ``before`` is not called again: the coroutine unwinds, its cleanup's awaits
    included."""

    __slots__ = ("_before", "_coro", "_scope")

    def __init__(
        self,
        coro: Coroutine[Any, Any, T],
        scope: Callable[[], AbstractContextManager[Any]],
        before: Callable[[], None] | None = None,
    ) -> None:
        self._coro = coro
        self._scope = scope
        self._before = before

    def __await__(self) -> Generator[Any, Any, T]:
        coro, scope, before = self._coro, self._scope, self._before
        value: Any = None
        error: BaseException | None = None
        while True:
            if before is not None and error is None:
                try:
                    before()
                except BaseException as refused:  # the coroutine's to meet at its await
                    # Once: the coroutine is told to stop and unwinds, and the awaits of
                    # its cleanup (a ``finally``, an ``async with``'s exit) must not be
                    # refused in turn, as asyncio delivers a task's cancellation once.
                    value, error, before = None, refused, None
            with scope():
                try:
                    yielded = coro.send(value) if error is None else coro.throw(error)
                except StopIteration as done:
                    result: T = done.value
                    return result
            try:
                value, error = (yield yielded), None
            except BaseException as thrown:  # a cancellation: the coroutine's to handle
                value, error = None, thrown
