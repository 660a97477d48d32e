"""Worker processes that run a Lambda handler the way Lambda would.

Each slot is a separate process (so a SIGKILL takes down one "invocation", exactly like
a Lambda sandbox dying), handed one event at a time with a context whose remaining time
counts down to a deadline. A process still running at its deadline is killed, as Lambda
does; a dead process is replaced. Asynchronous invocations are not retried here: the
engine's due times and the sweeper are what recover a lost invocation, locally as on AWS.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import multiprocessing
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
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


def _child_main(
    conn: Connection, handler_ref: str, function_name: str, env: Mapping[str, str]
) -> None:
    os.environ.update(env)
    handler = load_handler(handler_ref)
    stream = f"local/{os.getpid()}"
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        context = LocalContext(
            function_name=function_name,
            aws_request_id=message["request_id"],
            deadline=message["deadline"],
            log_stream_name=stream,
            invoked_function_arn=f"arn:aws:lambda:local:000000000000:function:{function_name}",
        )
        try:
            result = handler(message["event"], context)
            conn.send({"ok": True, "result": result})
        except Exception as error:  # reported like Lambda's "Unhandled" function error
            conn.send({"ok": False, "error": f"{type(error).__name__}: {error}"})


@dataclass
class Slot:
    index: int
    process: BaseProcess | None = None
    conn: Connection | None = None
    busy_with: dict[str, Any] | None = None
    started: float = 0.0
    invocations: int = 0
    deaths: int = 0


@dataclass
class PoolStats:
    invoked: int = 0
    errors: int = 0
    killed_at_deadline: int = 0
    died: int = 0
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
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one process")
        self.handler_ref = handler_ref
        self.timeout = timeout_seconds
        self.env = dict(env)
        self.function_name = function_name
        self.on_event = on_event or (lambda text: log.info("%s", text))
        self.slots = [Slot(i) for i in range(size)]
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stats = PoolStats()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ctx = multiprocessing.get_context("spawn")
        self._ids = itertools.count(1)

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        for slot in self.slots:
            self._spawn(slot)
            thread = threading.Thread(
                target=self._serve, args=(slot,), name=f"worker-slot-{slot.index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopped.set()
        for slot in self.slots:
            self._kill(slot)
        for thread in self._threads:
            thread.join(timeout=2)

    def _spawn(self, slot: Slot) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_child_main,
            args=(child, self.handler_ref, self.function_name, self.env),
            name=f"durable-worker-{slot.index}",
            daemon=True,
        )
        process.start()
        child.close()
        slot.process, slot.conn = process, parent

    def _kill(self, slot: Slot) -> None:
        if slot.process is not None and slot.process.is_alive():
            slot.process.kill()  # SIGKILL: no cleanup, like a Lambda sandbox ending
            slot.process.join(timeout=2)
        if slot.conn is not None:
            slot.conn.close()
        slot.process = slot.conn = None

    # --- invocations ---------------------------------------------------------------

    def submit(self, event: dict[str, Any]) -> str:
        """Queue an asynchronous invocation (InvocationType=Event); returns its request id."""
        request_id = str(uuid.uuid4())
        self.queue.put({"request_id": request_id, "event": event})
        return request_id

    def _serve(self, slot: Slot) -> None:
        while not self._stopped.is_set():
            try:
                item = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if slot.process is None or not slot.process.is_alive():
                self._spawn(slot)
            self._run(slot, item)

    def _run(self, slot: Slot, item: dict[str, Any]) -> None:
        assert slot.conn is not None and slot.process is not None
        deadline = time.time() + self.timeout
        slot.busy_with, slot.started = item["event"], time.time()
        slot.invocations += 1
        self.stats.invoked += 1
        outcome = "died"
        try:
            slot.conn.send({**item, "deadline": deadline})
            # A little grace past the deadline for the reply to arrive.
            if slot.conn.poll(max(0.0, deadline - time.time()) + 0.5):
                reply = slot.conn.recv()
                outcome = "ok" if reply.get("ok") else f"error {reply.get('error')}"
            else:
                outcome = "timeout"
        except (EOFError, OSError, BrokenPipeError):
            outcome = "died"
        finally:
            slot.busy_with = None
        run = item["event"].get("run_id", "?")
        if outcome == "timeout":
            self.stats.killed_at_deadline += 1
            self.on_event(
                f"worker {slot.process.pid} hit its {self.timeout:.0f}s deadline "
                f"on run {run}: killed, as Lambda would"
            )
        elif outcome == "died":
            self.stats.died += 1
            slot.deaths += 1
            self.on_event(f"worker process died while running run {run}; replacing it")
        elif outcome != "ok":
            self.stats.errors += 1
            self.on_event(f"worker function error on run {run}: {outcome[6:]}")
        if outcome in ("timeout", "died"):
            self._kill(slot)
            if not self._stopped.is_set():
                self._spawn(slot)

    # --- introspection ----------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        now = time.time()
        return [
            {
                "slot": s.index,
                "pid": s.process.pid if s.process is not None else None,
                "alive": bool(s.process is not None and s.process.is_alive()),
                "run_id": (s.busy_with or {}).get("run_id"),
                "busy_seconds": round(now - s.started, 3) if s.busy_with else None,
                "invocations": s.invocations,
                "deaths": s.deaths,
            }
            for s in self.slots
        ]

    def idle(self) -> bool:
        return self.queue.empty() and all(s.busy_with is None for s in self.slots)
