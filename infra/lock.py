"""``make lock``: the deployed functions' dependencies, exact and hashed.

Resolves ``deploy/lambda/requirements.in`` for the functions' runtime (``python3.12`` on
arm64 Linux, as the template declares) with uv into ``deploy/lambda/requirements.txt``:
every package pinned to one version, with the hashes of its files, so ``sam build``
installs exactly what the tier ``make test-deployed`` ran. Then writes the same pins,
without hashes, into the requirements ``durable init`` gives a project: a user's stack
deploys the versions this library was tested with (a project's requirements start with the
library itself, from a wheel or an index, which a hash-checked file could not name).

    python -m infra.lock            resolve again (newest versions the ranges allow)
    python -m infra.lock --check    exit 1 when the scaffold's pins differ from the lock
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "deploy" / "lambda" / "requirements.in"
LOCK = ROOT / "deploy" / "lambda" / "requirements.txt"
SCAFFOLD = ROOT / "durable" / "scaffold" / "project" / "deploy" / "lambda" / "requirements.txt.tmpl"
RUNTIME = "3.12"  # template.yaml: Runtime python3.12
PLATFORM = "aarch64-manylinux2014"  # template.yaml: Architectures [arm64]
BEGIN = "# --- tested pins (make lock in the durable-lambda repo writes this block) ---"
END = "# --- end of tested pins ---"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def pins(text: str) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line (names normalized, PEP 503)."""
    return {normalize(name): version for name, version in _PIN.findall(text)}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(folder: Path) -> dict[str, str]:
    """``name -> version`` of the distributions installed in ``folder`` (its dist-info
    folders, as pip and sam build leave them), names normalized."""
    found = {}
    for info in folder.glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        found[normalize(name)] = version
    return found


def scaffold_block(locked: dict[str, str]) -> str:
    lines = [f"{name}=={version}" for name, version in sorted(locked.items())]
    return "\n".join([BEGIN, *lines, END])


def resolve() -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is not installed: make .venv/.installed (the dev extra has it)")
    subprocess.run(
        [
            uv,
            "pip",
            "compile",
            str(SOURCE),
            "--python-version",
            RUNTIME,
            "--python-platform",
            PLATFORM,
            "--generate-hashes",
            "--quiet",
            "--custom-compile-command",
            "make lock",
            "--output-file",
            str(LOCK),
        ],
        check=True,
        cwd=ROOT,
    )


def write_scaffold() -> bool:
    """Puts the lock's pins into the scaffold's requirements; True when they changed."""
    text = SCAFFOLD.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    updated = text[:start] + scaffold_block(pins(LOCK.read_text())) + text[end:]
    SCAFFOLD.write_text(updated)
    return updated != text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args()
    if args.check:
        if pins(SCAFFOLD.read_text()) != pins(LOCK.read_text()):
            raise SystemExit("the scaffold's pins differ from deploy/lambda/requirements.txt")
        return
    resolve()
    changed = write_scaffold()
    locked = pins(LOCK.read_text())
    print(f"locked {len(locked)} packages into {LOCK.relative_to(ROOT)}")
    if changed:
        print(f"and wrote their pins into {SCAFFOLD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
