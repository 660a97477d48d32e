"""The deployed tier's build: ``sam build`` of this repo's stack, made once per session as
``make build`` would, for this machine's CPU (stacks are served from it by the
``deployed_stacks`` fixture of tests/conftest.py). ``DURABLE_TEST_BUILD_DIR`` reuses a
build made before (a local speed-up when iterating; CI always builds).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from infra.local.deployed_stack import build_for_host

ROOT = Path(__file__).resolve().parents[2]
DURABLE = str(Path(sys.executable).parent / "durable")


def sam_command() -> list[str]:
    """``durable sam``: the SAM CLI as a user's project runs it (installed on first use)."""
    return [DURABLE, "sam"]


@pytest.fixture(scope="session")
def repo_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("DURABLE_TEST_BUILD_DIR")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("sam-build")
    return build_for_host(ROOT / "template.yaml", out, sam_command(), env=dict(os.environ))
