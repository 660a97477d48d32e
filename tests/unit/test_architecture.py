"""The dependency rule: the core never imports boto3, botocore, pynamodb or powertools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = [
    "durable",
    "durable.errors",
    "durable.core.model",
    "durable.core.retry",
    "durable.core.clock",
    "durable.core.serde",
    "durable.core.ports",
    "durable.engine.registry",
    "durable.engine.context",
    "durable.engine.execution",
    "durable.engine.engine",
    "durable.testing",
    "durable.adapters.memory",
]
VENDORS = ("boto3", "botocore", "pynamodb", "aws_lambda_powertools")


def test_importing_the_core_loads_no_vendor_sdk() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + f"print(sorted(m for m in sys.modules if m.split('.')[0] in {VENDORS!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_errors_is_standard_library_only() -> None:
    source = (Path(__file__).resolve().parents[2] / "durable" / "errors.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(line.split()[1].split(".")[0] in {"__future__", "datetime"} for line in imports), (
        imports
    )
