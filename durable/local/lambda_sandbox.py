"""Run a built Lambda function's handler the way Lambda does, in an interpreter of its own.

What ``sam build`` leaves in ``.aws-sam/build/<Function>`` is the whole of what a function
has on AWS: its code and its dependencies, nothing else. A ``Sandbox`` runs the function's
handler from that folder in a separate ``python3.12`` started with ``-I -S -B``: isolated
from ``PYTHON*`` variables, the user's site-packages and the current folder (``-I``),
without any site-packages at all (``-S``: the interpreter sees the standard library and the
folder, like Lambda's ``/var/task``), and writing no bytecode (``-B``: ``/var/task`` is
read-only on Lambda, so a cold start compiles the function's own modules every time).
A module missing from the package fails here as it would on AWS, at import or on the first
event, and nothing of this checkout's virtualenv can hide it.

The sandbox is a warm container: its handler is imported once (Lambda's init phase), then
invoked event after event; ``stop`` and a new ``Sandbox`` make a cold start. The driver
below is standard library only and is passed to the interpreter as source, so nothing of
this repository is on its path. Events and answers travel as JSON lines; answers on a pipe
of their own, since the handler prints its logs and metrics to stdout.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

# The interpreter's side: standard library only, run with ``python -c``.
_DRIVER = r"""
import importlib, json, os, sys, time, traceback

code_dirs, handler_ref, answers = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.path[:0] = code_dirs
os.chdir(code_dirs[-1])  # Lambda's working directory is the task root
out = os.fdopen(answers, "w", buffering=1)


def say(message):
    out.write(json.dumps(message, default=str) + "\n")


class Context:
    def __init__(self, request):
        self.function_name = request["function_name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn = request["function_arn"]
        self.memory_limit_in_mb = request["memory_mb"]
        self.aws_request_id = request["request_id"]
        self.log_group_name = "/aws/lambda/" + self.function_name
        self.log_stream_name = "sandbox"
        self._deadline = request["deadline"]

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.time()) * 1000))


def failure(error):
    return {
        "ok": False,
        "errorType": type(error).__name__,
        "errorMessage": str(error),
        "stackTrace": traceback.format_exception(error),
    }


began = time.perf_counter()
try:
    module, _, name = handler_ref.rpartition(".")
    handler = getattr(importlib.import_module(module), name)
except BaseException as error:
    say({"init": failure(error)})
    raise SystemExit(1)
say({"init": {"ok": True, "ms": (time.perf_counter() - began) * 1000}})
for line in sys.stdin:
    request = json.loads(line)
    began = time.perf_counter()
    try:
        reply = {"ok": True, "result": handler(request["event"], Context(request))}
    except Exception as error:  # Lambda reports it as an "Unhandled" function error
        reply = failure(error)
    reply["ms"] = (time.perf_counter() - began) * 1000
    say(reply)
"""


class FunctionError(RuntimeError):
    """The handler raised (Lambda's ``Unhandled`` function error), or could not start."""

    def __init__(self, function: str, reply: Mapping[str, Any], log: str) -> None:
        trace = "".join(reply.get("stackTrace") or [])
        super().__init__(
            f"{function}: {reply.get('errorType')}: {reply.get('errorMessage')}\n{trace}"
            f"--- the function's output ---\n{log[-4000:]}"
        )
        self.error_type = str(reply.get("errorType"))
        self.error_message = str(reply.get("errorMessage"))


class Sandbox:
    """One warm container of a built function: ``invoke`` it, ``stop`` it."""

    def __init__(
        self,
        name: str,
        code: list[Path],
        handler: str,
        env: Mapping[str, str],
        *,
        python: str,
        log: Path,
        memory_mb: int = 512,
        timeout: float = 300.0,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.log_path = log
        self._log: TextIO = log.open("a", encoding="utf-8")
        read, write = os.pipe()
        began = time.perf_counter()
        self._process = subprocess.Popen(
            [
                python,
                "-I",
                "-S",
                "-B",
                "-c",
                _DRIVER,
                json.dumps([str(c) for c in code]),
                handler,
                str(write),
            ],
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
            pass_fds=(write,),
        )
        os.close(write)
        self._answers = os.fdopen(read, "r", encoding="utf-8")
        self.invocations: list[float] = []  # each invocation's time in the handler, ms
        ready = self._read(60.0)["init"]
        if not ready.get("ok"):
            self.stop()
            raise FunctionError(name, ready, self.output())
        self.init_ms: float = ready["ms"]  # the handler module's import (Lambda's init)
        self.start_ms = (time.perf_counter() - began) * 1000  # interpreter start included

    def invoke(self, event: Any, *, timeout: float | None = None) -> Any:
        """The handler's answer to ``event``; ``FunctionError`` when it raised."""
        budget = timeout or self.timeout
        request = {
            "event": event,
            "request_id": str(uuid.uuid4()),
            "deadline": time.time() + budget,
            "function_name": self.name,
            "function_arn": f"arn:aws:lambda:us-east-1:123456789012:function:{self.name}",
            "memory_mb": self.memory_mb,
        }
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        reply = self._read(budget + 5.0)
        self.invocations.append(float(reply.get("ms", 0.0)))
        if not reply.get("ok"):
            raise FunctionError(self.name, reply, self.output())
        return reply["result"]

    def _read(self, timeout: float) -> dict[str, Any]:
        ready, _, _ = select.select([self._answers], [], [], timeout)
        line = self._answers.readline() if ready else ""
        if not line:
            code = self._process.poll()
            self.stop()
            said = "timed out" if code is None else f"exited {code}"
            raise FunctionError(
                self.name, {"errorType": "Sandbox", "errorMessage": said}, self.output()
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def output(self) -> str:
        """What the function printed so far (its logs, metrics, tracebacks)."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)
        for stream in (self._process.stdin, self._answers):
            if stream is not None and not stream.closed:
                stream.close()
        self._log.close()
