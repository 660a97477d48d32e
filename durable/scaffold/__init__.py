"""``durable init``: a project of your own with this repo's layout.

The files under ``project/`` are templates (``.tmpl``, so no tool here takes them for
code); ``{{name}}`` placeholders are filled in, ``PACKAGE`` names the user's package and
``gitignore`` becomes ``.gitignore``. The stack template is the one this repo deploys
(``template.yaml``; a test renders it back and compares), so a project starts with every
table, function, permission and alarm the library needs. ``stack.yaml`` is the project's
own part of the stack (its policies, variables and secrets, ``durable.local.overlay``):
written once here, never by the library again, so a new ``template.yaml`` can replace
the old one whole.
"""

from __future__ import annotations

import keyword
import re
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from durable.errors import InvalidInput

PROJECT = "project"
TMPL = ".tmpl"
LIBRARY = "durable-lambda"
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
    """Write a new project into ``dest`` (missing or empty); returns the files written."""
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise InvalidInput(
            f"{dest} is not empty: durable init writes a new project; pick a new folder",
            field="dir",
        )
    project = name or dest.name
    package = check_name(project)
    requirement = requirement or default_requirement()
    values = {
        "project": project,
        "package": package,
        "requirement": requirement,
        "local_requirement": with_extra(requirement, "local"),
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
    for linked in ("handlers", package):
        (lambda_dir / linked).symlink_to(Path("..") / ".." / linked, target_is_directory=True)
    return written


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
    """How a new project depends on the library: where this copy was installed from when
    that was a file or folder (a wheel handed around, a checkout; PEP 610's
    ``direct_url.json``), else the index version at least this one."""
    import json
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        origin = distribution(LIBRARY).read_text("direct_url.json")
    except PackageNotFoundError:
        origin = None
    url = str(json.loads(origin).get("url", "")) if origin else ""
    if url.startswith("file://"):
        return f"{LIBRARY} @ {url}"
    return f"{LIBRARY}>={library_version()}"


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
