"""``async def`` workflows: each invocation runs the workflow on an event loop of its own.

The replay model is the plain one: every durable call takes the next position of the code
that makes it and returns what the ledger recorded there, or does the work and records it.
What async code adds is concurrency, under rules that keep positions independent of timing:

- A decorated ``async def`` step called in an async workflow (``await fetch(url)``) takes
  its position when it is *called* and returns an awaitable; its body runs when that is
  awaited, on the workflow's loop, while the bodies of other such calls run too. Every
  other durable call (``ctx.step(fetch, url)`` included) works as in a plain workflow and
  returns its value.
- A task that workflow code starts (``asyncio.gather`` over coroutines, ``create_task``, a
  ``TaskGroup``) is a branch, as in ``ctx.parallel``: it takes the next position of the
  code that starts it and numbers its own calls under it (``0004.0001``, ...). Positions
  then follow each task's own sequence of calls, never which of several concurrent calls
  finished first, so a replay meets the same names at the same positions (or raises
  ``NonDeterminismError``).
- A wait that is not over (a sleep, a callback, a retry's backoff) parks the task that met
  it: the task never resumes in this invocation, so nothing (``gather``, a ``TaskGroup``)
  sees it end early. The other tasks go on; once nothing can (no body under way, no task
  ran for a few turns of the loop), the run suspends until the earliest wait and the next
  invocation replays from the top.
- The workflow's end (its coroutine returns or raises), a signal that ends the invocation
  (a lost lease, a cancel, a hand-off, an event to reload) or a worker's death stops new
  work: bodies under way finish and are recorded (a death cancels them, a run's cancel
  stops them at their next ``await``: below), every task stops at its next new durable
  call, and the invocation ends the way the first of those says.
- A body goes on after each of its ``await``s only as a new one would start: on a look at
  the run younger than ``cancel_check_interval`` that shows no cancel. Another body may
  have held the shared loop meanwhile (a slow call, a paused worker), so the look is
  renewed when it has aged past the interval, and a cancel (or a lost lease) stops the
  body at that ``await`` (``StepRun.vouch_for_slice``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from durable.aio import Scoped, run_coroutine
from durable.core.clock import SystemClock
from durable.core.model import StepKind, StepRecord, position_key
from durable.core.tokens import refuse_token
from durable.engine.active import in_workflow_code
from durable.engine.cursor import Cursor, bind_cursor
from durable.engine.determinism import carried, observer_code
from durable.engine.interrupts import (
    BranchParked,
    BranchStopped,
    ContinueAsNew,
    DryRunComplete,
    InboxChanged,
)
from durable.engine.steps import StepRun
from durable.errors import ControlFlow, NonDeterminismError, TerminalError

if TYPE_CHECKING:
    from durable.engine.execution_parts import ExecutionParts

# What ends the invocation when raised anywhere: no new work starts after it.
_ENDS = (ControlFlow, InboxChanged, ContinueAsNew, DryRunComplete)
# Turns of the loop in which no task of the workflow ran, with no body under way, after
# which none can run any more: a task woken by another's end runs within two or three (the
# end's callback, a gather's or TaskGroup's, then the waiter), so this leaves room for
# combinators nested a few deep.
QUIET_TURNS = 10


class AsyncStep(Protocol):
    """A decorated ``async def`` step as this module calls it
    (``durable.engine.registry.StepFunction``)."""

    name: str
    fn: Callable[..., Any]
    return_annotation: Any

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class AwaitNotDurable(TerminalError):
    """An async workflow waits for something no durable call can end (an asyncio.sleep,
    an event, I/O in workflow code): the run fails, naming what to use instead."""


class AsyncRun:
    """One invocation of an ``async def`` workflow; see the module docstring."""

    def __init__(self, x: ExecutionParts) -> None:
        self.x = x
        self.tasks: list[asyncio.Task[Any]] = []  # the workflow's: its own, and steps'
        self.main: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.busy = 0  # awaited steps under way
        self.activity = 0  # steps taken by the workflow's tasks: the loop is not quiet
        self.parked: list[str | None] = []  # the due time of every parked wait
        self.signal: BaseException | None = None
        self.fatal: BaseException | None = None
        self._idle: asyncio.Future[None] | None = None
        self._frontiers: dict[tuple[int, ...], int] | None = None
        self._ended: set[int] = set()  # the cursors of tasks that ended (by id)
        # Every coroutine of the workflow's code and steps, held and closed at the end if
        # it never started (a step call whose neighbour in a gather's arguments raised, a
        # task canceled before its first step): asyncio would warn it was never awaited.
        self.calls: list[Coroutine[Any, Any, Any]] = []
        # The guard state of workflow code (``Execution.run_workflow`` entered it): the
        # workflow's tasks take it on at each of their steps; the loop's own code, and
        # step bodies, run without it.
        self._apply: Callable[[], AbstractContextManager[None]] = carried()

    # --- the invocation ------------------------------------------------------------------

    def run(self, fn: Callable[..., Coroutine[Any, Any, Any]], args: list[Any]) -> Any:
        """Run the workflow until it ends or nothing can go on, then end the invocation:
        return its value, raise its error, or suspend the run (``Execution.suspend``)."""
        x = self.x
        root = x.root
        root.parks = True  # a wait parks its task; the run suspends at the end (below)
        x.aio = self
        try:
            # A loop of its own (on a thread of its own when the caller runs one: an async
            # test driving a LocalRunner), its own code and step bodies unguarded.
            with observer_code():
                run_coroutine(self._drive(fn, args))
        finally:
            x.aio = None
            root.parks = root.stopped = False
        return self._conclude()

    async def _drive(self, fn: Callable[..., Coroutine[Any, Any, Any]], args: list[Any]) -> None:
        loop = self.loop = asyncio.get_running_loop()
        loop.set_task_factory(self._factory)
        try:
            self.main = self._track(asyncio.Task(self._branch(fn(*args), None), loop=loop))
            await self._until_quiet()
            # Everything left waits for good (a parked wait, a stop) or for one that does.
            while live := [t for t in self.tasks if not t.done()]:
                for task in live:
                    task.cancel()
                await asyncio.wait(live)
        finally:
            loop.set_task_factory(None)  # the loop's own shutdown is not workflow code
        for task in self.tasks:  # retrieved, so that asyncio logs none as lost
            if not task.cancelled():
                task.exception()
        for call in self.calls:  # called, never awaited: ended without a warning
            if inspect.getcoroutinestate(call) == inspect.CORO_CREATED:
                call.close()

    async def _until_quiet(self) -> None:
        """Until nothing can go on: no body under way, and QUIET_TURNS turns of the loop
        in which no task of the workflow took a step (or a worker's death)."""
        loop = asyncio.get_running_loop()
        quiet, seen = 0, -1
        while quiet < QUIET_TURNS and self.fatal is None:
            if self.busy:
                self._idle = loop.create_future()
                await self._idle
                quiet = 0
                continue
            await asyncio.sleep(0)
            if self.activity == seen:
                quiet += 1
            else:
                seen, quiet = self.activity, 0

    def _conclude(self) -> Any:
        """How the invocation ends: a death, then diverging code, then a signal, then the
        workflow's own end, then its parked waits (the earliest wakes the run)."""
        x = self.x
        if self.fatal is not None:
            raise self.fatal
        if x.nondeterminism is not None:  # raised in a task, whoever caught it
            raise x.nondeterminism
        if self.signal is not None:
            raise self.signal
        main = self.main
        assert main is not None
        if main.done() and not main.cancelled():
            return main.result()  # its value, or the workflow's error
        if self.parked:
            due = [d for d in self.parked if d is not None]
            raise x.suspend(min(due) if due else None)
        raise AwaitNotDurable(
            "the async workflow waits for something that is not a durable call (an "
            "asyncio.sleep, an event, a future, I/O): nothing it awaits can end. Wait with "
            "ctx.sleep or ctx.wait_for_*, and do I/O in steps"
        )

    # --- tasks ---------------------------------------------------------------------------

    def _factory(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Task[Any]:
        """Every task created on the loop: an awaited step's (tracked), one started by
        workflow code (a branch with positions of its own), or a step body's (plain)."""
        if getattr(coro, "cr_code", None) is STEP_CODE:
            scoped = Scoped(coro, self._counted)
            return self._track(asyncio.Task(self._bounded(scoped), loop=loop, **kwargs))
        if not self._in_workflow_code():
            return asyncio.Task(coro, loop=loop, **kwargs)
        try:
            cursor = self._new_branch(coro)
        except BaseException as refused:
            # No position for it (a stop, a cancel, a divergence): the task meets that at
            # its start, as its first durable call would, instead of ``create_task``
            # raising half-way through a ``gather``'s arguments.
            coro.close()  # never to run: no "coroutine was never awaited" warning
            return self._track(asyncio.Task(self._bounded(_raise(refused)), loop=loop, **kwargs))
        self.calls.append(coro)
        return self._track(asyncio.Task(self._branch(coro, cursor), loop=loop, **kwargs))

    def _in_workflow_code(self) -> bool:
        return in_workflow_code()  # a step body binds none

    def _new_branch(self, coro: Any) -> Cursor:
        """The cursor of a task workflow code starts: the next position of its creator."""
        x = self.x
        creator = x.cursor
        position = x.next_position()
        rec = x.steps.get(position)
        if rec is not None:  # the code that ran before made a call here, not a task
            called = f"a task ({getattr(coro, '__name__', 'coroutine')})"
            x.nondeterminism = NonDeterminismError(position, f"{rec.kind} {rec.name!r}", called)
            raise x.nondeterminism
        key = position_key(position)
        return Cursor(prefix=key, frontier=self._frontier(key), parent=creator, parks=True)

    def _frontier(self, prefix: tuple[int, ...]) -> int:
        """The last own index recorded under ``prefix`` before this invocation (what a
        task replays: ``Execution.replaying``), from one pass over the loaded records."""
        if self._frontiers is None:
            found: dict[tuple[int, ...], int] = {}
            for position in self.x.steps:
                key = position_key(position)
                for depth in range(1, len(key)):
                    if found.get(key[:depth], 0) < key[depth]:
                        found[key[:depth]] = key[depth]
            self._frontiers = found
        return self._frontiers.get(prefix, 0)

    async def _branch(self, coro: Coroutine[Any, Any, Any], cursor: Cursor | None) -> Any:
        """Workflow code in a task: the main coroutine (``cursor`` None: the top level's
        positions) or a task it started, on a cursor of its own."""
        scoped = Scoped(coro, self._workflow_code)
        if cursor is None:
            try:
                return await self._bounded(scoped)
            finally:
                self._stop()  # the workflow ended: nothing new starts after it
        with bind_cursor(self.x, cursor):
            try:
                return await self._bounded(scoped)
            finally:
                self._merge(cursor)

    def _merge(self, cursor: Cursor) -> None:
        """A task's compensable steps join its creator's (or, when that task ended first,
        the nearest live creator's) in position order: the same list whichever task
        finished first."""
        self._ended.add(id(cursor))
        creator = cursor.parent
        while creator is not None and id(creator) in self._ended:
            creator = creator.parent
        assert creator is not None  # the top level's cursor never ends
        creator.compensations.extend(cursor.compensations)
        creator.compensations.sort(key=lambda c: position_key(c[0]))
        cursor.compensations.clear()

    async def _bounded(self, awaitable: Any) -> Any:
        """A task's boundary: a wait that is not over, a stop or a signal ends the task's
        work in this invocation, and the task then waits until the invocation ends, so
        the code awaiting it never sees it end (a ``gather`` with ``return_exceptions``
        would take a parked wait for a result)."""
        try:
            return await awaitable
        except BranchParked as parked:
            self.parked.append(parked.due_at)
        except BranchStopped:
            pass
        except _ENDS as signal:
            if self.signal is None:
                self.signal = signal
            self._stop()
        except (Exception, asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise  # the workflow's own errors; cancellations and exits are asyncio's
        except BaseException as death:  # a worker's death (a test's SimulatedCrash)
            self._die(death)
        await asyncio.get_running_loop().create_future()  # canceled at the end

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        self.tasks.append(task)
        return task

    @contextmanager
    def _workflow_code(self) -> Iterator[None]:
        self.activity += 1
        with self._apply():
            yield

    @contextmanager
    def _counted(self) -> Iterator[None]:
        self.activity += 1
        yield

    def _stop(self) -> None:
        self.x.root.stopped = True  # every task's cursor descends from it

    def _die(self, death: BaseException) -> None:
        """A dead worker makes no further call: every task is canceled at once, bodies
        under way included, as a process that died would leave them."""
        if self.fatal is None:
            self.fatal = death
        self._stop()
        for task in self.tasks:
            task.cancel()
        self._wake()

    def _wake(self) -> None:
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    # --- awaited steps -------------------------------------------------------------------

    def started(self) -> None:
        self.busy += 1

    def finished(self) -> None:
        self.busy -= 1
        if self.busy == 0:
            self._wake()

    def on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:  # a thread without a loop: a batch's branch
            return False


def await_step(
    x: ExecutionParts, fn: AsyncStep, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Coroutine[Any, Any, Any]:
    """``fetch(url)`` for a decorated ``async def`` step in workflow code: the step takes
    its position now, and its body runs when the result is awaited."""
    run = x.aio
    if not isinstance(run, AsyncRun) or not run.on_loop():
        called = getattr(fn.fn, "__name__", fn.name)
        raise TypeError(
            f"step {fn.name!r} is async def: in a plain def workflow (or a ctx.parallel / "
            f"ctx.map branch) call ctx.step({called}, ...), which runs it to its end and "
            f"returns its value; in an async def workflow, await {called}(...)"
        )
    refuse_token(fn.name, "name", "step name", "the step's input")
    position = x.next_position()
    rec = x.recorded(position, fn.name, StepKind.STEP)
    call = _step(run, fn, position, rec, args, kwargs)
    run.calls.append(call)
    return call


async def _step(
    run: AsyncRun,
    fn: AsyncStep,
    position: str,
    rec: StepRecord | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    x = run.x
    annotation = fn.return_annotation
    if rec is not None and rec.status.final:
        return x.replay_result(rec, annotation)  # its value, or StepFailed
    # Called before a stop, a divergence or a cancel another task met, awaited after it:
    # no new body now.
    if x.cursor.halted():
        raise BranchStopped()
    x.check_cancel()
    opts = x.resolve_options(fn, None, None, None)
    step = StepRun(x, position, fn.name, rec, opts)
    run.started()
    try:
        return await step.execute_async(lambda: fn.fn(*args, **kwargs), annotation, _idle(x))
    finally:
        run.finished()


# How the loop tells an awaited step's task from one that workflow code started.
STEP_CODE = _step.__code__


async def _raise(error: BaseException) -> None:
    raise error


def _idle(x: ExecutionParts) -> Callable[[float], Coroutine[Any, Any, None]]:
    """An awaited step's in-process backoff: the loop runs other tasks meanwhile. A clock
    other than the system's (a test's fake clock) moves at once, as its ``sleep`` does."""

    async def idle(seconds: float) -> None:
        if isinstance(x.clock, SystemClock):
            await asyncio.sleep(seconds)
        else:
            x.clock.sleep(seconds)
        cursor = x.cursor
        if not cursor.compensating and cursor.halted():
            raise BranchStopped()
        x.check_cancel()  # a divergence or a cancel met meanwhile: no next attempt

    return idle
