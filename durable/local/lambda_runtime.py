"""Worker processes that run a Lambda handler the way Lambda would.

Each slot is a separate process (so a SIGKILL takes down one "invocation", exactly like
a Lambda sandbox dying), handed one event at a time with a context whose remaining time
counts down to a deadline. A process still running at its deadline is killed, as Lambda
does (by a kernel timer of its own, the pool backing it up); a dead process is replaced.
An asynchronous invocation that fails (the handler raised, hit its deadline, or its process
died) is retried twice, as Lambda retries one (``ASYNC_RETRY_DELAYS``); past that, the
engine's due times and the sweeper recover it, locally as on AWS. An invocation for a run
that already has one waiting in the queue is not queued twice (``WorkerPool.submit``).
"""

from __future__ import annotations

import contextlib
import heapq
import importlib
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

log = logging.getLogger("durable.local")


@dataclass
class LocalContext:
    """The subset of Lambda's context object that handlers use."""

    function_name: str
    aws_request_id: str
    deadline: float  # time.time() at which Lambda would stop the invocation
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    invoked_function_arn: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.time()) * 1000))


def load_handler(ref: str) -> Callable[[Any, Any], Any]:
    module, _, attribute = ref.partition(":")
    handler: Callable[[Any, Any], Any] = getattr(importlib.import_module(module), attribute)
    return handler


# A worker never outlives its invocation's deadline by more than this: it is killed at the
# deadline by a kernel timer of its own, and the pool SIGKILLs it KILL_GRACE later should
# that timer not have fired (user code that set its own SIGALRM handler or alarm). durable
# dev passes it to the engine (``DURABLE_DEADLINE_OVERRUN_SECONDS``): a lease ends this much
# after the deadline, so a takeover never comes while the old worker process lives.
KILL_GRACE = 0.25
DEADLINE_OVERRUN = 0.5
READY_TIMEOUT = 60.0  # a new worker process imports the handler before its first event
# Lambda retries a failed asynchronous invocation twice: about a minute after the first
# attempt, then two minutes after the second. The pool keeps the count and the doubling
# with Lambda's minutes as seconds (real ones, whatever --time-scale): a worker killed
# before it claimed its run, or a wake-up that met a storage error, runs again within
# seconds rather than at the sweeper's retrigger. A store down for longer than the retries
# leaves the run to the sweeper, which takes it up within a worker timeout under durable
# dev (``DURABLE_SWEEP_RETRIGGER_SECONDS``).
ASYNC_RETRY_DELAYS = (1.0, 2.0)


def _child_main(
    conn: Connection,
    handler_ref: str,
    function_name: str,
    env: Mapping[str, str],
    preload: str | None = None,
) -> None:
    # A terminal's Ctrl-C signals the whole process group. The pool ends its workers itself
    # (a SIGKILL, as a Lambda sandbox ends), so a worker must not die of the SIGINT first,
    # mid-invocation, printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(env)
    try:
        handler = load_handler(handler_ref)
        if preload:  # the user's module, imported now so a broken one is reported at once
            importlib.import_module(preload)
    except BaseException as error:  # reported to the pool, which says it
        with contextlib.suppress(OSError):
            conn.send({"failed": f"{type(error).__name__}: {error}"})
        return
    stream = f"local/{os.getpid()}"
    try:
        conn.send({"ready": os.getpid()})
    except OSError:  # the pool is gone already
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        context = LocalContext(
            function_name=function_name,
            aws_request_id=message["request_id"],
            deadline=message["deadline"],
            log_stream_name=stream,
            invoked_function_arn=f"arn:aws:lambda:local:000000000000:function:{function_name}",
        )
        # Lambda ends an invocation at its deadline, whatever it is doing: so does the
        # kernel here. SIGALRM's default action terminates the process at once, GIL or not.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, max(message["deadline"] - time.time(), 0.001))
        try:
            result = handler(message["event"], context)
            reply = {"ok": True, "result": result}
        except Exception as error:  # reported like Lambda's "Unhandled" function error
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            conn.send(reply)
        except OSError:  # the pool stopped (or killed us) meanwhile
            return


@dataclass
class Slot:
    index: int
    process: BaseProcess | None = None
    conn: Connection | None = None
    busy_with: dict[str, Any] | None = None
    started: float = 0.0
    invocations: int = 0
    deaths: int = 0
    # The process has finished an invocation: the handler is composed (a warm sandbox).
    warm: bool = False


