"""A private moto server for tests, over real HTTP on 127.0.0.1 only.

The command line lives in ``moto_server.sh`` beside this file (its ``install`` and ``run``
subcommands), as ``DynamoDBLocal`` does for DynamoDB Local; this module owns the process (through
``LocalServer``). It is a separate process, not moto's ``ThreadedMotoServer`` inside the test
process, because moto keeps its backends in module globals: an in-process server would share
state with the ``mock_aws`` fixtures of the unit tier, and ``mock_aws`` would intercept the
requests meant for the server.

Typical pytest use::

    @pytest.fixture(scope="session")
    def moto_endpoint() -> Iterator[str]:
        with MotoServer() as moto:
            yield moto.endpoint_url

``reset()`` clears every backend (``POST /moto-api/reset``) between tests that share a server.

Standard library only.
"""

from __future__ import annotations

import re
from pathlib import Path

from durable.local.servers.base import HOST, LocalServer, LocalServerError, http_ok

__all__ = ["SCRIPT", "MotoServer", "MotoServerError", "reset"]

SCRIPT = Path(__file__).resolve().with_name("moto_server.sh")


class MotoServerError(LocalServerError):
    """Installing or starting the moto server failed; the message carries the log tail."""


class MotoServer(LocalServer):
    """Runs one ``python -m moto.server`` bound to 127.0.0.1, stopped by its PID.

    ``log_path`` receives the server's output; by default a temporary file deleted by a clean
    ``stop()`` and kept (and quoted in the error) on failure.
    """

    label = "moto server"
    error = MotoServerError
    script_path = SCRIPT
    log_prefix = "moto-server-"
    # Werkzeug's banner; it may carry ANSI colour codes around it.
    listening = re.compile(rb"Running on http://127\.0\.0\.1:(\d+)")

    def install(self) -> str:
        """Run ``moto_server.sh install``; returns the Python that will run the server."""
        return self._run_install()

    def _answers(self, port: int) -> bool:
        return http_ok(f"http://{HOST}:{port}/moto-api/data.json")

    def reset(self) -> None:
        """Forget every resource in every backend of this server."""
        reset(self.endpoint_url)

    def env(self) -> dict[str, str]:
        """The variables ``moto_server.sh start`` exports, for subprocesses under test."""
        return {
            "AWS_ENDPOINT_URL_SCHEDULER": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_ENDPOINT_URL_IAM": self.endpoint_url,
            "DURABLE_TEST_MOTO_ENDPOINT": self.endpoint_url,
        }


def reset(endpoint_url: str) -> None:
    """``POST /moto-api/reset`` on a moto server this process did not start (CI's, say)."""
    if not http_ok(f"{endpoint_url.rstrip('/')}/moto-api/reset", method="POST", data=b""):
        raise MotoServerError(f"POST {endpoint_url}/moto-api/reset failed")
