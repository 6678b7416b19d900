"""Markdown for people: what the chat page shows of a reply or a topic's notes, as HTML.

One renderer on the server, so every browser shows the same thing and none of them parses
Markdown: markdown-it-py (CommonMark with GitHub's tables, strikethrough, task lists and
bare links), Pygments for code blocks that name their language, and nh3 (the ammonia
sanitizer) over the result, which keeps only the tags and attributes listed below.

Safety, in layers. Raw HTML in the text is never markup (``html=False``: it stays text);
a link is made only for http, https and mailto addresses; images are not made (the page's
Content-Security-Policy would refuse a remote one anyway); no ``style`` attribute survives
(table alignment becomes a class). Depth is bounded: markdown-it stops nesting at
``MAX_NESTING`` levels, and a text that reaches that depth (8,000 nested ``>`` quotes, a
list nested a thousand deep) is shown as plain text instead, whole, so nothing is lost and
nothing recurses. Any other failure of the renderer also falls back to the plain text, so
one message can never take a page down.

Time is bounded too, whatever the text's origin (a reply, an import, notes, the live
stream's final message). markdown-it is pure Python and linear (the task-list rule is ours,
memory/text/tasklists.py, because the plugin's was quadratic), but its cost is per line
and per punctuation mark: a 32,000-character list of ``[`` took half a second. So only a
head of the text within ``MARKDOWN_BUDGET`` work units (a character is one unit, a line
break or an ASCII punctuation mark ``MARKUP_WEIGHT``) is parsed as Markdown, cut at a line
break; the rest follows as plain escaped text, whole. Prose of 16,000 characters is
formatted whole; the worst head costs under 50 ms (``python -m bench.markdown``).
"""

from __future__ import annotations

import html
import logging
import re
from contextvars import ContextVar
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from memory.text.tasklists import tasklists

logger = logging.getLogger(__name__)

# Levels of nesting (quotes in lists in quotes...) markdown-it may open; deeper text is
# not worth formatting, and reaching this depth sends the whole text to the plain path.
MAX_NESTING = 20
# Characters of code one text may have highlighted, all its blocks together (Pygments is
# linear, but slow: about 7 µs a character); code past it is shown without highlighting.
HIGHLIGHT_LIMIT = 1_500
# Work units of Markdown parsed per text (about a microsecond each on one core); the rest
# of a longer text is shown as plain text. See the module docstring and bench/markdown.py.
MARKDOWN_BUDGET = 25_000
MARKUP_WEIGHT = 24
# Rendered texts kept per process: replies are rendered again for every page and event.
CACHE_SIZE = 1024

_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "span", "div",
    "blockquote", "ul", "ol", "li", "a", "h3", "h4", "input",
    "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "input": {"checked", "disabled"},
    "*": {"class"},
}
_ATTRIBUTE_VALUES = {"input": {"type": {"checkbox"}}}
_SET_ATTRIBUTES = {"a": {"target": "_blank"}, "input": {"disabled": ""}}
_SCHEMES = {"http", "https", "mailto"}
_ALIGN = {"text-align:left": "left", "text-align:center": "center", "text-align:right": "right"}
# h1 and h2 of a reply are smaller than the page's own headings.
_HEADING_TAGS = {"h1": "h3", "h2": "h3", "h3": "h4", "h4": "h4", "h5": "h4", "h6": "h4"}
_formatter = HtmlFormatter(nowrap=True, classprefix="hl-")
_MARKUP = re.compile(r"[\n!-/:-@\[-`{-~]")  # a line break or ASCII punctuation


def markdown_cost(text: str) -> int:
    """The work units of parsing ``text`` as Markdown (see MARKDOWN_BUDGET)."""
    return len(text) + MARKUP_WEIGHT * len(_MARKUP.findall(text))


