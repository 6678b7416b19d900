"""Just-in-time summarization: one model call sets a topic's title, summary and memory flag.

The call sends the topic's complete message history (tool calls and results included) and
its active notes with the specification's prompt, verbatim. The answer is trusted only as
far as the specification allows:

* only a strict JSON ``true`` for ``include_in_memory`` promotes ("true", 1 or a missing
  key do not);
* a topic with fewer than ``MIN_MEMORY_TURNS`` conversation messages (the user's and the
  assistant's text replies, as ``Message.objects.conversation()`` counts) is never
  promoted, whatever the model says;
* any failure (HTTP error, timeout, malformed JSON, a missing or blank title or summary)
  gives a deterministic fallback built from the first user message, which never promotes;
* the user's manual keep-in-memory choice is never overridden (curation's guard);
* the user's edited title and summary are kept until the topic has a new message.

Computing a summary (a model call, seconds) and applying it (a short locked write) are
separate steps, so callers can make the call before they take any lock and confirm
inside it that the history they summarized is still the topic's history.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from django.db import transaction
from django.utils import timezone

from memory.constants import MIN_MEMORY_TURNS
from memory.curation import do_summarizer_flag
from memory.events import publish_on_commit, topic_payload
from memory.llm import LLMError, get_chat_model
from memory.models import Message, Notes, Topic
from memory.persistent import invalidate_persistent_memory

logger = logging.getLogger(__name__)

# The specification's prompt ("Just-in-time summarization & promotion"), verbatim.
SUMMARY_PROMPT = """Summarize this conversation. Return a JSON object with:
- 'title' (short descriptive label)
- 'summary' (concise note — roughly half the length of a verbose
  paragraph; keep all durable decisions, preferences, and key context,
  but cut filler; lead with the topic, use terse phrasing and
  parenthetical lists where natural; it should read like a sharp note a
  smart person left for themselves — same voice, zero bloat)
