"""``make lock``: every lock of this repository, exact and hashed, refreshed in one command.

* The deployed functions' dependencies: ``deploy/lambda/requirements.in`` resolved with uv
  for the functions' runtime (``python3.12`` on arm64 Linux, as the template declares) into
  ``deploy/lambda/requirements.txt``: every package pinned to one version, with the hashes
  of its files, so ``sam build`` installs exactly what the tier ``make test-deployed`` ran.
  Then the same pins, without hashes, go into the requirements ``durable init`` gives a
  project: a user's stack deploys the versions this library was tested with (a project's
  requirements start with the library itself, from a wheel or an index, which a
  hash-checked file could not name).
* The development and CI environment: ``pyproject.toml`` with its ``dev`` and ``browser``
  extras resolved for every platform and Python this project supports (uv's universal
  resolution, from 3.11) into ``requirements/dev.lock``, with hashes, held to the deployed
  lock's versions (the tests run the boto3, Powertools and pydantic that deploy). ``make
  .venv/.installed`` installs the dev extra under it, and ``infra/local/chromium.sh`` the
  browser extra, so every CI run gets the same versions.

Each lock's header records a digest of what it was resolved from (``# inputs sha256:``),
and a unit test fails when that no longer matches: a floor raised or a package added in
pyproject without ``make lock`` is caught before CI installs something else.

uv keeps the versions a lock already names when they still fit (a refresh changes only
what the inputs force); ``--upgrade`` resolves everything to the newest versions allowed.

    python -m infra.lock              refresh both locks (and the scaffold's pins)
    python -m infra.lock --upgrade    the same, newest versions the ranges allow
    python -m infra.lock --check      exit 1 when a lock or the scaffold's pins are stale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "deploy" / "lambda" / "requirements.in"
LOCK = ROOT / "deploy" / "lambda" / "requirements.txt"
SCAFFOLD = ROOT / "durable" / "scaffold" / "project" / "deploy" / "lambda" / "requirements.txt.tmpl"
PYPROJECT = ROOT / "pyproject.toml"
DEV_LOCK = ROOT / "requirements" / "dev.lock"
DEV_EXTRAS = ("dev", "browser")  # what CI installs: the dev venv, and the browser tier's driver
DEV_PYTHON = "3.11"  # pyproject's requires-python floor: the universal lock starts there
RUNTIME = "3.12"  # template.yaml: Runtime python3.12
PLATFORM = "aarch64-manylinux2014"  # template.yaml: Architectures [arm64]
DIGEST = "# inputs sha256:"
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


def deployed_inputs() -> str:
    """What the deployed lock is resolved from: requirements.in's requirements (comments
    and blank lines aside), and the platform it is resolved for."""
    lines = [line.split("#")[0].strip() for line in SOURCE.read_text().splitlines()]
    return json.dumps([sorted(line for line in lines if line), RUNTIME, PLATFORM])


def dev_inputs() -> str:
    """What the dev lock is resolved from: pyproject's requires-python, its dependencies and
    every extra (the dev extra names others), the extras locked, and the deployed pins it is
    held to."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = {
        "requires-python": project["requires-python"],
        "dependencies": sorted(project["dependencies"]),
        "optional-dependencies": {
            name: sorted(reqs) for name, reqs in project["optional-dependencies"].items()
        },
        "extras": list(DEV_EXTRAS),
        "python": DEV_PYTHON,
        "deployed": pins(LOCK.read_text()),
    }
    return json.dumps(declared, sort_keys=True)


def digest(inputs: str) -> str:
    return hashlib.sha256(inputs.encode()).hexdigest()


def recorded_digest(lock: Path) -> str | None:
    """The digest a lock's header records, None when it has none."""
    for line in lock.read_text().splitlines():
        if line.startswith(DIGEST):
            return line.removeprefix(DIGEST).strip()
        if not line.startswith("#"):
            break
    return None


def stale_locks() -> list[str]:
    """Why each lock no longer matches its inputs (empty: all current)."""
    found = []
    if recorded_digest(LOCK) != digest(deployed_inputs()):
        found.append(f"{LOCK.relative_to(ROOT)} was not resolved from requirements.in as it is")
    if recorded_digest(DEV_LOCK) != digest(dev_inputs()):
        found.append(f"{DEV_LOCK.relative_to(ROOT)} was not resolved from pyproject.toml as it is")
    if pins(SCAFFOLD.read_text()) != pins(LOCK.read_text()):
        found.append(f"the scaffold's pins differ from {LOCK.relative_to(ROOT)}")
    return found


def _uv() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is not installed: make .venv/.installed (the dev extra has it)")
    return uv


def _compile(args: list[str], output: Path, inputs: str, *, upgrade: bool) -> None:
    """``uv pip compile`` with hashes into ``output``, then the inputs' digest under the
    header uv writes (its first comment lines)."""
    subprocess.run(
        [
            _uv(),
            "pip",
            "compile",
            *args,
            "--generate-hashes",
            "--quiet",
            *(["--upgrade"] if upgrade else []),
            "--custom-compile-command",
            "make lock",
            "--output-file",
            str(output),
        ],
        check=True,
        cwd=ROOT,
    )
    lines = output.read_text().splitlines(keepends=True)
    header = 0
    while header < len(lines) and lines[header].startswith("#"):
        header += 1
    lines.insert(header, f"{DIGEST} {digest(inputs)}\n")
    output.write_text("".join(lines))


def resolve(*, upgrade: bool = False) -> None:
    _compile(
        [str(SOURCE), "--python-version", RUNTIME, "--python-platform", PLATFORM],
        LOCK,
        deployed_inputs(),
        upgrade=upgrade,
    )
    DEV_LOCK.parent.mkdir(exist_ok=True)
    extras = [arg for extra in DEV_EXTRAS for arg in ("--extra", extra)]
    # Under the deployed lock: the tests run the versions the functions deploy.
    held = ["--constraint", str(LOCK), "--universal", "--python-version", DEV_PYTHON]
    _compile(
        [str(PYPROJECT), *extras, *held],
        DEV_LOCK,
        dev_inputs(),
        upgrade=upgrade,
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
    parser.add_argument("--upgrade", action="store_true", help="newest versions allowed")
    args = parser.parse_args()
    if args.check:
        if stale := stale_locks():
            raise SystemExit("run make lock: " + "; ".join(stale))
        return
    resolve(upgrade=args.upgrade)
    changed = write_scaffold()
    for lock in (LOCK, DEV_LOCK):
        print(f"locked {len(pins(lock.read_text()))} packages into {lock.relative_to(ROOT)}")
    if changed:
        print(f"and wrote the deployed pins into {SCAFFOLD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
