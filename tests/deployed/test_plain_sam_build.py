"""Bytecode from any ``sam build`` (issue 47): the SAM CLI run as a user's pipeline runs it,
``sam build`` with python3.12 on PATH and nothing of ``durable sam`` around it, makes the
same package as ``durable sam build``: the locked distributions, the code, and a ``.pyc``
beside every module, written for the runtime's interpreter in ``unchecked-hash`` mode
(template.yaml's ``BuildMethod: makefile``, deploy/lambda/Makefile).

Without them every cold start compiles each module it imports, on Lambda's read-only
``/var/task``, and throws the result away (docs/performance.md).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from durable.local.sam import ensure_sam, find_runtime_python, runtime_env
from infra.local.deployed_stack import build_for_host
from infra.lock import LOCK, installed, pins

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = (
    "WorkerFunction",
    "ApiFunction",
    "SweeperFunction",
    "EventsFunction",
    "PurgeFunction",
    "DeployHookFunction",
)
# A hash-based .pyc's flags word (PEP 552): bit 0 set, bit 1 (check the source) clear.
UNCHECKED_HASH = 0b01


def _runtime_magic(python: Path) -> bytes:
    done = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return bytes.fromhex(done.stdout)


@pytest.fixture(scope="module")
def plain_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``sam build`` of template.yaml by the SAM CLI itself (not ``durable sam``)."""
    python = find_runtime_python()
    if python is None:
        pytest.fail("no python3.12 here: the deployed tier needs the functions' runtime")
    sam = ensure_sam()
    out = tmp_path_factory.mktemp("plain-sam-build")
    env = {k: v for k, v in runtime_env(python).items() if not k.startswith("DURABLE_")}
    return build_for_host(ROOT / "template.yaml", out, [str(sam)], env=env), python


def test_a_plain_sam_build_writes_the_bytecode_of_every_module(
    plain_build: tuple[Path, Path],
) -> None:
    build, python = plain_build
    magic = _runtime_magic(python)
    locked = pins(LOCK.read_text())
    for function in FUNCTIONS:
        folder = build / function
        assert installed(folder) == locked, function
        assert (folder / "handlers" / "worker.py").is_file(), function
        assert not (folder / "bin").exists() and not (folder / "Makefile").exists(), function
        sources = [
            path
            for package in ("durable", "handlers", "examples", "botocore", "boto3", "pydantic")
            for path in (folder / package).rglob("*.py")
        ]
        assert len(sources) > 300, (function, len(sources))
        missing = []
        for source in sources:
            cached = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
            if not cached.is_file():
                missing.append(str(source.relative_to(folder)))
                continue
            header = cached.read_bytes()[:8]
            assert header[:4] == magic, f"{cached} was written by another interpreter"
            flags = int.from_bytes(header[4:8], "little")
            assert flags == UNCHECKED_HASH, f"{cached}: flags {flags:#b}, not unchecked-hash"
        assert not missing, f"{function}: {len(missing)} modules without bytecode: {missing[:5]}"


def test_the_plainly_built_worker_starts_from_its_bytecode(plain_build: tuple[Path, Path]) -> None:
    """In a bare interpreter that may not write bytecode (Lambda's read-only task root),
    every Python module the worker's handler imports from the package comes from a ``.pyc``
    (extension modules are machine code already)."""
    build, python = plain_build
    folder = build / "WorkerFunction"
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import handlers.worker; "
        "root = sys.argv[1]; "
        "loaded = [m for m in list(sys.modules.values()) "
        "if (getattr(m, '__file__', None) or '').startswith(root) "
        "and m.__file__.endswith('.py')]; "
        "source = [m.__name__ for m in loaded if m.__spec__ is None "
        "or not m.__spec__.cached or not __import__('os').path.exists(m.__spec__.cached)]; "
        "print(len(loaded), source)"
    )
    done = subprocess.run(
        [str(python), "-I", "-S", "-B", "-c", probe, str(folder)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
        check=True,
    )
    count, source = done.stdout.split(" ", 1)
    assert int(count) > 10
    assert source.strip() == "[]", source