@dataclass
class PoolStats:
    invoked: int = 0
    errors: int = 0
    killed_at_deadline: int = 0
    died: int = 0
    # Invocations not queued because one for the same run was already waiting (see submit).
    deduped: int = 0
    # Asynchronous invocations that failed and were queued again (ASYNC_RETRY_DELAYS).
    retried: int = 0
    events: list[str] = field(default_factory=list)


class WorkerPool:
    def __init__(
        self,
        handler_ref: str,
        *,
        size: int,
        timeout_seconds: float,
        env: Mapping[str, str],
        function_name: str = "durable-worker",
        on_event: Callable[[str], None] | None = None,
        preload: str | None = None,
        retry_delays: Sequence[float] = ASYNC_RETRY_DELAYS,
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one process")
        self.handler_ref = handler_ref
        self.timeout = timeout_seconds
        self.env = dict(env)
        self.function_name = function_name
        self.preload = preload
        self.retry_delays = tuple(retry_delays)
        self.on_event = on_event or (lambda text: log.info("%s", text))
        self.slots = [Slot(i) for i in range(size)]
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stats = PoolStats()
        # Why the last process that failed to start did (its exception, as text).
        self.load_error: str | None = None
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ctx = multiprocessing.get_context("spawn")
        self._ids = itertools.count(1)
        # Processes are started and killed under this lock, so none is started after stop().
        self._lifecycle = threading.Lock()
        # run id -> its queued item, while it waits for a slot (see submit).
        self._queued: dict[str, dict[str, Any]] = {}
        self._queue_lock = threading.Lock()
        # request id -> where a synchronous invocation's caller waits for its reply (call).
        self._replies: dict[str, queue.Queue[dict[str, Any]]] = {}
        # Synchronous invocations go before queued runs: a caller waits on each (the API's
        # question to the workers while it answers a request), a run's invocation does not.
        self._urgent: queue.Queue[dict[str, Any]] = queue.Queue()
        # Failed asynchronous invocations waiting for their retry: (when, order, item),
        # earliest first; moved to the queue when their time comes (``_take``).
        self._delayed: list[tuple[float, int, dict[str, Any]]] = []
        self._order = itertools.count()

    # --- lifecycle -----------------------------------------------------------------

    def start(self, ready_timeout: float = READY_TIMEOUT) -> None:
        """Start every worker process and return once each has loaded the handler."""
        for slot in self.slots:
            self._spawn(slot)
        for slot in self.slots:
            if not self._await_ready(slot, ready_timeout):
                self.stop()
                why = self.load_error or f"no answer within {ready_timeout:.0f} s"
                loaded = f"{self.handler_ref} and {self.preload}" if self.preload else ""
                raise RuntimeError(
                    f"worker process {slot.index} could not load "
                    f"{loaded or self.handler_ref}: {why}"
                )
        for slot in self.slots:
            thread = threading.Thread(
                target=self._serve, args=(slot,), name=f"worker-slot-{slot.index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Kill every worker (in flight or not) and wait for the slot threads to see it.

        Only the slot threads touch their pipes: a slot thread waiting on a killed worker
        reads the end of its pipe and returns, then the pipes are closed here. An
        invocation ended by the stop is not a worker that died; it is not reported.
        """
        with self._lifecycle:
            self._stopped.set()
            for slot in self.slots:
                process = slot.process
                if process is not None and process.is_alive():
                    process.kill()  # SIGKILL: no cleanup, like a Lambda sandbox ending
        for thread in self._threads:
            thread.join(timeout=5)
        for slot, thread in itertools.zip_longest(self.slots, self._threads):
            if thread is None or not thread.is_alive():
                self._close(slot)

    def _spawn(self, slot: Slot) -> bool:
        with self._lifecycle:
            if self._stopped.is_set():
                return False
            parent, child = self._ctx.Pipe()
            process = self._ctx.Process(
                target=_child_main,
                args=(child, self.handler_ref, self.function_name, self.env, self.preload),
                name=f"durable-worker-{slot.index}",
                daemon=True,
            )
            process.start()
            child.close()
            slot.process, slot.conn, slot.warm = process, parent, False
            return True

    def _await_ready(self, slot: Slot, timeout: float) -> bool:
        """Wait for a new process's "ready" (the handler is imported); False if it died."""
        conn = slot.conn
        if conn is None:
            return False
        try:
            if conn.poll(timeout):
                message = conn.recv()
                self.load_error = message.get("failed")
                return "ready" in message
        except (EOFError, OSError):
            self.load_error = "the process exited before it was ready"
        return False

    def _close(self, slot: Slot) -> None:
        """Kill and reap the slot's process and close its pipe (from its own thread only)."""
        with self._lifecycle:
            process, conn = slot.process, slot.conn
            slot.process = slot.conn = None
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join(timeout=2)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    # --- invocations ---------------------------------------------------------------

    def submit(self, event: dict[str, Any]) -> str:
        """Queue an asynchronous invocation (InvocationType=Event); returns its request id.

        An event for a run that already has one waiting in the queue is dropped (LOCAL ONLY;
        the waiting one's request id is returned): a worker claims the run and loads its
        latest state whatever the event says, so the second would find the run busy or
        done. The sweeper (grace 0 locally) re-invokes every run still queued after a
        start, which made most starts under a burst run twice. An event for a run whose
        invocation is already *running* is queued: the run may need another invocation.
        """
        # ``attempt`` marks an asynchronous invocation (the retried ones count it up).
        item = {"request_id": str(uuid.uuid4()), "event": event, "attempt": 0}
        with self._queue_lock:
            return self._enqueue(item)

    def _enqueue(self, item: dict[str, Any]) -> str:
        """Queue ``item`` unless its run has one waiting (see submit); under the lock."""
        event = item["event"]
        run_id = event.get("run_id") if isinstance(event, dict) else None
        waiting = self._queued.get(run_id) if isinstance(run_id, str) else None
        if waiting is not None:
            self.stats.deduped += 1
            return str(waiting["request_id"])
        if isinstance(run_id, str):
            self._queued[run_id] = item
        self.queue.put(item)
        return str(item["request_id"])

    def _retry_later(self, item: dict[str, Any]) -> float | None:
        """Queue a failed asynchronous invocation again after its delay, as Lambda does
        (the same event and request id); the delay, or None when it gets no more tries
        (a synchronous one, retries spent, the pool stopping)."""
        attempt = item.get("attempt")
        if attempt is None or attempt >= len(self.retry_delays) or self._stopped.is_set():
            return None
        delay: float = self.retry_delays[attempt]
        again = {**item, "attempt": attempt + 1}
        with self._queue_lock:
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._order), again))
        self.stats.retried += 1
        return delay

    def _release_retries(self) -> None:
        """Queue every retry whose time has come."""
        now = time.monotonic()
        with self._queue_lock:
            while self._delayed and self._delayed[0][0] <= now:
                self._enqueue(heapq.heappop(self._delayed)[2])

    def call(self, event: dict[str, Any]) -> dict[str, Any]:
        """A synchronous invocation (InvocationType=RequestResponse): queued like any
        other, and its caller waits for the handler's reply. ``{"ok": True, "result": ...}``
        or ``{"ok": False, "error": ...}`` (a function error, a timeout, a dead worker)."""
        request_id = str(uuid.uuid4())
        box: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
        with self._queue_lock:
            self._replies[request_id] = box
            self._urgent.put({"request_id": request_id, "event": event})
        # Behind other invocations, then its own deadline (a new process first, at worst).
        deadline = time.monotonic() + self.timeout * 4 + READY_TIMEOUT
        try:
            while not self._stopped.is_set() and time.monotonic() < deadline:
                with contextlib.suppress(queue.Empty):
                    return box.get(timeout=0.25)
            return {"ok": False, "error": "no worker answered (durable dev is stopping?)"}
        finally:
            with self._queue_lock:
                self._replies.pop(request_id, None)

    def _answer(self, item: dict[str, Any], reply: dict[str, Any]) -> None:
        with self._queue_lock:
            box = self._replies.get(item["request_id"])
        if box is not None:
            with contextlib.suppress(queue.Full):
                box.put_nowait(reply)

    def _take(self, timeout: float) -> dict[str, Any] | None:
        """The next queued item, no longer counted as waiting (see submit)."""
        self._release_retries()
        try:
            return self._urgent.get_nowait()
        except queue.Empty:
            pass
        try:
            item = self.queue.get(timeout=timeout)
        except queue.Empty:
            return None
        run_id = item["event"].get("run_id") if isinstance(item["event"], dict) else None
        with self._queue_lock:
            if isinstance(run_id, str) and self._queued.get(run_id) is item:
                del self._queued[run_id]
        return item

    def _warm_slot_idle(self, slot: Slot) -> bool:
        return any(s is not slot and s.warm and s.busy_with is None for s in self.slots)

    def _serve(self, slot: Slot) -> None:
        while not self._stopped.is_set():
            if not slot.warm and self._warm_slot_idle(slot):
                # Like Lambda, an idle warm sandbox gets the next event before a new one
                # (which composes the handler first: about a second, more under load).
                self._stopped.wait(0.05)
                continue
            item = self._take(timeout=0.2)
            if item is None:
                continue
            process = slot.process
            if process is None or not process.is_alive():
                self._close(slot)
                if not (self._spawn(slot) and self._await_ready(slot, READY_TIMEOUT)):
                    self._answer(item, {"ok": False, "error": "no worker process started"})
                    if not self._stopped.is_set():
                        self.stats.died += 1
                        slot.deaths += 1
                        self.on_event(
                            f"a new worker process did not start; run "
                            f"{item['event'].get('run_id', '?')}{self._then(item)}"
                        )
                    continue
            self._run(slot, item)

    def _run(self, slot: Slot, item: dict[str, Any]) -> None:
        # Our own references: the slot's fields change when the process is replaced.
        conn, process = slot.conn, slot.process
        if conn is None or process is None:
            return
        deadline = time.time() + self.timeout
        slot.busy_with, slot.started = item["event"], time.time()
        slot.invocations += 1
        self.stats.invoked += 1
        outcome = "died"
        reply: dict[str, Any] = {}
        try:
            conn.send({**item, "deadline": deadline})
            # The worker's own timer kills it at the deadline; KILL_GRACE more for a reply
            # in flight, then the pool kills it (a worker that disarmed the timer).
            if conn.poll(max(0.0, deadline - time.time()) + KILL_GRACE):
                reply = conn.recv()
                outcome = "ok" if reply.get("ok") else f"error {reply.get('error')}"
                slot.warm = True
            else:
                outcome = "timeout"
        except (EOFError, OSError):
            outcome = "died"
        finally:
            slot.busy_with = None
            self._answer(item, reply or {"ok": False, "error": f"the invocation {outcome}"})
        if self._stopped.is_set():
            return  # stop() killed it: not a worker that died
        if outcome == "died":
            process.join(timeout=2)
            if process.exitcode == -signal.SIGALRM:
                outcome = "timeout"  # its own deadline timer
        run = item["event"].get("run_id") or f"({item['event'].get('control', '?')})"
        if outcome == "timeout":
            self.stats.killed_at_deadline += 1
            self.on_event(
                f"worker {process.pid} hit its {self.timeout:g}s deadline "
                f"on run {run}: killed, as Lambda would{self._then(item)}"
            )
        elif outcome == "died":
            self.stats.died += 1
            slot.deaths += 1
            self.on_event(
                f"worker process died while running run {run}; replacing it{self._then(item)}"
            )
        elif outcome != "ok":
            self.stats.errors += 1
            self.on_event(f"worker function error on run {run}: {outcome[6:]}{self._then(item)}")
        if outcome in ("timeout", "died"):
            self._close(slot)
            if self._spawn(slot) and not self._await_ready(slot, READY_TIMEOUT):
                self._close(slot)  # the next event tries again

    def _then(self, item: dict[str, Any]) -> str:
        """What becomes of a failed invocation: retried (said with its delay), or, for an
        asynchronous one out of retries, left to the sweeper."""
        if item.get("attempt") is None:
            return ""  # synchronous: its caller has the error
        delay = self._retry_later(item)
        if delay is None:
            return "; out of retries: the sweeper takes the run up"
        return f"; retried in {delay:g} s, as Lambda retries an asynchronous invocation"

    # --- introspection ----------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        now = time.time()
        out = []
        for s in self.slots:
            process, busy = s.process, s.busy_with  # read once: a slot thread changes them
            out.append(
                {
                    "slot": s.index,
                    "pid": process.pid if process is not None else None,
                    "alive": bool(process is not None and process.is_alive()),
                    "run_id": (busy or {}).get("run_id"),
                    "busy_seconds": round(now - s.started, 3) if busy else None,
                    "invocations": s.invocations,
                    "deaths": s.deaths,
                    "warm": s.warm,  # has composed the handler (finished an invocation)
                }
            )
        return out

    def idle(self) -> bool:
        return (
            self.queue.empty()
            and self._urgent.empty()
            and not self._delayed
            and all(s.busy_with is None for s in self.slots)
        )
