"""The web console's files as ``durable dev`` and ``durable console`` serve them."""

from __future__ import annotations

import pytest

from durable.console import HEADERS, asset, is_console_path

pytestmark = pytest.mark.unit


def test_the_page_carries_the_token_and_the_stacks_label_escaped() -> None:
    found = asset("/console/", token='t"><script>x</script>', where="<b>prod</b>")
    assert found is not None
    content_type, data = found
    page = data.decode()
    assert content_type.startswith("text/html")
    assert 'content="t&quot;&gt;&lt;script&gt;x&lt;/script&gt;"' in page
    assert "&lt;b&gt;prod&lt;/b&gt;" in page and "<b>prod" not in page
    assert "{{" not in page


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/console", "text/html"),
        ("/console/index.html", "text/html"),
        ("/console/?since=1h", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css?v=2", "text/css"),
    ],
)
def test_each_file_has_its_type(path: str, kind: str) -> None:
    found = asset(path)
    assert found is not None and found[0].startswith(kind) and found[1]


@pytest.mark.parametrize(
    "path",
    [
        "/console/../cli.py",
        "/console/assets/index.html",
        "/console/nope.js",
        "/console/__init__.py",
    ],
)
def test_nothing_else_is_served(path: str) -> None:
    assert asset(path) is None


def test_console_paths_and_the_pages_policy() -> None:
    assert is_console_path("/console") and is_console_path("/console/x")
    assert not is_console_path("/consoles") and not is_console_path("/runs")
    policy = HEADERS["Content-Security-Policy"]
    # only its own script, no inline code, its own origin for API calls, never framed
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_the_script_builds_nodes_never_html_text() -> None:
    """Values from a run (inputs, error messages) reach the page as text nodes: the
    script never assigns markup."""
    found = asset("/console/console.js")
    assert found is not None
    script = found[1].decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
