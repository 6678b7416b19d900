"""GitHub task lists (``- [ ] to do``, ``- [x] done``) for markdown-it, in one pass.

mdit-py-plugins' own task-list rule finds each item's list by walking back through every
token before it, so a reply of N items costs N² steps (a 32,000-character list took
seconds, holding the GIL). This rule keeps the open lists on a stack instead: each token is
looked at once. The markup is the plugin's: a disabled checkbox first in the item, the
classes ``task-list-item`` and ``contains-task-list``.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

# Leading whitespace of a list item is already trimmed by markdown-it.
_TODO = re.compile(r"\[([ xX])\][ \t\n\v\f\r]+")
_LIST_OPEN = {"bullet_list_open", "ordered_list_open"}
_LIST_CLOSE = {"bullet_list_close", "ordered_list_close"}


def _checkbox(checked: bool) -> Token:
    box = Token("html_inline", "", 0)
    ticked = 'checked="checked" ' if checked else ""
    box.content = (
        f'<input class="task-list-item-checkbox" {ticked}disabled="disabled" type="checkbox">'
    )
    return box


def _is_todo(tokens: list[Token], index: int) -> re.Match[str] | None:
    token = tokens[index]
    if token.type != "inline" or index < 2 or not token.children:
        return None
    if tokens[index - 1].type != "paragraph_open" or tokens[index - 2].type != "list_item_open":
        return None
    return _TODO.match(token.content)


def mark_task_lists(tokens: list[Token]) -> int:
    """Turn the task items of ``tokens`` into checkboxes; returns the steps taken (one a
    token), which tests use to check the work is linear."""
    open_lists: list[Token] = []
    steps = 0
    for index, token in enumerate(tokens):
        steps += 1
        if token.type in _LIST_OPEN:
            open_lists.append(token)
        elif token.type in _LIST_CLOSE:
            if open_lists:
                open_lists.pop()
        elif (todo := _is_todo(tokens, index)) is not None and open_lists:
            assert token.children is not None
            token.children.insert(0, _checkbox(todo.group(1) != " "))
            token.children[1].content = token.children[1].content[3:]
            token.content = token.content[3:]
            tokens[index - 2].attrSet("class", "task-list-item")
            open_lists[-1].attrSet("class", "contains-task-list")
    return steps


def tasklists(md: MarkdownIt) -> None:
    """The plugin: the rule runs after inline parsing, as mdit-py-plugins' does."""

    def rule(state: StateCore) -> None:
        state.env["tasklist_steps"] = state.env.get("tasklist_steps", 0) + mark_task_lists(
            state.tokens
        )

    md.core.ruler.after("inline", "github-tasklists", rule)