def markdown_head(text: str) -> int:
    """How many leading characters of ``text`` are parsed as Markdown: all of them when the
    text fits the budget, else the longest head that does, cut after a line break (a blank
    line when one is near) so a block is not split mid-line."""
    if markdown_cost(text) <= MARKDOWN_BUDGET:
        return len(text)
    limit = MARKDOWN_BUDGET  # a head of only plain characters
    for count, match in enumerate(_MARKUP.finditer(text)):
        position = match.start()
        if position + 1 + MARKUP_WEIGHT * (count + 1) > MARKDOWN_BUDGET:
            limit = min(position, MARKDOWN_BUDGET - MARKUP_WEIGHT * count)
            break
    limit = max(0, min(limit, len(text)))
    blank = text.rfind("\n\n", 0, limit)
    if blank >= limit // 2:
        return blank + 2
    newline = text.rfind("\n", 0, limit)
    return newline + 1 if newline >= limit // 2 else limit


# What is left of HIGHLIGHT_LIMIT for the text being rendered.
_highlight_left: ContextVar[int] = ContextVar("highlight_left", default=HIGHLIGHT_LIMIT)


def _highlight(code: str, language: str, _attrs: str) -> str:
    """Highlighted HTML for a fenced block that names a known language; "" leaves it plain
    (markdown-it escapes it then)."""
    name = language.strip().split(maxsplit=1)[0] if language.strip() else ""
    if not name or len(code) > _highlight_left.get():
        return ""
    _highlight_left.set(_highlight_left.get() - len(code))
    try:
        lexer = get_lexer_by_name(name)
    except ClassNotFound:
        return ""
    body = highlight(code, lexer, _formatter)
    return f'<pre><code class="language-{html.escape(name)} hl">{body}</code></pre>'


def _parser() -> MarkdownIt:
    parser = MarkdownIt(
        "commonmark",
        {"html": False, "linkify": True, "breaks": True, "highlight": _highlight},
    )
    parser.options["maxNesting"] = MAX_NESTING
    parser.enable(["table", "strikethrough", "linkify"]).disable(["image"])
    parser.use(tasklists)
    parser.validateLink = _safe_link
    # A wide table scrolls on its own, not the whole thread.
    parser.add_render_rule("table_open", lambda *_: '<div class="table-wrap"><table>\n')
    parser.add_render_rule("table_close", lambda *_: "</table></div>\n")
    return parser


def _safe_link(url: str) -> bool:
    scheme, colon, _rest = url.partition(":")
    return bool(colon) and scheme.strip().lower() in _SCHEMES


_md = _parser()


class TooDeep(ValueError):
    """The text nests deeper than MAX_NESTING: it is shown as plain text."""


def _adjust(tokens: list[Token]) -> None:
    """Heading levels under the page's, table alignment as classes, and the depth check."""
    for token in tokens:
        if token.level >= MAX_NESTING - 1:
            raise TooDeep(f"nesting reaches {token.level}")
        if token.type in ("heading_open", "heading_close"):
            token.tag = _HEADING_TAGS.get(token.tag, "h4")
        elif token.type in ("th_open", "td_open"):
            align = _ALIGN.get(str(token.attrs.pop("style", "")).replace(" ", ""))
            if align:
                token.attrSet("class", f"align-{align}")
        if token.children:
            _adjust(token.children)


def _sanitize(markup: str) -> str:
    return nh3.clean(
        markup,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        tag_attribute_values=_ATTRIBUTE_VALUES,
        set_tag_attribute_values=_SET_ATTRIBUTES,
        url_schemes=_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        url_relative="deny",
        strip_comments=True,
    )


def plain_html(text: str) -> str:
    """The text as it is, escaped, in one block that keeps its line breaks."""
    return f'<p class="md-plain">{html.escape(text)}</p>' if text.strip() else ""


@lru_cache(maxsize=CACHE_SIZE)
def render_markdown(text: str) -> str:
    """Sanitized HTML for ``text``; the plain text, escaped, when it cannot be formatted."""
    if not text or not text.strip():
        return ""
    head = markdown_head(text)
    return _formatted(text[:head]) + plain_html(text[head:])


def _formatted(text: str) -> str:
    if not text.strip():
        return ""
    _highlight_left.set(HIGHLIGHT_LIMIT)
    try:
        tokens = _md.parse(text)
        _adjust(tokens)
        return _sanitize(_md.renderer.render(tokens, _md.options, {}))
    except TooDeep:
        return plain_html(text)
    except Exception:  # a renderer bug must cost one message its formatting, nothing more
        logger.exception("markdown rendering failed; showing the text as it is")
        return plain_html(text)
