"""The API reference pages, rendered from the docstrings into docs/reference/*.md.

``python -m infra.reference`` rewrites, in each page, the part
between a marker and its end::

    <!-- reference: durable.engine.context.Context -->
    ... the class's signature, docstring and public members, as Markdown ...
    <!-- end reference -->

with what the code says now, and leaves the prose around it as written. The pages are
plain Markdown, so they read the same on GitHub, in an editor and in the built site (which
renders them as any other page). ``python -m infra.reference --check`` exits non-zero when
a page differs from what the docstrings give; tests/unit/test_reference_pages.py runs it.

A marker may name the members of a module to render, in order, in place of the module
itself: ``<!-- reference: durable.errors members: DurableError TerminalError -->``.

The docstrings are read as the source has them (griffe, the reader behind mkdocstrings,
Google style), nothing is imported or run, so a page is the same on every machine.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "reference"
PACKAGE = "durable"
WIDTH = 88  # a signature longer than this is written one parameter a line

BLOCK = re.compile(
    r"(?P<open><!-- reference: (?P<spec>[^>]*?) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end reference -->)",
    re.DOTALL,
)
NOTICE = (
    "<!-- Rendered from the docstrings by infra/reference.py (python -m infra.reference): "
    "edit the docstring, not this block. -->"
)


class UnknownObject(Exception):
    """A marker names an object the package does not have."""


def load() -> griffe.Module:
    # resolve_aliases: `durable.testing.LocalRunner` and the like are re-exports; the page
    # documents the object they name.
    package = griffe.load(
        PACKAGE, search_paths=[ROOT], docstring_parser="google", resolve_aliases=True
    )
    assert isinstance(package, griffe.Module)
    return package


def render_page(text: str, package: griffe.Module) -> str:
    """The page with every reference block rendered again from the docstrings."""

    def block(match: re.Match[str]) -> str:
        body = render_spec(match["spec"], package)
        return f"{match['open']}{NOTICE}\n\n{body}\n{match['close']}"

    return BLOCK.sub(block, text)


def render_spec(spec: str, package: griffe.Module) -> str:
    path, _, members = spec.partition(" members:")
    obj = lookup(package, path.strip())
    if members.strip():
        parts = [
            render_object(lookup(package, f"{obj.path}.{name}"), 2) for name in members.split()
        ]
        return "\n".join(parts)
    return render_object(obj, 2)


def lookup(package: griffe.Module, path: str) -> griffe.Object:
    if not path.startswith(f"{PACKAGE}.") and path != PACKAGE:
        raise UnknownObject(f"{path}: not in the {PACKAGE} package")
    relative = path.removeprefix(PACKAGE).removeprefix(".")
    try:
        found = package[relative] if relative else package
    except KeyError:
        raise UnknownObject(f"{path}: no such object") from None
    while isinstance(found, griffe.Alias):
        found = found.final_target
    assert isinstance(found, griffe.Object)
    return found


# --- one object ---------------------------------------------------------------------------


def render_object(obj: griffe.Object, level: int, owner: str = "") -> str:
    name = f"{owner}.{obj.name}" if owner else obj.name
    out = [f"{'#' * min(level, 6)} `{name}`", ""]
    signature = _signature(obj)
    if signature:
        out += ["```python", signature, "```", ""]
    if obj.docstring is not None:
        out += [_docstring(obj.docstring), ""]
    if isinstance(obj, griffe.Class):
        for member in _members(obj):
            out.append(render_object(member, level + 1, owner=name))
    return "\n".join(out)


def _members(cls: griffe.Class) -> Iterator[griffe.Object]:
    """The public members declared in the class that have a docstring, in source order
    (what the site showed: members_order source, no private ones, none without a docstring)."""
    members = []
    for member in cls.members.values():
        if isinstance(member, griffe.Alias) or member.name.startswith("_"):
            continue
        if member.docstring is None or not member.docstring.value.strip():
            continue
        members.append(member)
    yield from sorted(members, key=lambda m: m.lineno or 0)


def _signature(obj: griffe.Object) -> str:
    if isinstance(obj, griffe.Class):
        init = obj.members.get("__init__")
        params = init.parameters if isinstance(init, griffe.Function) else None
        bases = ", ".join(str(base) for base in obj.bases)
        head = f"class {obj.name}"
        if params is not None:
            return _call(head, params, returns=None)
        return f"{head}({bases})" if bases else head
    if isinstance(obj, griffe.Function):
        if "property" in obj.labels:
            annotation = f": {obj.returns}" if obj.returns is not None else ""
            return f"{obj.name}{annotation}  # property"
        prefix = "async def" if "async" in obj.labels else "def"
        return _call(f"{prefix} {obj.name}", obj.parameters, returns=obj.returns)
    if isinstance(obj, griffe.Attribute):
        annotation = f": {obj.annotation}" if obj.annotation is not None else ""
        if obj.value is None or obj.parent is None or not obj.parent.is_module:
            return f"{obj.name}{annotation}"  # a field's default is in the class's signature
        one_line = f"{obj.name}{annotation} = {obj.value}"
        elements = getattr(obj.value, "elements", None)
        if len(one_line) <= WIDTH or not isinstance(elements, list):
            return one_line
        # A long tuple or list (CRASH_TARGETS): one element a line, as ruff would write it.
        brackets = "[]" if str(obj.value).startswith("[") else "()"
        inner = "".join(f"    {element},\n" for element in elements)
        return f"{obj.name}{annotation} = {brackets[0]}\n{inner}{brackets[1]}"
    return ""


def _call(head: str, params: griffe.Parameters, returns: object) -> str:
    shown: list[str] = []
    star_done = False
    for position, param in enumerate(params):
        if position == 0 and param.name in {"self", "cls"}:
            continue
        kind = param.kind
        if kind is griffe.ParameterKind.keyword_only and not star_done:
            shown.append("*")
        if kind in {griffe.ParameterKind.var_positional, griffe.ParameterKind.keyword_only}:
            star_done = True
        prefix = {
            griffe.ParameterKind.var_positional: "*",
            griffe.ParameterKind.var_keyword: "**",
        }.get(kind, "")
        text = f"{prefix}{param.name}"
        if param.annotation is not None:
            text += f": {param.annotation}"
        if param.default is not None and kind not in {
            griffe.ParameterKind.var_positional,
            griffe.ParameterKind.var_keyword,
        }:
            text += f" = {param.default}" if param.annotation is not None else f"={param.default}"
        shown.append(text)
        if kind is griffe.ParameterKind.positional_only and (
            position + 1 == len(params)
            or params[position + 1].kind is not griffe.ParameterKind.positional_only
        ):
            shown.append("/")
    tail = f" -> {returns}" if returns is not None else ""
    one_line = f"{head}({', '.join(shown)}){tail}"
    if len(one_line) <= WIDTH:
        return one_line
    inner = "".join(f"    {item},\n" for item in shown)
    return f"{head}(\n{inner}){tail}"


# --- docstrings ---------------------------------------------------------------------------


def _docstring(docstring: griffe.Docstring) -> str:
    parts: list[str] = []
    for section in docstring.parsed:
        kind = section.kind
        if kind is griffe.DocstringSectionKind.text:
            parts.append(str(section.value).strip())
        elif kind is griffe.DocstringSectionKind.examples:
            for sub_kind, text in section.value:
                if sub_kind is griffe.DocstringSectionKind.examples:
                    parts.append(f"```pycon\n{text.strip()}\n```")
                else:
                    parts.append(str(text).strip())
        elif kind is griffe.DocstringSectionKind.admonition:
            admonition = section.value
            title = section.title or admonition.kind.capitalize()
            parts.append(f"**{title}**\n\n{admonition.contents.strip()}")
        elif isinstance(section.value, list):
            title = section.title or kind.value.replace("-", " ").capitalize()
            items = [_item(element) for element in section.value]
            parts.append(f"**{title}**\n\n" + "\n".join(items))
        else:
            parts.append(str(section.value).strip())
    return "\n\n".join(part for part in parts if part)


def _item(element: object) -> str:
    name = getattr(element, "name", "") or ""
    annotation = getattr(element, "annotation", None)
    description = str(getattr(element, "description", "") or "").strip()
    label = " ".join(
        bit
        for bit in (f"`{name}`" if name else "", f"(`{annotation}`)" if annotation else "")
        if bit
    )
    if not label:
        label = "-"
    text = f"- {label}: {description}" if description else f"- {label}"
    return text.replace("\n", "\n  ")


# --- the pages ----------------------------------------------------------------------------


def pages() -> list[Path]:
    return sorted(path for path in PAGES.glob("*.md") if BLOCK.search(path.read_text()))


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    args.add_argument("--check", action="store_true", help="fail if a page is stale; write nothing")
    options = args.parse_args(argv)
    package = load()
    stale = []
    for path in pages():
        text = path.read_text()
        rendered = render_page(text, package)
        if rendered == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not options.check:
            path.write_text(rendered)
    for path in stale:
        verb = "stale" if options.check else "rewrote"
        print(f"{verb}: {path}", file=sys.stderr)
    if options.check and stale:
        print("run: python -m infra.reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
