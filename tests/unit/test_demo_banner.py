"""The demo announces the DynamoDB Local install only on the run that makes it."""

from __future__ import annotations

from pathlib import Path

from durable.local.servers.dynamodb_local import DynamoDBLocal
from examples.demo import starting_line


def test_the_install_is_announced_only_when_it_will_happen(tmp_path: Path) -> None:
    """GIVEN an empty user cache, then one holding the install WHEN the demo starts
    THEN only the first start mentions installing (it used to say so on every run)."""
    server = DynamoDBLocal(home=tmp_path)
    first = starting_line(server, problem=None)
    assert f"installing DynamoDB Local into {tmp_path} first" in first
    marker = tmp_path / "dynamodb-local" / ".installed"
    marker.parent.mkdir()
    marker.touch()
    assert server.installed()
    later = starting_line(server, problem=None)
    assert "install" not in later
    assert later.startswith("• starting durable dev (time x43200")


def test_no_install_is_announced_when_java_is_missing(tmp_path: Path) -> None:
    """With Java missing durable dev stores runs in moto and installs nothing."""
    line = starting_line(DynamoDBLocal(home=tmp_path), problem="Java not found")
    assert "install" not in line
