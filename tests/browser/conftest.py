"""What every browser test shares: where Chromium and the screenshots are, and the page
fixture (one headless Chromium per module, on the module's own ``dev`` stack, failing the
module when the console's script raised)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DURABLE_ARTIFACTS", ROOT / "artifacts" / "console"))
CHROMIUM = os.environ.get("DURABLE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def page(dev: Any) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="make test-browser installs it")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: run infra/local/chromium.sh install")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(WAIT_MS)
        yield page
        browser.close()
        assert errors == [], f"the console's script raised: {errors}"
