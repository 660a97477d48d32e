"""`make clean` removes the checkout's own files and says where the user cache is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_clean_keeps_the_user_cache_and_says_how_to_remove_it(tmp_path: Path) -> None:
    """GIVEN a checkout with a venv and a user cache of 3 MB WHEN `make clean` runs
    THEN the venv is gone, the cache is kept, and the output names its folder, its size
    and the command that removes it."""
    checkout = tmp_path / "checkout"
    (checkout / ".venv").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", checkout / "Makefile")
    cache = tmp_path / "cache"
    (cache / "dynamodb-local").mkdir(parents=True)
    (cache / "dynamodb-local" / "server.jar").write_bytes(os.urandom(3 * 1024 * 1024))
    env = {**os.environ, "DURABLE_LOCAL_HOME": str(cache)}
    done = subprocess.run(
        ["make", "-s", "clean"], cwd=checkout, env=env, capture_output=True, text=True, check=True
    )
    assert not (checkout / ".venv").exists()
    assert (cache / "dynamodb-local" / "server.jar").is_file()
    assert re.search(rf"kept the user cache {re.escape(str(cache))} \(3(\.\d)?M;", done.stdout)
    assert done.stdout.rstrip().endswith(f"remove it with  rm -rf {cache}")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_clean_says_nothing_of_a_cache_that_does_not_exist(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    env = {**os.environ, "DURABLE_LOCAL_HOME": str(tmp_path / "none")}
    done = subprocess.run(
        ["make", "-s", "clean"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout == ""
