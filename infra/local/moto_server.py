"""A private moto server for tests, over real HTTP on 127.0.0.1 only.

The command line lives in ``moto_server.sh`` beside this file (its ``install`` and ``run``
subcommands), as ``DynamoDBLocal`` does for DynamoDB Local; this module owns the process. It is a
separate process, not moto's ``ThreadedMotoServer`` inside the test process, because moto keeps
its backends in module globals: an in-process server would share state with the ``mock_aws``
fixtures of the unit tier, and ``mock_aws`` would intercept the requests meant for the server.

Typical pytest use::

    @pytest.fixture(scope="session")
    def moto_endpoint() -> Iterator[str]:
        with MotoServer() as moto:
            yield moto.endpoint_url

``reset()`` clears every backend (``POST /moto-api/reset``) between tests that share a server.

Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from infra.local.dynamodb_local import _die_with_parent_hook, _tail

__all__ = ["SCRIPT", "MotoServer", "MotoServerError", "reset"]

SCRIPT = Path(__file__).resolve().with_name("moto_server.sh")
HOST = "127.0.0.1"

# Werkzeug's banner; it may carry ANSI colour codes around it.
_LISTENING = re.compile(rb"Running on http://127\.0\.0\.1:(\d+)")
# A proxy from the environment must never see requests to the local server.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class MotoServerError(RuntimeError):
    """Installing or starting the moto server failed; the message carries the log tail."""


class MotoServer:
    """Runs one ``python -m moto.server`` bound to 127.0.0.1, stopped by its PID.

    ``log_path`` receives the server's output; by default a temporary file deleted by a clean
    ``stop()`` and kept (and quoted in the error) on failure.
    """

    def __init__(
        self,
        *,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        script: str | os.PathLike[str] | None = None,
    ) -> None:
        self._log_path_arg = Path(log_path) if log_path is not None else None
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._script = Path(script) if script is not None else SCRIPT
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_path: Path | None = None
        self._log_is_temp = False
        self._port: int | None = None

    def install(self) -> str:
        """Run ``moto_server.sh install``; returns the Python that will run the server."""
        result = subprocess.run(
            ["bash", str(self._script), "install"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines:
            raise MotoServerError(
                f"{self._script.name} install failed (exit {result.returncode}):\n"
                + result.stderr.strip()
            )
        return lines[-1]

    def start(self, port: int = 0) -> str:
        """Start the server and return its endpoint URL once it answers HTTP.

        ``port=0`` binds a port the kernel picks at bind time.
        """
        if self._proc is not None:
            raise MotoServerError(f"already running (pid {self._proc.pid})")
        if not 0 <= port <= 65535:
            raise ValueError(f"invalid port {port}")
        self.install()
        if self._log_path_arg is not None:
            self._log_path = self._log_path_arg
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_is_temp = False
        else:
            fd, name = tempfile.mkstemp(prefix="moto-server-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
            self._log_is_temp = True
        # Held open for the server's lifetime (the child writes to it); closed in stop().
        self._log_file = open(self._log_path, "wb")  # noqa: SIM115
        started = time.monotonic()
        self._proc = subprocess.Popen(
            ["bash", str(self._script), "run", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent_hook(),  # noqa: PLW1509 - see the hook's docstring
        )
        atexit.register(self.stop)
        try:
            self._port = self._wait_ready(started)
        except BaseException:
            self._log_is_temp = False  # the error message points at it
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
                raise MotoServerError(
                    f"moto server exited during startup (exit {self._proc.returncode}); "
                    f"log {self._log_path}:\n{_tail(self._log_path)}"
                )
            if port is None:
                match = _LISTENING.search(self._log_path.read_bytes())
                if match:
                    port = int(match.group(1))
            if port is not None and _request(f"http://{HOST}:{port}/moto-api/data.json"):
                return port
            if time.monotonic() >= deadline:
                raise MotoServerError(
                    f"moto server not ready after {self._startup_timeout:.0f}s; "
                    f"log {self._log_path}:\n{_tail(self._log_path)}"
                )
            time.sleep(0.05)

    def reset(self) -> None:
        """Forget every resource in every backend of this server."""
        reset(self.endpoint_url)

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

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def port(self) -> int:
        if self._port is None:
            raise MotoServerError("the moto server is not running")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables ``moto_server.sh start`` exports, for subprocesses under test."""
        return {
            "AWS_ENDPOINT_URL_SCHEDULER": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_ENDPOINT_URL_IAM": self.endpoint_url,
            "DURABLE_TEST_MOTO_ENDPOINT": self.endpoint_url,
        }

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


def reset(endpoint_url: str) -> None:
    """``POST /moto-api/reset`` on a moto server this process did not start (CI's, say)."""
    if not _request(f"{endpoint_url.rstrip('/')}/moto-api/reset", method="POST"):
        raise MotoServerError(f"POST {endpoint_url}/moto-api/reset failed")


def _request(url: str, method: str = "GET") -> bool:
    request = urllib.request.Request(url, data=b"" if method == "POST" else None, method=method)
    try:
        with _OPENER.open(request, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
