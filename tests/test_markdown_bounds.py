"""Rendering is bounded in work and size whatever the text (issue 45, item 1).

A 32,000-character task list (the largest reply an import accepts) took seconds: the
task-list rule walked back through every token for every item. Now the rule is one pass
(memory/text/tasklists.py) and only a head of the text within MARKDOWN_BUDGET is parsed as
Markdown, the rest shown as plain escaped text, whole. Work, not time, is asserted here
(timing is bench/markdown.py's job): the head's cost, the tokens markdown-it makes and the
task-list rule's steps grow at most linearly with the head.
"""

from __future__ import annotations

import json
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.lib.limits import MAX_MESSAGE_CHARS
from memory.models import Topic
from memory.text import markdown
from memory.text.markdown import MARKDOWN_BUDGET, markdown_cost, markdown_head, render_markdown
from memory.text.tasklists import mark_task_lists

LARGEST = 2 * MAX_MESSAGE_CHARS  # an imported assistant reply
WHEN = "2026-01-01T00:00:00+00:00"
PIECES = [
    "- [ ] ", "- [x] ", "  - [ ] ", "- ", "1. ", "  ", "> ", "# ", "*", "**", "_", "__", "~~",
    "`", "```python\n", "```\n", "[", "](", ")", "https://a.example/", "|a|b|\n|-|-|\n", "|",
    "\n", "\n\n", "a", "word ", "生菜 ", "&amp;", "\\", "<b>",
]  # fmt: skip
UNITS = ["- [ ] a\n", "- [ ] a\n  - [x] b\n", "|a|b|\n", "*a_", "[", "> a\n", "- a\n  ", "a\n"]


def _markdown(draw_pieces: list[str], repeat: int) -> str:
    return ("".join(draw_pieces) * repeat)[:LARGEST]


TEXTS = st.one_of(
    st.builds(
        _markdown, st.lists(st.sampled_from(PIECES), min_size=1, max_size=40), st.integers(1, 4000)
    ),
    st.builds(
        lambda unit, size: (unit * size)[:LARGEST], st.sampled_from(UNITS), st.integers(1, 8000)
    ),
)


def work(text: str) -> tuple[int, int, int]:
    """(characters parsed as Markdown, tokens made, task-list steps) for ``text``."""
    head = text[: markdown_head(text)]
    tokens = markdown._md.parse(head)
    count = len(tokens) + sum(len(token.children or ()) for token in tokens)
    return len(head), count, mark_task_lists(tokens)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_the_markdown_parsed_of_any_text_is_bounded_and_its_work_linear(text):
    parsed, tokens, steps = work(text)
    assert markdown_cost(text[:parsed]) <= MARKDOWN_BUDGET
    assert tokens <= 4 * parsed + 8
    assert steps <= len(markdown._md.parse(text[:parsed]))
    html = render_markdown(text)
    if parsed < len(text.rstrip()):  # the rest is there, escaped, not formatted
        assert html.endswith("</p>") and '<p class="md-plain">' in html


def test_a_largest_task_list_is_formatted_up_to_the_budget_and_shown_whole():
    text = "- [ ] a\n" * (LARGEST // 8)
    html = render_markdown(text)
    head = markdown_head(text)
    assert 0 < head < len(text) and markdown_cost(text[:head]) <= MARKDOWN_BUDGET
    assert html.count('type="checkbox"') == head // 8
    assert html.count("- [ ] a") == (len(text) - head) // 8  # the rest, as text


def test_the_task_list_rule_is_one_pass():
    tokens = markdown._md.parse("- [ ] a\n" * 2000)
    assert mark_task_lists(tokens) == len(tokens)


def test_an_imported_largest_task_list_reply_is_served_bounded(as_alice, alice, agent):
    """The red team's case: replies of 32,000 characters imported, then one GET of them."""
    reply = ("- [ ] a\n" * LARGEST)[:LARGEST]
    topic = {
        "uid": str(uuid.uuid4()),
        "title": "Lists",
        "summary": "",
        "created_at": WHEN,
        "messages": [
            {"seq": 1, "role": "user", "content": "a list please", "created_at": WHEN},
            {"seq": 2, "role": "assistant", "content": reply, "created_at": WHEN},
        ],
    }
    session = {"uid": str(uuid.uuid4()), "title": "Lists", "created_at": WHEN, "topics": [topic]}
    document = {"format": "driftless.memory", "version": 1, "facts": {}, "sessions": [session]}
    response = as_alice.post(
        f"/agents-api/memory/import?agent={agent.pk}",
        json.dumps(document),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    topic_id = Topic.objects.get(session__user=alice, title="Lists").pk
    page = as_alice.get(f"/agents-api/topics/{topic_id}/messages").json()
    rows = page["messages"] if isinstance(page, dict) else page
    served = next(row for row in rows if row["role"] == "assistant")
    assert served["content"] == reply
    boxes = served["content_html"].count('type="checkbox"')
    assert 0 < boxes <= MARKDOWN_BUDGET // 8
    assert served["content_html"].endswith("- [ ] a\n</p>")
