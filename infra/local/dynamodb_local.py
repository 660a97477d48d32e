"""A private DynamoDB Local server for tests, listening on 127.0.0.1 only.

Installation and the java command line live in ``dynamodb_local.sh`` beside this file (its
``install`` and ``run`` subcommands), so the shell workflow and the test fixtures cannot drift
apart. This module only owns the process: it starts ``dynamodb_local.sh run``, which ``exec``s the
JVM, so the PID it holds is the server's own and ``stop()`` signals exactly that process.

Typical pytest use::

    @pytest.fixture(scope="session")
    def dynamodb_endpoint() -> Iterator[str]:
        with DynamoDBLocal() as ddb:
            yield ddb.endpoint_url

The server runs with ``-sharedDb``: every client sees the same tables whatever its (dummy)
credentials and region. Clients still need some credentials and a region set, e.g.
``AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_DEFAULT_REGION=us-east-1``.

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
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = ["SCRIPT", "DynamoDBLocal", "DynamoDBLocalError"]

SCRIPT = Path(__file__).resolve().with_name("dynamodb_local.sh")
HOST = "127.0.0.1"

_LISTENING = re.compile(rb"^LocalhostDynamoDB listening on 127\.0\.0\.1:(\d+)\s*$", re.MULTILINE)
# DynamoDB Local rejects requests without a SigV4-shaped Authorization header but never checks
# the signature.
_PROBE_HEADERS = {
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Authorization": (
        "AWS4-HMAC-SHA256 Credential=probe/20000101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0"
    ),
}
_PR_SET_PDEATHSIG = 1


class DynamoDBLocalError(RuntimeError):
    """Installing or starting DynamoDB Local failed; the message carries the reason or log tail."""


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel SIGTERM the server if this process dies.

    Without it a test run killed by a timeout or SIGKILL leaves a JVM holding a port and ~150 MB
    behind. Linux only. The signal fires when the *thread* that forked the child exits, so the
    hook is applied only when starting from the main thread.
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


class DynamoDBLocal:
    """Installs (once) and runs one DynamoDB Local 3.3.1 process bound to 127.0.0.1.

    ``home`` overrides ``DURABLE_LOCAL_HOME`` (the install cache root). ``java_opts`` is passed as
    ``DYNAMODB_LOCAL_JAVA_OPTS``. ``log_path`` receives the server's output; by default a temporary
    file that is deleted by a clean ``stop()`` and kept (and quoted in the error) on failure.
    """

    def __init__(
        self,
        *,
        home: str | os.PathLike[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        java_opts: str | None = None,
        script: str | os.PathLike[str] | None = None,
    ) -> None:
        self._home = Path(home) if home is not None else None
        self._log_path_arg = Path(log_path) if log_path is not None else None
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._java_opts = java_opts
        self._script = Path(script) if script is not None else SCRIPT
        self._install_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_path: Path | None = None
        self._log_is_temp = False
        self._port: int | None = None

    # -- environment -------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self._home is not None:
            env["DURABLE_LOCAL_HOME"] = str(self._home)
        if self._java_opts is not None:
            env["DYNAMODB_LOCAL_JAVA_OPTS"] = self._java_opts
        return env

    # -- install -----------------------------------------------------------------------------

    def install(self) -> Path:
        """Run ``dynamodb_local.sh install`` (idempotent, ~0.1 s when already installed)."""
        if self._install_dir is not None:
            return self._install_dir
        result = subprocess.run(
            ["bash", str(self._script), "install"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self._env(),
            check=False,
        )
        if result.returncode != 0:
            raise DynamoDBLocalError(
                f"{self._script.name} install failed (exit {result.returncode}):\n"
                + result.stderr.strip()
            )
        lines = result.stdout.strip().splitlines()
        if not lines:
            raise DynamoDBLocalError(f"{self._script.name} install printed no install directory")
        self._install_dir = Path(lines[-1])
        return self._install_dir

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, port: int = 0, db_path: str | os.PathLike[str] | None = None) -> str:
        """Start the server and return its endpoint URL once it answers ListTables.

        ``port=0`` binds a port the kernel picks at bind time (no probe-then-bind race between
        parallel test sessions). Without ``db_path`` the data lives in memory; with it, in
        ``DIR/shared-local-instance.db``, surviving restarts.
        """
        if self._proc is not None:
            raise DynamoDBLocalError(f"already running (pid {self._proc.pid})")
        if not 0 <= port <= 65535:
            raise ValueError(f"invalid port {port}")
        self.install()

        if self._log_path_arg is not None:
            self._log_path = self._log_path_arg
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_is_temp = False
        else:
            fd, name = tempfile.mkstemp(prefix="dynamodb-local-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
            self._log_is_temp = True
        # Held open for the server's lifetime (the child writes to it); closed in stop().
        self._log_file = open(self._log_path, "wb")  # noqa: SIM115

        cmd = ["bash", str(self._script), "run", "--port", str(port)]
        if db_path is not None:
            cmd += ["--db-path", os.fspath(db_path)]
        started = time.monotonic()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=self._env(),
            preexec_fn=_die_with_parent_hook(),  # noqa: PLW1509 - see the hook's docstring
        )
        atexit.register(self.stop)
        try:
            self._port = self._wait_ready(started)
        except BaseException:
            # KeyboardInterrupt included: never leave a half-started JVM behind. The log is kept:
            # the error message points at it.
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
                raise DynamoDBLocalError(
                    f"DynamoDB Local exited during startup (exit {self._proc.returncode}); "
                    f"log {self._log_path}:\n{_tail(self._log_path)}"
                )
            if port is None:
                match = _LISTENING.search(self._log_path.read_bytes())
                if match:
                    port = int(match.group(1))
            if port is not None and self._probe(port):
                return port
            if time.monotonic() >= deadline:
                raise DynamoDBLocalError(
                    f"DynamoDB Local not ready after {self._startup_timeout:.0f}s; "
                    f"log {self._log_path}:\n{_tail(self._log_path)}"
                )
            time.sleep(0.05)

    @staticmethod
    def _probe(port: int) -> bool:
        request = urllib.request.Request(
            f"http://{HOST}:{port}/", data=b"{}", headers=_PROBE_HEADERS, method="POST"
        )
        # A proxy from the environment must never see this request.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

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
            elif proc.returncode != 0:
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
            raise DynamoDBLocalError("DynamoDB Local is not running")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def env(self) -> dict[str, str]:
        """The variables ``dynamodb_local.sh start`` exports, for subprocesses under test."""
        return {
            "AWS_ENDPOINT_URL_DYNAMODB": self.endpoint_url,
            "DURABLE_DYNAMODB_ENDPOINT": self.endpoint_url,
        }

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