- 'include_in_memory' (boolean: true if this conversation contains durable
  decisions, preferences, or context the agent should remember across
  sessions; false if it's casual or ephemeral)"""

TITLE_LIMIT = 120  # characters; the column holds 200
FALLBACK_TITLE_LIMIT = 60
FALLBACK_SUMMARY_LIMIT = 300
UNTITLED = "Untitled topic"


@dataclass(frozen=True)
class TopicSummary:
    title: str
    summary: str
    keep_in_memory: bool  # after the threshold and the fallback rule, before the user guard
    fallback: bool
    detail: str  # why a fallback was taken, for the logs; "" otherwise


@dataclass(frozen=True)
class PreparedSummary:
    """A summary together with exactly what it was computed from."""

    summary: TopicSummary
    basis: tuple[int, tuple[int, ...], str]  # topic id, message ids, notes text


# --- reading what a summary is made of ----------------------------------------------------


def topic_history(topic: Topic, *, before_seq: int | None = None) -> list[Message]:
    """The topic's messages in order, error records excluded (they never reach a model)."""
    messages = topic.messages.exclude(role=Message.Role.ERROR)
    if before_seq is not None:
        messages = messages.filter(seq__lt=before_seq)
    return list(messages.order_by("seq"))


def active_notes_text(topic: Topic) -> str:
    notes = Notes.objects.active().filter(topic=topic).values_list("content", flat=True).first()
    return notes or ""


def summary_messages(*, messages: Sequence[Message], notes: str, previous: str = "") -> list[dict]:
    """The chat messages of the summary call: the prompt, then the user's corrected
    summary to build on (if any), the transcript and notes.

    The history is rendered as one plain transcript rather than replayed as chat
    messages: a topic cut by a fork may start with a tool result, which an API would
    reject as a dangling message, and the model is asked to read it, not continue it.
    """
    transcript = "\n".join(_transcript_line(message) for message in messages)
    parts = [f"Conversation:\n{transcript}"]
    if previous.strip():
        parts.insert(
            0,
            "Previous summary, corrected by the user (build on it; keep what it says "
            f"unless the conversation changes it):\n{previous.strip()}",
        )
    if notes.strip():
        parts.append(f"Notes for this topic:\n{notes.strip()}")
    return [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _transcript_line(message: Message) -> str:
    if message.role == Message.Role.TOOL:
        name = message.tool_name or message.tool_call_id or "tool"
        return f"Tool result ({name}): {message.content}"
    if message.role == Message.Role.USER:
        return f"User: {message.content}"
    lines = [f"Assistant: {message.content}"] if message.content else []
    for call in message.tool_calls or ():
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        name = function.get("name") or "tool"
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        lines.append(f"Assistant called {name}({arguments})")
    return "\n".join(lines) or "Assistant: (no text)"


# --- computing a summary ------------------------------------------------------------------


def generate_summary(
    *, messages: Sequence[Message], notes: str, previous: str = ""
) -> TopicSummary:
    """One model call; never raises for a model failure (the fallback is the answer)."""
    turns = sum(1 for message in messages if message.is_conversation)
    try:
        answer = get_chat_model("summary").complete_json(
            messages=summary_messages(messages=messages, notes=notes, previous=previous)
        )
        title, summary, include = parse_summary_answer(answer)
    except LLMError as err:
        logger.info("summary fell back to the first user message: %s", err)
        return fallback_summary(messages, detail=str(err))
    return TopicSummary(
        title=title,
        summary=summary,
        keep_in_memory=include and turns >= MIN_MEMORY_TURNS,
        fallback=False,
        detail="",
    )


def parse_summary_answer(answer: object) -> tuple[str, str, bool]:
    """Title, summary and the strict flag of an answer, or LLMError when unusable."""
    if not isinstance(answer, dict):
        raise LLMError("summary answer is not a JSON object")
    title, summary = answer.get("title"), answer.get("summary")
    if not isinstance(title, str) or not title.strip():
        raise LLMError("summary answer has no title")
    if not isinstance(summary, str) or not summary.strip():
        raise LLMError("summary answer has no summary")
    # Only a strict boolean true promotes: "true", 1 and a missing key are all false.
    include = answer.get("include_in_memory") is True
    return _clip(" ".join(title.split()), TITLE_LIMIT), summary.strip(), include


def fallback_summary(messages: Sequence[Message], *, detail: str = "") -> TopicSummary:
    """Title and summary from the first user message; a fallback never promotes."""
    first = next(
        (m.content for m in messages if m.role == Message.Role.USER and m.content.strip()), ""
    )
    text = " ".join(first.split())
    return TopicSummary(
        title=fallback_title(first),
        summary=_clip(text, FALLBACK_SUMMARY_LIMIT),
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
    return _clip(" ".join(plain.split()), FALLBACK_TITLE_LIMIT) or UNTITLED


def _clip(text: str, limit: int) -> str:
    """Cut at the last word boundary before ``limit`` and mark the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-") + "…"


def prepare_summary(*, topic: Topic, before_seq: int | None = None) -> PreparedSummary:
    """Summarize the topic's history (up to ``before_seq``) and its notes, with no lock held."""
    messages = topic_history(topic, before_seq=before_seq)
    notes = active_notes_text(topic)
    return PreparedSummary(
        summary=generate_summary(messages=messages, notes=notes, previous=_previous(topic)),
        basis=_basis(topic, messages, notes),
    )


def confirm_summary(prepared: PreparedSummary | None, *, topic: Topic) -> TopicSummary:
    """The prepared summary if the topic's history and notes are still what it was made
    of; otherwise a fresh one (the caller holds the lock, so this one is current)."""
    messages = topic_history(topic)
    notes = active_notes_text(topic)
    if prepared is not None and prepared.basis == _basis(topic, messages, notes):
        return prepared.summary
    return generate_summary(messages=messages, notes=notes, previous=_previous(topic))


def _previous(topic: Topic) -> str:
    """The user's corrected summary, the starting point of the next summary."""
    return topic.summary if topic.summary_manually_set else ""


def _basis(topic: Topic, messages: Sequence[Message], notes: str):
    return (topic.pk, tuple(message.pk for message in messages), notes)


# --- applying a summary -------------------------------------------------------------------


def apply_summary(*, topic: Topic, summary: TopicSummary) -> bool:
    """Write title, summary and flag; True when any of them changed.

    A title and summary the user edited stay as they are while the topic has no message
    newer than the edit (``Topic.edit_stands``); once it has, the new summary replaces
    them (the summary call starts from the user's text as the previous summary).

    The caller holds the topic row (select_for_update, with its session loaded) inside its
    transaction, and publishes the topic.updated event once the topic is in its final
    state. The flag goes through curation (audit row, cache invalidation, the user guard);
    a new title or summary of a topic shown in persistent memory invalidates the scope's
    cache too, since the block prints them.
    """
    if topic.edit_stands:
        # The user's correction of these very messages wins; only the flag is the model's.
        text_changed = False
    else:
        text_changed = (topic.title, topic.summary) != (summary.title, summary.summary)
        topic.title = summary.title
        topic.summary = summary.summary
        topic.summary_manually_set = False
        topic.summarized_at = timezone.now()
        topic.save(update_fields=["title", "summary", "summary_manually_set", "summarized_at"])
    if text_changed and (topic.keep_in_memory or topic.deprecated):
        invalidate_persistent_memory(topic.session.memory_scope_key)
    before = topic.keep_in_memory
    do_summarizer_flag(topic=topic, keep_in_memory=summary.keep_in_memory)
    return text_changed or topic.keep_in_memory != before


def publish_topic_updated(topic: Topic, *, reason: Literal["summary", "refresh"]) -> None:
    publish_on_commit(
        topic.session_id, {"type": "topic.updated", "topic": topic_payload(topic), "reason": reason}
    )


def do_summarize_topic(
    *, topic_id: int, reason: Literal["summary", "refresh"] = "summary"
) -> Topic:
    """Summarize a topic now: the model call first, then a short locked write."""
    prepared = prepare_summary(topic=Topic.objects.get(pk=topic_id))
    with transaction.atomic():
        topic = Topic.objects.select_for_update(of=("self",)).select_related("session")
        topic = topic.get(pk=topic_id)
        if apply_summary(topic=topic, summary=confirm_summary(prepared, topic=topic)):
            publish_topic_updated(topic, reason=reason)
    return topic
