"""mkdocs hook: the CLI and HTTP API reference pages, generated at every build.

The CLI page comes from ``durable.cli.parser()`` (every command, argument and default as
argparse knows them) and the HTTP page from the OpenAPI document the API serves
(``durable.api.openapi``), so neither can go stale: a new command or route appears on the
next ``make docs``. The document itself is published beside the page as ``openapi.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

CLI_PAGE = "reference/cli.md"
HTTP_PAGE = "reference/http-api.md"
OPENAPI_FILE = "reference/openapi.json"
WIDTH = 96  # usage lines wrap here, whatever the terminal of the build


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from durable.api.openapi import render
    from durable.cli import parser

    document = render()
    files.append(File.generated(config, CLI_PAGE, content=cli_markdown(parser())))
    files.append(File.generated(config, HTTP_PAGE, content=http_markdown(json.loads(document))))
    files.append(File.generated(config, OPENAPI_FILE, content=document))
    return files


# --- the CLI ------------------------------------------------------------------------------


def cli_markdown(root: argparse.ArgumentParser) -> str:
    lines = [
        "# Command line",
        "",
        "<!-- Generated from durable.cli.parser() by docs/hooks/reference.py: do not edit. -->",
        "",
        f"`{root.prog}` is installed with the package. {_sentence(root.description)}",
        "The options before the command apply to every command that talks to the API.",
        "",
    ]
    lines += _command(root, summary=None, depth=0)
    return "\n".join(lines) + "\n"


def _command(parser: argparse.ArgumentParser, summary: str | None, depth: int) -> list[str]:
    """The section of one (sub)command, then those of its subcommands: the command and
    its direct subcommands are level-2 headings, deeper ones level 3."""
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=WIDTH)
    level = 2 if depth <= 1 else 3
    out = [f"{'#' * level} `{parser.prog}` {{#{_slug(parser.prog)}}}", ""]
    if summary:
        out += [_sentence(summary), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [_argument_row(a) for a in parser._actions if _documented(a)]
    if rows:
        out += ["| argument | default | description |", "| --- | --- | --- |", *rows, ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            commands = action.choices.items()
            out += ["| command | what it does |", "| --- | --- |"]
            out += [
                f"| [`{name}`](#{_slug(sub.prog)}) | {_cell(helps.get(name, ''))} |"
                for name, sub in commands
            ]
            out.append("")
            for name, sub in commands:
                out += _command(sub, helps.get(name), depth + 1)
    return out


def _documented(action: argparse.Action) -> bool:
    return (
        not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and action.help != argparse.SUPPRESS
    )


def _argument_row(action: argparse.Action) -> str:
    if action.option_strings:
        name = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0:
            name += f" `{action.metavar or action.dest.upper()}`"
    else:
        name = f"`{action.metavar or action.dest}`"
    required = action.required or not action.option_strings
    default = "" if action.default in (None, False, argparse.SUPPRESS) else f"`{action.default}`"
    text = action.help or ""
    if action.choices is not None:
        text += f" (one of {', '.join(f'`{c}`' for c in action.choices)})"
    if required and action.option_strings:
        text = f"**required.** {text}"
    return f"| {name} | {default} | {_cell(text.strip())} |"


# --- the HTTP API -------------------------------------------------------------------------


def http_markdown(document: dict[str, Any]) -> str:
    info = document.get("info", {})
    lines = [
        "# HTTP API",
        "",
        "<!-- Generated from the API's OpenAPI document by docs/hooks/reference.py: do not "
        "edit. -->",
        "",
        f"{_sentence(info.get('description'))} This page is generated from the OpenAPI "
        f"document the API serves at `GET /openapi.json` ({info.get('title', 'the API')}, "
        f"version {info.get('version', '?')}); the same document is "
        "[published with these docs](openapi.json).",
        "",
        'Every error answer has one shape, `{"error": {"type", "message", "field"}}` '
        "([ErrorResponse](#schema-ErrorResponse)). A path asked with a method it does not "
        "answer is `405` with an `Allow` header; an unknown path is `404`.",
        "",
        "| method | path | authorization | what it does |",
        "| --- | --- | --- | --- |",
    ]
    operations = [
        (path, method, op)
        for path, ops in document.get("paths", {}).items()
        for method, op in ops.items()
    ]
    for path, method, op in operations:
        lines.append(
            f"| `{method.upper()}` | [`{path}`](#{_op_slug(method, path)}) | {_auth(op)} "
            f"| {_cell(op.get('summary', ''))} |"
        )
    lines.append("")
    for tag in sorted({(op.get("tags") or ["other"])[0] for _, _, op in operations}):
        lines += [f"## {tag.capitalize()}", ""]
        for path, method, op in operations:
            if (op.get("tags") or ["other"])[0] == tag:
                lines += _operation(path, method, op)
    lines += ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += _schema(name, schema)
    return "\n".join(lines) + "\n"


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    out = [f"### `{method.upper()} {path}` {{#{_op_slug(method, path)}}}", ""]
    out += [_sentence(op.get("summary")), "", f"Authorization: {_auth(op)}.", ""]
    if op.get("description"):
        out += [op["description"], ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | description |", "| --- | --- | --- | --- |"]
        for p in params:
            name = f"`{p['name']}`" + (" (required)" if p.get("required") else "")
            out.append(
                f"| {name} | {p.get('in', '')} | {_cell(_type(p.get('schema', {})))} "
                f"| {_cell(p.get('description') or p.get('schema', {}).get('description', ''))} |"
            )
        out.append("")
    body = op.get("requestBody")
    if body:
        schema = body.get("content", {}).get("application/json", {}).get("schema", {})
        text = body.get("description") or ""
        out += [f"Request body ({_type(schema)}){': ' + text if text else ''}", ""]
    out += ["| status | meaning | body |", "| --- | --- | --- |"]
    for status, response in op.get("responses", {}).items():
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        out.append(
            f"| `{status}` | {_cell(response.get('description', ''))} "
            f"| {_cell(_type(schema)) if schema is not None else ''} |"
        )
    return [*out, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name} {{#schema-{name}}}", ""]
    if schema.get("description"):
        out += [" ".join(str(schema["description"]).split()), ""]
    properties = schema.get("properties", {})
    if not properties:
        return [*out, f"Type: {_type(schema)}.", ""]
    required = set(schema.get("required", []))
    out += ["| field | type | description |", "| --- | --- | --- |"]
    for field, prop in properties.items():
        label = f"`{field}`" + (" (required)" if field in required else "")
        default = prop.get("default")
        text = prop.get("description", "")
        if default not in (None, [], {}):
            text = f"{text} Default `{json.dumps(default)}`.".strip()
        out.append(f"| {label} | {_cell(_type(prop))} | {_cell(text)} |")
    return [*out, ""]


def _type(schema: dict[str, Any] | None) -> str:
    """A schema in a few words: ``string``, ``integer (1 to 100)``, a link to a model."""
    if not schema:
        return "any JSON"
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = str(schema.get("type", "any JSON"))
    if kind == "array":
        kind = f"array of {_type(schema.get('items'))}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = f"object of {_type(schema['additionalProperties'])}"
    limits = [
        f"{label} {_number(schema[key])}"
        for key, label in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
            ("minLength", "length ≥"),
            ("maxLength", "length ≤"),
        )
        if key in schema
    ]
    return f"{kind} ({', '.join(limits)})" if limits else kind


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _auth(op: dict[str, Any]) -> str:
    return "IAM (SigV4)" if op.get("security") else "none (token or signature)"


# --- text helpers -------------------------------------------------------------------------


def _op_slug(method: str, path: str) -> str:
    return _slug(f"{method} {path}")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _sentence(text: str | None) -> str:
    text = " ".join((text or "").split())
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", ")")) else text + "."


def _cell(text: str) -> str:
    """Text that stays in one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")
