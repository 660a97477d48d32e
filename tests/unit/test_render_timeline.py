"""``durable show --timeline``: columns that hold for nested positions, and the clock said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from durable.local import dev_file
from durable.ops import render

RUN = {"created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T01:00:00.000Z"}


def _step(position: str, name: str, start: str, end: str) -> dict[str, object]:
    return {
        "position": position,
        "name": name,
        "kind": "step",
        "status": "DONE",
        "updated_at": end,
        "attempts": [{"n": 1, "started_at": start, "finished_at": end}],
    }


def test_nested_positions_keep_the_bars_in_one_column() -> None:
    steps = [
        _step("0001", "fetch", "2026-01-01T00:00:00.000Z", "2026-01-01T00:10:00.000Z"),
        _step("0002.0001.0001", "send", "2026-01-01T00:10:00.000Z", "2026-01-01T00:30:00.000Z"),
        _step("0002.0010.0003", "a_longer_name", "2026-01-01T00:30:00.000Z", RUN["updated_at"]),
    ]
    lines = render.timeline(RUN, steps).splitlines()
    columns = {line.index("|") for line in lines}
    assert len(columns) == 1, "\n".join(lines)  # every bar starts under the axis
    assert lines[3].startswith("0002.0010.0003 a_longer_name ")


def test_under_a_time_scale_the_axis_says_virtual_and_real_time() -> None:
    steps = [_step("0001", "fetch", RUN["created_at"], RUN["updated_at"])]
    assert "virtual" not in render.timeline(RUN, steps)
    axis = render.timeline(RUN, steps, scale=3600).splitlines()[0]
    assert axis.endswith("| virtual time x3600 (1.0 s real)"), axis


def test_the_cli_finds_the_newest_dev_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second terminal in another folder talks to the dev that runs (on whatever port),
    not to the default :8787; a dev that is gone is not guessed at."""
    monkeypatch.setenv("DURABLE_LOCAL_HOME", str(tmp_path / "cache"))
    project, elsewhere = tmp_path / "project" / ".durable", tmp_path / "elsewhere"
    project.mkdir(parents=True)
    elsewhere.mkdir()
    info = {"endpoint": "http://127.0.0.1:8811", "pid": os.getpid(), "time_scale": 60.0}
    dev_file.write(project, info)
    found = dev_file.running_dev(elsewhere / ".durable")
    assert found is not None and found["endpoint"] == "http://127.0.0.1:8811"
    assert found["state_dir"] == str(project)
    assert dev_file.running_dev(project) == info  # its own folder's file first
    assert dev_file.folder_dev(elsewhere / ".durable") is None  # check-deploy's: this folder's

    # The same process id, another process (reused after a crash or a reboot): not it.
    stale = {**json.loads(dev_file.last_dev_file().read_text()), "started": "1"}
    dev_file.last_dev_file().write_text(json.dumps(stale))
    assert dev_file.running_dev(elsewhere / ".durable") is None

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dev_file.last_dev_file().write_text(json.dumps({**info, "pid": int(gone.stdout)}))
    assert dev_file.running_dev(elsewhere / ".durable") is None

    dev_file.write(project, info)
    dev_file.remove(project)  # the dev stops: both files go
    assert not (project / "dev.json").exists() and not dev_file.last_dev_file().exists()


def test_a_listing_never_prints_a_control_character() -> None:
    """A wait's or step's name comes from workflow code, an error's message from outside:
    an escape sequence in one must not drive the operator's terminal."""
    row = {
        "run_id": "R1",
        "workflow": "w",
        "version": 1,
        "status": "WAITING",
        "updated_at": "x",
        "waiting_for": "sleep \x1b[2Jwipe until 2026-01-01T00:00:00.000Z",
        "error": {"message": "bad\x07bell"},
    }
    table = render.render_runs([row])
    assert "\x1b" not in table and "\x07" not in table
    assert "sleep [2Jwipe until 2026-01-01 00:00" in table
