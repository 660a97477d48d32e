"""``durable dev`` on a port that is taken says so in one line, before starting anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

APP = """
from durable import App, Context

app = App()


@app.workflow(name="noop")
def noop(ctx: Context) -> None:
    return None
"""


def test_a_taken_port_is_one_line_of_error_and_nothing_is_left_running(tmp_path: Path) -> None:
    (tmp_path / "portapp.py").write_text(APP)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "durable.cli",
                "dev",
                "--app",
                "portapp:app",
                "--port",
                str(port),
                "--storage",
                "moto",
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: port {port} is in use" in done.stderr
    assert "--port" in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / ".durable" / "dev.json").exists()
