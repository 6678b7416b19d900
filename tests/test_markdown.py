"""The one Markdown renderer (memory/text/markdown.py): what a reply may become in the page.

Only its own tags and attributes come out, whatever the text; a link is only ever made
for http(s) and mailto addresses; text nested too deep (8,000 quotes) is shown as plain
text, whole, instead of formatted; nothing it is given makes it raise.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.text.markdown import MAX_NESTING, render_markdown

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "s", "code", "pre", "span", "div", "blockquote",
    "ul", "ol", "li", "a", "h3", "h4", "input", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"href", "target", "rel", "class", "start", "type", "checked", "disabled"}

HOSTILE = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> done'
PAYLOADS = [
    HOSTILE,
    "[x](javascript:alert(1)) [y](JAVASCRIPT:alert(1)) <a href=javascript:alert(1)>z</a>",
    '[ok](https://example.com/" onmouseover="alert(1))',
    "```html\n<script>alert(1)</script>\n```",
    "`<b onclick=alert(1)>`",
    "**<svg onload=alert(1)>** _<iframe src=//evil>_",
    "- <style>body{display:none}</style>\n- [a](data:text/html,<script>alert(1)</script>)",
    'https://example.com/"><script>alert(1)</script>',
    "| a | <b>b</b> |\n|---|:-:|\n| <script>alert(1)</script> | [x](javascript:alert(1)) |",
    '| <img src=x onerror=alert(1)> |\n|---|\n| "><svg onload=alert(1)> \\| |',
    "![pixel](https://evil.example/track.png) ![x](javascript:alert(1))",
    "[vb](vbscript:msgbox) [file](file:///etc/passwd) [rel](/admin/) [proto](//evil.example)",
    '<div style="position:fixed">x</div> <span style="color:red">y</span>',
    "- [x] <input type=text value=1 onfocus=alert(1) autofocus>",
    "```js\n</code></pre><script>alert(1)</script>\n```",
    "<!-- <script>alert(1)</script> -->",
]


class Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def tags_of(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = Collect()
    parser.feed(html)
    return parser.tags


def assert_only_its_own_markup(html: str) -> None:
    for tag, attrs in tags_of(html):
        assert tag in ALLOWED_TAGS, (tag, html)
        for name, value in attrs:
            assert name in ALLOWED_ATTRIBUTES, (tag, name, html)
            if name == "href":
                assert value.startswith(("https://", "http://", "mailto:")), (value, html)
            if tag == "input" and name == "type":
                assert value == "checkbox", html


@pytest.mark.parametrize("text", PAYLOADS)
def test_hostile_text_becomes_only_the_renderers_own_markup(text):
    html = render_markdown(text)
    assert_only_its_own_markup(html)
    assert "<script" not in html and "<img" not in html


def test_raw_html_in_a_reply_is_shown_as_text():
    assert render_markdown(HOSTILE) == (
        "<p>&lt;script&gt;window.__xss = 1&lt;/script&gt;&lt;img src=x "
        'onerror="window.__xss = 2"&gt; done</p>\n'
    )


def test_the_usual_markdown_renders():
    assert render_markdown("**bold** and `code`") == (
        "<p><strong>bold</strong> and <code>code</code></p>\n"
    )
    assert render_markdown("one\ntwo") == "<p>one<br>\ntwo</p>\n"  # a chat's line breaks stay
    assert render_markdown("~~gone~~") == "<p><s>gone</s></p>\n"
    assert render_markdown("# Big\n### Small").startswith("<h3>Big</h3>\n<h4>Small</h4>")
    assert '<ol start="3">' in render_markdown("3. three\n4. four")


def test_links_open_apart_and_carry_no_referrer():
    html = render_markdown("see https://example.com/a, or [the docs](https://example.com/docs)")
    assert html.count('target="_blank"') == 2
    assert html.count('rel="noopener noreferrer nofollow"') == 2
    assert 'href="https://example.com/a"' in html  # the comma is not part of the address


def test_a_code_block_that_names_its_language_is_highlighted_with_classes_only():
    html = render_markdown("```python\nfor x in y:\n    print('<b>')\n```")
    assert html.startswith('<pre><code class="language-python hl">')
    assert '<span class="hl-k">for</span>' in html
    assert "&lt;b&gt;" in html and "style" not in html
    plain = render_markdown("```\n<b>not bold</b>\n```")
    assert plain == "<pre><code>&lt;b&gt;not bold&lt;/b&gt;\n</code></pre>\n"
    unknown = render_markdown("```nosuchlanguage\nx = 1\n```")
    assert "hl-" not in unknown and "x = 1" in unknown


def test_task_lists_become_checkboxes_no_one_can_tick():
    html = render_markdown("- [ ] buy pots\n- [x] choose seeds")
    boxes = [dict(attrs) for tag, attrs in tags_of(html) if tag == "input"]
    assert len(boxes) == 2
    assert all(box["type"] == "checkbox" and "disabled" in box for box in boxes)
    assert "checked" not in boxes[0] and "checked" in boxes[1]


def test_table_alignment_is_a_class_not_a_style():
    html = render_markdown("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |")
    assert 'class="align-left"' in html and 'class="align-center"' in html
    assert 'class="align-right"' in html and "style" not in html
    assert html.startswith('<div class="table-wrap"><table>')


@pytest.mark.parametrize(
    "text",
    [
        ">" * 8000 + " deep",
        "\n".join("> " * depth + "line" for depth in range(1, 400)),
        "".join("  " * depth + "- item\n" for depth in range(1000)),
        "- " * 3000 + "x",
        "[" * 5000 + "x" + "]" * 5000,
        "*" * 20000 + "x",
        "`" * 10000,
    ],
    ids=["quotes", "quote-stairs", "list-stairs", "dashes", "brackets", "stars", "ticks"],
)
def test_pathological_nesting_renders_and_deep_text_falls_back_to_plain_text(text):
    html = render_markdown(text)
    assert_only_its_own_markup(html)
    depth = max_depth(html)
    assert depth <= MAX_NESTING + 2


def test_eight_thousand_nested_quotes_are_shown_as_the_text_itself():
    text = ">" * 8000 + " the bottom"
    html = render_markdown(text)
    assert html.startswith('<p class="md-plain">&gt;&gt;&gt;')
    assert html.count("&gt;") == 8000 and "the bottom" in html


def test_blank_text_renders_to_nothing():
    assert render_markdown("") == "" and render_markdown(" \n\t") == ""


def max_depth(html: str) -> int:
    class Depth(HTMLParser):
        VOID = {"br", "hr", "input"}

        def __init__(self) -> None:
            super().__init__()
            self.depth = self.deepest = 0

        def handle_starttag(self, tag, attrs):
            if tag not in self.VOID:
                self.depth += 1
                self.deepest = max(self.deepest, self.depth)

        def handle_endtag(self, tag):
            if tag not in self.VOID:
                self.depth -= 1

    parser = Depth()
    parser.feed(html)
    return parser.deepest


MARKDOWN_PIECES = st.sampled_from(
    [
        "*", "**", "_", "`", "```", "~~", ">", "> ", "- ", "1. ", "#", "|", "---", "\n", "\n\n",
        "[", "]", "(", ")", "<", ">", '"', "'", "&", "javascript:", "https://x.example/",
        "data:", "<script>", "</script>", "<img src=x onerror=a>", "- [ ] ", "- [x] ", "\\",
        "  ", "\t", "\u0000", "\u202e", "生菜", "🌿", "onload=", "style=",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(MARKDOWN_PIECES, st.text(max_size=8)), max_size=60).map("".join))
def test_any_text_renders_to_only_the_renderers_own_markup(text):
    assert_only_its_own_markup(render_markdown(text))
