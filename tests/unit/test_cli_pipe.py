"""`durable show RUN | head`: the reader leaves early, and the CLI stops without a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The CLI in a child process, its HTTP call answered with a run of many steps: more output
# than a pipe holds, so the write fails once the reader has gone.
CHILD = textwrap.dedent(
    """
    import sys
    from durable import cli

    steps = [
        {"position": f"{i:04d}", "name": f"step_{i}", "kind": "step", "status": "DONE",
         "attempt": 1, "output": "x" * 40, "attempts": []}
        for i in range(1, 3001)
    ]
    run = {"run_id": "01JDURABLE0000000000000000", "workflow": "w", "version": 1,
           "status": "SUCCEEDED", "created_at": "2026-01-01T00:00:00.000Z",
           "updated_at": "2026-01-01T00:00:01.000Z", "steps": steps}
    cli.call = lambda *args, **kwargs: run
    sys.exit(cli.main(["show", "01JDURABLE0000000000000000"]))
    """
)


def test_show_piped_into_a_reader_that_leaves_prints_no_traceback() -> None:
    """GIVEN `durable show` writing more than a pipe holds WHEN the reader closes the pipe
    after one line (like `head -1`) THEN the CLI ends quietly with status 141 (128 +
    SIGPIPE), nothing on stderr: no BrokenPipeError traceback."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    child.stdout.close()
    errors = child.stderr.read().decode()
    status = child.wait(timeout=60)
    assert first.startswith(b"run 01JDURABLE0000000000000000  w v1  SUCCEEDED")
    assert errors == ""
    assert status == 141
