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
    checks that the runtime's Python exists, and compiles what it built (``compile_build``).

    A project with a ``stack.yaml`` beside its template (``durable.local.overlay``) has
    ``build``, ``validate``, ``sync`` and a bare ``cfn-lint`` given the merged template;
    ``deploy`` and ``package`` refuse a build that is not of the current two files."""
    args, architecture = with_architecture(list(args))
    args = with_overlay(args)
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
        if architecture:  # deploy/lambda/Makefile picks the wheels by it
            env["DURABLE_ARCHITECTURE"] = architecture
    code = subprocess.run([str(sam), *args], env=env, check=False).returncode
    folder = build_dir(args)
    if code == 0 and python is not None and folder.is_dir():
        modules = compile_build(folder, python)
        print(
            f"• compiled the {modules} modules of {folder} for {python.name} (bytecode in the "
            "package: Lambda's /var/task is read-only, so a cold start would compile them)"
        )
    return code


ARCHITECTURES = ("arm64", "x86_64")
PARAMETER = "Architecture"  # template.yaml's parameter every function's Architectures uses


def with_architecture(args: list[str]) -> tuple[list[str], str | None]:
    """``build --architecture X``: SAM's arguments with ``Architecture=X`` among the
    parameter overrides, and ``X``, which the makefile build is told through
    ``DURABLE_ARCHITECTURE`` (SAM gives a makefile build no CPU). Without the flag, an
    ``Architecture=X`` override the user passed is ``X``; else None (the template's)."""
    if not args or args[0] != "build":
        return args, None
    architecture = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--architecture" and i + 1 < len(args):
            architecture, i = args[i + 1], i + 2
            continue
        if arg.startswith("--architecture="):
            architecture, i = arg.split("=", 1)[1], i + 1
            continue
        rest.append(arg)
        i += 1
    overrides = _overrides_at(rest)
    if architecture is None:
        for token in rest[overrides:] if overrides is not None else []:
            if token.startswith("--"):
                break
            for pair in token.split():
                if pair.startswith(f"{PARAMETER}=") or pair.startswith(
                    f"ParameterKey={PARAMETER},"
                ):
                    architecture = pair.rsplit("=", 1)[1]
        if architecture is None:
            return rest, None
        return _checked(rest, architecture), architecture
    pair = f"{PARAMETER}={architecture}"
    if overrides is None:
        rest += ["--parameter-overrides", pair]
    else:  # SAM takes the overrides as the words after the flag: one more, first
        rest.insert(overrides, pair)
    return _checked(rest, architecture), architecture


def _overrides_at(args: list[str]) -> int | None:
    """The index of the first value after ``--parameter-overrides``, if it is given."""
    for i, arg in enumerate(args):
        if arg == "--parameter-overrides":
            return i + 1
    return None


def _checked(args: list[str], architecture: str) -> list[str]:
    if architecture not in ARCHITECTURES:
        raise SamError(
            f"--architecture {architecture!r}: Lambda's CPUs are {' and '.join(ARCHITECTURES)}"
        )
    return args


MERGING = ("build", "validate", "sync")
CHECKING = ("deploy", "package")
_TEMPLATE_FLAGS = ("--template-file", "--template", "-t")


def template_arg(args: Sequence[str]) -> tuple[int, Path] | None:
    """Where ``args`` name a template (the value's index, and the path), if they do."""
    for i, arg in enumerate(args):
        if arg in _TEMPLATE_FLAGS and i + 1 < len(args):
            return i + 1, Path(args[i + 1])
        for flag in _TEMPLATE_FLAGS[:2]:
            if arg.startswith(flag + "="):
                return i, Path(arg.split("=", 1)[1])
    return None


def with_overlay(args: list[str]) -> list[str]:
    """``args`` with the merged template in place of ``template.yaml`` when a
    ``stack.yaml`` stands beside it; a deploy of a stale or unmerged build refused. The
    arguments as given when there is no ``stack.yaml``: SAM runs as it always did."""
    from durable.local import overlay

    if not args or args[0] not in (*MERGING, *CHECKING, "cfn-lint"):
        return args
    given = template_arg(args)
    if args[0] == "cfn-lint":
        if len(args) > 1:  # the linter on the files named
            return args
        template = Path(overlay.TEMPLATE)
    elif args[0] in CHECKING:
        return _checked_deploy(args, given)
    else:
        template = given[1] if given else Path(overlay.TEMPLATE)
    project = template.parent
    if not (project / overlay.OVERLAY).is_file() or not template.is_file():
        bare_lint = args[0] == "cfn-lint" and template.is_file()
        return [*args, str(template)] if bare_lint else args
    try:
        merged = overlay.write_merged(project, template)
    except overlay.OverlayError as e:
        raise SamError(str(e)) from e
    shown = os.path.relpath(merged.path)
    print(
        f"• {template.name} + {overlay.OVERLAY} -> {shown} ({merged.overlay.summary()})",
        flush=True,
    )
    for warning in merged.overlay.warnings:
        print(f"! {overlay.OVERLAY}: {warning}", flush=True)
    if args[0] == "cfn-lint":
        return [*args, shown]
    if given:
        index, _ = given
        if args[index].startswith("--"):  # --template-file=PATH
            return [*args[:index], f"--template-file={shown}", *args[index + 1 :]]
        return [*args[:index], shown, *args[index + 1 :]]
    extra = ["--template-file", shown]
    config = project / "samconfig.toml"
    if config.is_file() and not any(a.startswith("--config-file") for a in args):
        # SAM may look for its configuration beside the template it is given.
        extra += ["--config-file", str(config.resolve())]
    return [args[0], *extra, *args[1:]]


def _checked_deploy(args: list[str], given: tuple[int, Path] | None) -> list[str]:
    """A deploy (or package) of a project with ``stack.yaml``: what it deploys must be a
    build of the current ``template.yaml`` + ``stack.yaml``, or the user's policies and
    variables would be silently left out (or stale ones deployed)."""
    from durable.local import overlay

    project = Path(".")
    if not (project / overlay.OVERLAY).is_file() or not (project / overlay.TEMPLATE).is_file():
        return args
    try:
        _, checked, current = overlay.read(project)
    except overlay.OverlayError as e:
        raise SamError(str(e)) from e
    target = given[1] if given else build_dir(args) / "template.yaml"
    if not target.is_file():
        raise SamError(
            f"nothing built to deploy: run `durable sam build` (make build) first; it builds "
            f"{overlay.TEMPLATE} with your {overlay.OVERLAY} ({checked.summary()})"
        )
    recorded = overlay.recorded_digest(target)
    if recorded is None:
        raise SamError(
            f"{target} was not built with {overlay.OVERLAY}: deploying it would leave out your "
            f"policies, variables and secrets ({checked.summary()}); run `durable sam build` "
            "(make build), then deploy"
        )
    if recorded != current:
        raise SamError(
            f"{overlay.TEMPLATE} or {overlay.OVERLAY} changed since {target} was built: run "
            "`durable sam build` (make build) again, then deploy"
        )
    return args


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
