"""``durable sam``: the AWS SAM CLI, installed on first use, run with the Python it needs.

A project made by ``durable init`` builds and checks its stack with SAM (``make build``,
``make validate``). Two things trip a new user there, and this module removes both:

* the SAM CLI pins its own boto3, cfn-lint and friends, so it cannot share the project's
  virtualenv; it gets one of its own in the user cache (``DURABLE_LOCAL_HOME``, default
  ``~/.cache/durable-local``), installed from PyPI once, with a progress line;
* ``sam build`` compiles the functions with the interpreter of their runtime
  (``python3.12``) and fails late with a vague message when that is not on ``PATH``. The
  interpreter is looked up where installers put it (``PATH``, pyenv, uv) and put on the
  SAM process's ``PATH``; when there is none the error says how to get one.

Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Sequence
from pathlib import Path

from durable.local.servers.dynamodb_local import local_home

SAM_VERSION = "1.170.0"
RUNTIME = "3.12"  # the template's functions: Runtime python3.12


class SamError(RuntimeError):
    """The SAM CLI could not be installed or the runtime's Python was not found."""


def sam_home() -> Path:
    return local_home() / f"sam-venv-{SAM_VERSION}"


def ensure_sam(say: Callable[[str], None] = print) -> Path:
    """The ``sam`` executable, installed into its own virtualenv on first use."""
    home = sam_home()
    sam = home / "bin" / "sam"
    # The marker is written last: an interrupted install is redone, never half-trusted.
    if (home / ".installed").exists():
        return sam
    say(f"• first use: installing the AWS SAM CLI {SAM_VERSION} from PyPI into {home}…")
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(with_pip=True).create(home)
    pip = [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = subprocess.run(
        [*pip, "--disable-pip-version-check", f"aws-sam-cli=={SAM_VERSION}"], check=False
    )
    if done.returncode != 0:
        raise SamError(
            f"installing aws-sam-cli=={SAM_VERSION} failed (pip exit {done.returncode}, "
            "above); check that PyPI is reachable, then run the command again"
        )
    (home / ".installed").touch()
    return sam


def find_runtime_python(version: str = RUNTIME) -> Path | None:
    """A ``pythonX.Y`` interpreter of the functions' runtime that runs: PATH first, then
    the version managers' folders (pyenv, uv), newest patch release first.

    Each candidate is run once: a pyenv shim is on PATH for every version pyenv has, but
    fails unless that version is selected (``pyenv global``), and SAM would fail with it.
    """
    name = f"python{version}"
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    uv_root = os.environ.get("UV_PYTHON_INSTALL_DIR") or str(
        Path.home() / ".local" / "share" / "uv" / "python"
    )
    candidates = [found] if (found := shutil.which(name)) else []
    for pattern in (
        f"{pyenv_root}/versions/{version}.*/bin/{name}",
        f"{uv_root}/cpython-{version}.*/bin/{name}",
    ):
        candidates += sorted(glob.glob(pattern), key=_patch_level, reverse=True)
    for candidate in candidates:
        if _reports(candidate, version):
            return Path(candidate)
    return None


def _reports(python: str, version: str) -> bool:
    """Whether ``python`` starts and is ``version``."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def _patch_level(path: str) -> tuple[int, ...]:
    """``.../3.12.10/bin/python3.12`` sorts after ``.../3.12.9/...``."""
    for part in Path(path).parts:
        pieces = part.removeprefix("cpython-").split("-")[0].split(".")
        if len(pieces) == 3 and all(p.isdigit() for p in pieces):
            return tuple(int(p) for p in pieces)
    return ()


def runtime_env(python: Path) -> dict[str, str]:
    """The environment for SAM: the runtime's Python first on PATH, no telemetry."""
    env = dict(os.environ)
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("SAM_CLI_TELEMETRY", "0")
    return env


def missing_runtime_message(version: str = RUNTIME) -> str:
    return (
        f"sam build needs python{version} (the functions' runtime) and none was found on "
        "PATH, in pyenv or in uv's folder. Install one, e.g. `pyenv install "
        f"{version}`, `uv python install {version}` or your system's python{version} "
        "package, then run this again."
    )


def build_dir(args: Sequence[str]) -> Path:
    """Where ``sam build ARGS`` puts the functions (``--build-dir``/``-b``, else SAM's
    default, relative to the current folder)."""
    for i, arg in enumerate(args):
        if arg in ("--build-dir", "-b") and i + 1 < len(args):
            return Path(args[i + 1])
        if arg.startswith("--build-dir="):
            return Path(arg.split("=", 1)[1])
    return Path(".aws-sam") / "build"


def compile_build(folder: Path, python: Path) -> int:
    """Writes the bytecode of every module in ``folder`` with the runtime's interpreter;
    returns how many modules it holds.

    ``sam build`` unzips wheels and copies sources without compiling them, and Lambda's
    ``/var/task`` is read-only, so without ``.pyc`` files every cold start compiles every
    module it imports (botocore, pydantic, the engine) and throws the result away: about
    two thirds of a worker's cold start here (docs/performance.md). The files are
    ``unchecked-hash`` ones: a deployment package is never edited in place, and a zip
    keeps modification times to 2 seconds, which would make timestamp-checked files look
    stale."""
    done = subprocess.run(
        [
            str(python),
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(folder),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SamError(f"compiling {folder} with {python} failed:\n{done.stdout}{done.stderr}")
    return sum(1 for _ in folder.rglob("*.py"))


def run(args: Sequence[str]) -> int:
    """``sam ARGS`` (``cfn-lint ARGS`` runs the linter SAM installed); ``build`` first
    checks that the runtime's Python exists, and compiles what it built (``compile_build``)."""
    sam = ensure_sam()
    if args and args[0] == "cfn-lint":
        sam, args = sam.with_name("cfn-lint"), args[1:]
    env = dict(os.environ)
    env.setdefault("SAM_CLI_TELEMETRY", "0")
    python = None
    if args and args[0] == "build":
        python = find_runtime_python()
        if python is None:
            raise SamError(missing_runtime_message())
        env = runtime_env(python)
    code = subprocess.run([str(sam), *args], env=env, check=False).returncode
    folder = build_dir(args)
    if code == 0 and python is not None and folder.is_dir():
        modules = compile_build(folder, python)
        print(
            f"• compiled the {modules} modules of {folder} for {python.name} (bytecode in the "
            "package: Lambda's /var/task is read-only, so a cold start would compile them)"
        )
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m durable.local.sam install`` prints the sam executable (CI scripts)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args == ["install"]:
            print(ensure_sam(say=lambda text: print(text, file=sys.stderr)))
            return 0
        return run(args)
    except SamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
