"""The browser code's shape (issue 24): ES modules with explicit imports, no globals of
the app's own, no URL written in a script, and no Markdown parsed in the page.

Static checks over static/js and the templates; tests/browser/test_chat.py checks the
same in Chromium (the page adds no global).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "static" / "js").glob("*.js"))
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))
IMPORT = re.compile(r"""^\s*(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']""", re.M)


def code(path: Path) -> str:
    """A script without its comments (a comment may name a URL to explain it)."""
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"(?m)^\s*//.*$", "", text)


def test_there_are_scripts_to_check():
    assert {path.name for path in SCRIPTS} >= {"chat.js", "config.js", "thread.js", "render.js"}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_script_writes_an_api_url(path):
    """Every URL comes from the server's config (chat/page_config.py)."""
    assert path.read_text().count('"/agents-api') == 0  # the issue's own check
    assert "/agents-api" not in code(path)
    assert not re.search(r"""["'`]/(sessions|ws|search|admin)/""", code(path)), path.name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_script_makes_a_global_of_its_own(path):
    text = code(path)
    assert not re.search(r"\b(window|globalThis|self)\.[\w$]+\s*=(?!=)", text), path.name
    assert not re.search(r"\b(window|globalThis)\[", text), path.name
    assert "(function (global)" not in text  # the old classic-script wrapper


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_import_is_explicit_and_resolves(path):
    for target in IMPORT.findall(path.read_text()):
        assert target.startswith("./"), (path.name, target)
        assert (path.parent / target).is_file(), (path.name, target)


SERVER_HTML = {"render.js", "sessions.js", "model-badge.js"}


def test_the_page_parses_no_markdown_and_writes_html_only_from_the_server():
    """innerHTML takes the server's sanitized rendering (render.js) or the server's own
    template (the sessions list, the model badge), nothing a script assembled from text."""
    for path in SCRIPTS:
        for line in code(path).splitlines():
            if "innerHTML" in line:
                assert path.name in SERVER_HTML, (path.name, line)
    assert not (ROOT / "static" / "js" / "markdown.js").exists()


def test_every_script_tag_is_a_module_or_data():
    for path in TEMPLATES:
        for tag in re.findall(r"<script\b[^>]*>", path.read_text()):
            if "json_script" in tag:
                continue
            assert 'type="module"' in tag or 'type="application/json"' in tag, (path, tag)
