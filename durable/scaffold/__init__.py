"""``durable init``: a project of your own with this repo's layout.

The files under ``project/`` are templates (``.tmpl``, so no tool here takes them for
code); ``{{name}}`` placeholders are filled in, ``PACKAGE`` names the user's package and
``gitignore`` becomes ``.gitignore``. The stack template is the one this repo deploys
(``template.yaml``; a test renders it back and compares), so a project starts with every
table, function, permission and alarm the library needs. ``stack.yaml`` is the project's
own part of the stack (its policies, variables and secrets, ``durable.local.overlay``):
written once here, never by the library again, so a new ``template.yaml`` can replace
the old one whole.

Nothing a project holds names this machine: the library is a version pin
(``durable-lambda==X.Y.Z``), and when this copy was installed from a wheel file, that wheel
is copied into the project's ``wheels/`` folder, where ``make``, ``deploy/lambda``'s build
and its requirements point pip (relative paths), so a clone on another machine installs
and builds the same library. A library from an index (PyPI) needs no folder.
"""

from __future__ import annotations

import keyword
import re
import shutil
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from urllib.parse import unquote, urlparse

from durable.errors import InvalidInput

PROJECT = "project"
TMPL = ".tmpl"
LIBRARY = "durable-lambda"
WHEELS = "wheels"  # the project's folder of wheels pip may install from (relative)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\s*\[(?P<extras>[^\]]*)\])?(?P<rest>.*)$"
)


def render(text: str, values: dict[str, str]) -> str:
    """``text`` with each ``{{name}}`` replaced; an unknown name is a bug, not a blank."""

    def fill(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return _PLACEHOLDER.sub(fill, text)


def stack_template(values: dict[str, str]) -> str:
    """The stack template, rendered (``app_reference``, ``code_comment``,
    ``new_layouts``)."""
    return render(_root().joinpath("template.yaml" + TMPL).read_text(), values)


def check_name(name: str) -> str:
    """A project name that is also a Python package name once ``-`` becomes ``_``."""
    package = name.replace("-", "_")
    if not package.isidentifier() or keyword.iskeyword(package) or not name[0].isalpha():
        raise InvalidInput(
            f"project name {name!r} must start with a letter and hold only letters, digits, "
            "'-' and '_' (it also names the Python package), e.g. 'order-flows'",
            field="name",
        )
    return package


def init(dest: Path, name: str | None = None, *, requirement: str | None = None) -> list[Path]:
    """Write a new project into ``dest`` (missing or empty); returns the files written.

    ``requirement`` (default: this copy's version) is written as given, except a local
    wheel (``name @ file:///.../x.whl``): that becomes a version pin and the wheel is
    copied into ``wheels/``, since an absolute path works on this machine alone."""
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise InvalidInput(
            f"{dest} is not empty: durable init writes a new project; pick a new folder",
            field="dir",
        )
    project = name or dest.name
    package = check_name(project)
    wheel = installed_wheel() if requirement is None else None
    requirement = requirement or default_requirement()
    with_extra(requirement, "local")  # a malformed one is refused before anything is written
    requirement, given_wheel = portable(requirement)
    wheel = given_wheel or wheel
    values = {
        "project": project,
        "package": package,
        "requirement": requirement,
        "local_requirement": with_extra(requirement, "local"),
        "find_links": (
            f"--find-links ./{WHEELS}  # the library's wheel, copied here by durable init"
            if wheel
            else f"# (no ./{WHEELS} folder: the library comes from the package index)"
        ),
        "app_reference": f"{package}.workflows:app",
        "new_layouts": "true",  # a new stack: no worker from before issue 35's layouts
        "code_comment": (
            "Symlinks to handlers/ and your package plus requirements.txt (the library and "
            "your dependencies): the functions get that code and nothing else."
        ),
    }
    written: list[Path] = []
    for source, relative in _templates(_root()):
        target = dest / _target_path(relative, package)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(source.read_text(), values))
        written.append(target)
    lambda_dir = dest / "deploy" / "lambda"
    linked = ["handlers", package]
    if wheel is not None:
        (dest / WHEELS).mkdir()
        copied = dest / WHEELS / wheel.name
        shutil.copyfile(wheel, copied)
        written.append(copied)
        # SAM copies the function's folder (following links) before make runs there: the
        # link takes the wheels along, where requirements.txt's relative --find-links is.
        linked.append(WHEELS)
    for link in linked:
        (lambda_dir / link).symlink_to(Path("..") / ".." / link, target_is_directory=True)
    return written


