"""A topic's digest: its summary as computed (memory/actions/summarize.py), and the
deterministic one a topic gets when the model gives none: its first user message that
says something (a greeting is skipped). A fallback never promotes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.actions.capture import CapturedFact
from memory.lib.text import UNTITLED_TOPIC, one_line
from memory.llm.gist import subject_message
from memory.models import Message

FALLBACK_TITLE_LIMIT = 60
FALLBACK_SUMMARY_LIMIT = 300


@dataclass(frozen=True)
class TopicSummary:
    title: str
    summary: str
    keep_in_memory: bool  # after the threshold and the fallback rule, before the user guard
    fallback: bool
    detail: str  # why a fallback was taken or the summary kept, for the logs; "" otherwise
    through_seq: int = 0  # the last message this summary covers
    kept: bool = False  # leave the topic's title, summary and flag as they are
    suggested: bool = False  # would promote, but drawn from outside tool results
    facts: tuple[CapturedFact, ...] = ()  # what the user stated, to store as the agent's


def fallback_summary(messages: Sequence[Message], *, detail: str = "") -> TopicSummary:
    """Title and summary from the first user message that says something (not "Hi!");
    a fallback never promotes."""
    first = subject_message(
        [m.content for m in messages if m.role == Message.Role.USER and m.content.strip()]
    )
    text = " ".join(first.split())
    return TopicSummary(
        title=fallback_title(first),
        summary=one_line(text, FALLBACK_SUMMARY_LIMIT, at_word=True),
        keep_in_memory=False,
        fallback=True,
        detail=detail,
    )


_MARKDOWN_MARKUP = re.compile(r"[*_`~#>]+|^\s*(?:[-+]|\d+[.)])\s+")


def fallback_title(text: str) -> str:
    """A short label from a message: its first line without Markdown markup, cut at a
    word boundary."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    plain = _MARKDOWN_MARKUP.sub("", first_line)
    return one_line(plain, FALLBACK_TITLE_LIMIT, at_word=True) or UNTITLED_TOPIC
