"""``durable console`` without ``--endpoint``: durable dev's console, or what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durable import cli

pytestmark = pytest.mark.unit


def test_it_names_the_running_dev_stacks_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DURABLE_ENDPOINT", raising=False)
    (tmp_path / ".durable").mkdir()
    (tmp_path / ".durable" / "dev.json").write_text(
        json.dumps({"endpoint": "http://127.0.0.1:8790"})
    )
    monkeypatch.setattr(cli, "STATE_DIR", Path(".durable"))
    assert cli.main(["console"]) == 0
    assert "http://127.0.0.1:8790/console/" in capsys.readouterr().out


def test_without_a_stack_it_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DURABLE_ENDPOINT", raising=False)
    monkeypatch.setattr(cli, "STATE_DIR", Path(".durable"))
    # Nor the machine's newest dev (another checkout's, or a benchmark's, running now).
    monkeypatch.setenv("DURABLE_LOCAL_HOME", str(tmp_path / "home"))
    assert cli.main(["console"]) == 1
    err = capsys.readouterr().err
    assert "durable dev" in err and "--endpoint https://" in err