def portable(requirement: str) -> tuple[str, Path | None]:
    """``requirement`` as a project can commit it, and the local wheel to copy: ``name @
    file:///w/durable_lambda-0.1.0-py3-none-any.whl`` -> (``name==0.1.0``, that file). A
    local folder (a checkout) becomes a pin of this version with no wheel to copy; any
    other requirement is kept."""
    match = _REQUIREMENT.match(requirement)
    rest = match.group("rest").strip() if match else ""
    if match is None or not rest.startswith("@"):
        return requirement, None
    url = rest.removeprefix("@").strip()
    if not url.startswith("file:"):
        return requirement, None
    path = Path(unquote(urlparse(url).path))
    extras = f"[{match.group('extras')}]" if match.group("extras") else ""
    if path.suffix == ".whl":
        # A wheel's name is distribution-version(-build)-python-abi-platform.whl (PEP 427).
        parts = path.name.removesuffix(".whl").split("-")
        if len(parts) not in (5, 6) or not path.is_file():
            raise InvalidInput(
                f"{url} is not a wheel file here (durable init copies it into the project's "
                f"{WHEELS}/ folder), e.g. 'durable-lambda @ file:///path/"
                "durable_lambda-0.1.0-py3-none-any.whl'",
                field="requirement",
            )
        return f"{match.group('name')}{extras}=={parts[1]}", path
    return f"{match.group('name')}{extras}=={library_version()}", None


def with_extra(requirement: str, extra: str) -> str:
    """``durable-lambda>=1`` -> ``durable-lambda[local]>=1`` (also ``name @ url`` forms)."""
    match = _REQUIREMENT.match(requirement)
    if match is None or any(c in requirement for c in '"\\\n\r'):
        raise InvalidInput(
            f"requirement {requirement!r} must be one line, without quotes or backslashes, "
            "starting with a distribution name, e.g. 'durable-lambda>=0.1' or "
            "'durable-lambda @ file:///path/to.whl'",
            field="requirement",
        )
    extras = [e for e in (match.group("extras") or "").split(",") if e.strip()]
    return f"{match.group('name')}[{','.join([*extras, extra])}]{match.group('rest')}"


def default_requirement() -> str:
    """How a new project depends on the library: this version, pinned (the tested pins of
    deploy/lambda/requirements.txt are this version's)."""
    return f"{LIBRARY}=={library_version()}"


def installed_from() -> str:
    """The URL this copy was installed from when that was a file or folder (a wheel
    handed around, a checkout; PEP 610's ``direct_url.json``), else ``""`` (an index)."""
    import json
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        origin = distribution(LIBRARY).read_text("direct_url.json")
    except PackageNotFoundError:
        origin = None
    url = str(json.loads(origin).get("url", "")) if origin else ""
    return url if url.startswith("file://") else ""


def installed_wheel() -> Path | None:
    """The wheel file this copy was installed from, if it is still there."""
    url = installed_from()
    path = Path(unquote(urlparse(url).path)) if url else None
    return path if path is not None and path.suffix == ".whl" and path.is_file() else None


def library_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(LIBRARY)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0.1.0"


def _root() -> Traversable:
    return resources.files(__name__).joinpath(PROJECT)


def _templates(folder: Traversable, prefix: str = "") -> list[tuple[Traversable, str]]:
    found: list[tuple[Traversable, str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        relative = f"{prefix}{entry.name}"
        if entry.is_dir():
            found += _templates(entry, relative + "/")
        elif entry.name.endswith(TMPL):
            found.append((entry, relative.removesuffix(TMPL)))
    return found


def _target_path(relative: str, package: str) -> str:
    renamed = {"gitignore": ".gitignore", "PACKAGE": package}
    return "/".join(renamed.get(part, part) for part in relative.split("/"))
