"""The process handling that ``DynamoDBLocal`` and ``MotoServer`` share.

Each server's command line lives in its ``*.sh`` script (``install`` and ``run`` subcommands), so
the shell workflow and the test fixtures cannot drift apart. ``LocalServer`` owns the process: it
starts ``SCRIPT run``, which ``exec``s the server, so the PID it holds is the server's own and
``stop()`` signals exactly that process (never anything found by name). The server's output goes
to a log file: by default a temporary one that a clean ``stop()`` deletes and a failure keeps (and
quotes in the error, with its path).

Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, ClassVar, Self

HOST = "127.0.0.1"

_PR_SET_PDEATHSIG = 1
# A proxy from the environment must never see requests to a local server.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LocalServerError(RuntimeError):
    """Installing or starting a local server failed; the message carries the reason or log tail."""


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel SIGTERM the server if this process dies.

    Without it a test run killed by a timeout or SIGKILL leaves a server holding a port (a JVM:
    ~150 MB) behind. Linux only. The signal fires when the *thread* that forked the child exits,
    so the hook is applied only when starting from the main thread.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        # Loaded here, before fork: loading a library in the forked child could deadlock.
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent:
            os._exit(1)

    return hook


def http_ok(
    url: str,
    *,
    method: str = "GET",
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 5,
) -> bool:
    """True if ``url`` answers 200, without any proxy; False on any other answer or none."""
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}), method=method)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class LocalServer:
    """One server process bound to 127.0.0.1, run through ``SCRIPT run`` and stopped by its PID.

    Subclasses set the class attributes and ``_answers``, and give ``start`` their own options.
    """

    label: ClassVar[str]  # the server in messages: "DynamoDB Local"
    error: ClassVar[type[LocalServerError]]
    script_path: ClassVar[Path]
    log_prefix: ClassVar[str]  # of the temporary log's name
    listening: ClassVar[re.Pattern[bytes]]  # finds the bound port (group 1) in the log

    def __init__(
        self,
        *,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        script: str | os.PathLike[str] | None = None,
        own_session: bool = False,
    ) -> None:
        self._log_path_arg = Path(log_path) if log_path is not None else None
        # A session (and process group) of its own: a Ctrl-C to the starter's group does
        # not reach it, so the starter decides when it stops (``durable dev`` stops it
        # after the workers and the sweeper that use it).
        self._own_session = own_session
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._script = Path(script) if script is not None else self.script_path
        self._extra_env: dict[str, str] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_path: Path | None = None
        self._log_is_temp = False
        self._port: int | None = None

    # -- subclass hooks ----------------------------------------------------------------------

    def install(self) -> object:
        raise NotImplementedError

    def start(self, port: int = 0) -> str:
        """Start the server and return its endpoint URL once it answers.

        ``port=0`` binds a port the kernel picks at bind time (no probe-then-bind race between
        parallel test sessions).
        """
        return self._start(port, [])

    def _answers(self, port: int) -> bool:
        """True once the server on ``port`` answers a real request, not just the socket."""
        raise NotImplementedError

    # -- script ------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self._extra_env}

    def _run_install(self) -> str:
        """Run ``SCRIPT install`` and return the last line it prints on stdout."""
        result = subprocess.run(
            ["bash", str(self._script), "install"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self._env(),
            check=False,
        )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines:
            raise self.error(
                f"{self._script.name} install failed (exit {result.returncode}):\n"
                + result.stderr.strip()
            )
        return lines[-1]

    # -- lifecycle ---------------------------------------------------------------------------

    def _start(self, port: int, options: list[str]) -> str:
        """Start ``SCRIPT run --port PORT OPTIONS...``; the endpoint URL once the server answers."""
        if self._proc is not None:
            raise self.error(f"already running (pid {self._proc.pid})")
        if not 0 <= port <= 65535:
            raise ValueError(f"invalid port {port}")
        self.install()
        if self._log_path_arg is not None:
            self._log_path = self._log_path_arg
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_is_temp = False
        else:
            fd, name = tempfile.mkstemp(prefix=self.log_prefix, suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
            self._log_is_temp = True
        # Held open for the server's lifetime (the child writes to it); closed in stop().
        self._log_file = open(self._log_path, "wb")  # noqa: SIM115
        started = time.monotonic()
        self._proc = subprocess.Popen(
            ["bash", str(self._script), "run", "--port", str(port), *options],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=self._env(),
            preexec_fn=_die_with_parent_hook(),  # noqa: PLW1509 - see the hook's docstring
            start_new_session=self._own_session,
        )
        atexit.register(self.stop)
        try:
            self._port = self._wait_ready(started)
        except BaseException:
            # KeyboardInterrupt included: never leave a half-started server behind. The log is
            # kept: the error message points at it.
            self._log_is_temp = False
            # The original error matters more than one from cleaning up.
            with contextlib.suppress(Exception):
                self.stop()
            raise
        return self.endpoint_url

    def _wait_ready(self, started: float) -> int:
        assert self._proc is not None and self._log_path is not None
        deadline = started + self._startup_timeout
        port: int | None = None
        while True:
            if self._proc.poll() is not None:
                raise self.error(
                    f"{self.label} exited during startup (exit {self._proc.returncode}); "
                    f"log {self._log_path}:\n{_tail(self._log_path)}"
                )
            if port is None:
                match = self.listening.search(self._log_path.read_bytes())
                if match:
                    port = int(match.group(1))
            if port is not None and self._answers(port):
                return port
            if time.monotonic() >= deadline:
                raise self.error(
                    f"{self.label} not ready after {self._startup_timeout:.0f}s; "
                    f"log {self._log_path}:\n{_tail(self._log_path)}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM the server's PID, SIGKILL after ``stop_timeout``; harmless if not running."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        self._port = None
        clean = True
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=self._stop_timeout)
                except subprocess.TimeoutExpired:
                    clean = False
                    proc.kill()
                    proc.wait()
            elif proc.returncode != 0:  # it died on its own: keep the log for the post-mortem
                clean = False
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._log_path is not None and self._log_is_temp and clean:
            self._log_path.unlink(missing_ok=True)

    # -- state -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def port(self) -> int:
        if self._port is None:
            raise self.error(f"{self.label} is not running")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> Self:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
