"""Just-in-time summarization: one model call sets a topic's title, summary and memory flag.

What the call sends. The specification's prompt, verbatim, then one user message with a
plain transcript and the topic's active notes, in one of two forms:

* **incremental** (the default whenever the topic has a usable previous summary): that
  summary (model-made or edited by the user: whatever ``topic.summary`` holds) plus the
  messages after ``Topic.summarized_through_seq``, so a refresh costs what is new, not the
  whole topic;
* **full**: the topic's whole history, for a topic with no usable summary (none yet, a
  fallback, or one that covers messages a fork is moving away), or every time it fits the
  budget when ``SUMMARY_INCREMENTAL`` is off (except for a summary the user corrected,
  which is always built on).

Either way the call stays under ``SUMMARY_INPUT_TOKEN_BUDGET`` (approximate tokens), or
less when the model's context leaves less room (``memory.llm.fit_to_context``): tool
results, tool arguments and very long messages are clipped, the previous summary and the
notes are capped, and when the transcript still does not fit, the oldest messages are left
out (a full transcript keeps its first user message, which usually names the subject).

The answer is trusted only as far as the specification allows:

* the summary is held to ``MAX_SUMMARY_CHARS`` like the user's edit (cut at a sentence, marked),
  the title to ``TITLE_LIMIT``;
* only a strict JSON ``true`` for ``include_in_memory`` promotes ("true", 1 or a missing
  key do not);
* a topic that holds results of tools other than the built-ins (text from outside: an
  MCP page can carry an injection) is never promoted by its summary; only the user can
  promote it (memory/actions/curation.py);
* a topic with fewer than ``MIN_MEMORY_TURNS`` conversation messages (the user's and the
  assistant's text replies, as ``Message.objects.conversation()`` counts) is never
  promoted, whatever the model says;
* any failure (HTTP error, timeout, malformed JSON, a missing or blank title or summary)
  keeps what the topic has: a topic that already has a real summary (model-made or the
  user's) keeps its title, summary and flag, and only a topic with none gets the
  deterministic fallback built from the first user message, which never promotes and is
  recorded as such (``Topic.summary_is_fallback``);
* the user's manual keep-in-memory choice is never overridden (curation's guard).
* the user's edited title and summary are kept until the topic has a new message, and
  are then the previous summary the next one builds on.

No model call under a lock. Computing a summary (a model call, seconds) and applying it
(a short locked write) are separate steps: :func:`prepare_summary` runs with no lock held,
and :func:`confirm_summary`, called under the lock, never calls the model. When the topic
changed in between it raises :class:`StaleSummary`, and :func:`with_fresh_summary` rolls
back, prepares again and retries; its last attempt uses what was prepared.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.actions.capture import (
    capture_enabled,
    capture_facts,
    store_captured_facts,
)
from memory.actions.digest import TopicSummary, fallback_summary
from memory.actions.promotion import decide_promotion
from memory.actions.titles import settled_title
from memory.events import publish_on_commit, topic_updated
from memory.lib.limits import MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from memory.lib.spec import MIN_MEMORY_TURNS
from memory.lib.text import clip, one_line, shorten
from memory.lib.tokens import estimate_tokens
from memory.lib.tool_words import is_outside_text
from memory.llm import LLMError, fit_to_context, get_chat_model, strip_reasoning
from memory.models import Message, Topic
from memory.stores.memory_states import apply_summarizer_flag
from memory.stores.notes import read_notes
from memory.stores.persistent import invalidate_persistent_memory

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

# The answer's shape, for endpoints that constrain output to a schema (the prompt above
# asks for the same; parse_summary_answer checks it either way).
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "summary": {"type": "string"},
        "include_in_memory": {"type": "boolean"},
    },
    "required": ["title", "summary", "include_in_memory"],
    "additionalProperties": False,
}

TITLE_LIMIT = 120  # characters; the column holds 200
# The answer's bound, in tokens. A small model sometimes never closes the summary's string
# (seen on the local lane: 7,000 tokens, fifteen minutes of a one-thread server, when the
# run was stopped); its longest summary on the memory QA tune half is about 400 tokens,
# and a model that reasons first (memory/llm/output.py) spends its tokens there too. An
# answer cut here is not JSON, so the topic keeps what it had.
SUMMARY_MAX_TOKENS = 1536

# What one message may contribute to the transcript, in characters. A tool result is
# evidence of what was done, rarely worth more than its gist; the user's and the
# assistant's words are the conversation itself.
TOOL_RESULT_CHARS = 600
TOOL_ARGUMENT_CHARS = 300
MESSAGE_CHARS = 4000
# Shares of the input budget the previous summary and the notes may take at most.
PREVIOUS_SUMMARY_SHARE = 4
NOTES_SHARE = 4
# How often a summary made before the lock is made again when the topic changed meanwhile.
STALE_ATTEMPTS = 3

SummaryMode = Literal["full", "incremental"]


@dataclass(frozen=True)
class SummaryInput:
    """The chat messages of one summary call, and what they cover."""

    messages: list[dict]
    mode: SummaryMode
    through_seq: int  # the last message sent
    sent: int  # messages in the transcript
    omitted: int  # messages left out by the budget
    tokens: int  # approximate tokens of the whole call


@dataclass(frozen=True)
class PreparedSummary:
    """A summary together with exactly what it was computed from."""

    summary: TopicSummary
    basis: tuple
    before_seq: int | None = None


class StaleSummary(Exception):
    """The topic changed between preparing its summary and locking it: prepare again."""


# --- reading what a summary is made of ----------------------------------------------------


def topic_history(topic: Topic, *, before_seq: int | None = None) -> list[Message]:
    """The topic's messages in order, error records excluded (they never reach a model)."""
    return list(_history(topic, before_seq=before_seq).order_by("seq"))


def _history(topic: Topic, *, before_seq: int | None = None):
    messages = topic.messages.exclude(role=Message.Role.ERROR)
    if before_seq is not None:
        messages = messages.filter(seq__lt=before_seq)
    return messages


def previous_summary(topic: Topic, *, before_seq: int | None = None) -> tuple[str, str] | None:
    """(title, summary) a refresh may build on, or None.

    Usable: a summary that is not a fallback and covers no message at or after
    ``before_seq`` (a fork's prior topic whose summary already spoke of the messages that
    are moving away is summarized again from its own history).
    """
    if not topic.summary.strip() or topic.summary_is_fallback:
        return None
    if before_seq is not None and topic.summarized_through_seq >= before_seq:
        return None
    return topic.title, topic.summary


def summary_input(
    *,
    messages: Sequence[Message],
    notes: str,
    previous: tuple[str, str] | None = None,
    budget: int | None = None,
) -> SummaryInput:
    """The call for ``messages`` (the whole history, or those since ``previous``), under
    the budget: the newest messages that fit, the first user message kept in a full one.

    The history is rendered as one plain transcript rather than replayed as chat
    messages: a topic cut by a fork may start with a tool result, which an API would
    reject as a dangling message, and the model is asked to read it, not continue it.
    """
    budget = fit_to_context(budget or settings.SUMMARY_INPUT_TOKEN_BUDGET)
    mode: SummaryMode = "incremental" if previous is not None else "full"
    before: list[str] = []
    if previous is not None:
        title, text = previous
        text = clip(text.strip(), budget // PREVIOUS_SUMMARY_SHARE * 4, keep="head")
        before.append(f"Summary so far (title: {title}):\n{text}")
    after: list[str] = []
    if notes.strip():
        notes_text = clip(notes.strip(), budget // NOTES_SHARE * 4, keep="tail")
        after.append(f"Notes for this topic:\n{notes_text}")
    heading = "Conversation since then:" if previous is not None else "Conversation:"

    lines = [_transcript_line(message) for message in messages]
    fixed = estimate_tokens(SUMMARY_PROMPT + heading + "".join(before + after)) + 16
    available = budget - fixed
    first: int | None = None
    if mode == "full":
        first = next((i for i, m in enumerate(messages) if m.role == Message.Role.USER), None)
    kept = _newest_that_fit(lines, available, keep_first=first)
    omitted = len(lines) - len(kept)
    transcript = [lines[i] for i in kept]
    if omitted:
        marker = f"[{omitted} earlier messages left out to fit the summary budget]"
        at = 1 if first is not None and kept and kept[0] == first else 0
        transcript.insert(at, marker)
    parts = [*before, heading + "\n" + "\n".join(transcript), *after]
    chat = [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
    return SummaryInput(
        messages=chat,
        mode=mode,
        through_seq=messages[-1].seq if messages else 0,
        sent=len(kept),
        omitted=omitted,
        tokens=request_tokens(chat),
    )


def request_tokens(chat: Sequence[dict]) -> int:
    """Approximate tokens of a call's messages (what the budget bounds)."""
    return sum(estimate_tokens(message["content"]) + 4 for message in chat)


def _newest_that_fit(lines: list[str], available: int, *, keep_first: int | None) -> list[int]:
    """Indexes of the lines kept, in order: the newest that fit, plus ``keep_first``."""
    costs = [estimate_tokens(line) + 1 for line in lines]
    if sum(costs) <= available:
        return list(range(len(lines)))
    reserved = 0
    if keep_first is not None and costs[keep_first] <= available // 4:
        reserved = costs[keep_first] + 16  # and the marker line
    else:
        keep_first = None
    kept: list[int] = []
    total = reserved
    for index in range(len(lines) - 1, -1, -1):
        if index == keep_first:
            continue
        if total + costs[index] > available:
            break
        total += costs[index]
        kept.append(index)
    kept.reverse()
    if keep_first is not None and (not kept or keep_first < kept[0]):
        kept.insert(0, keep_first)
    return kept


def _transcript_line(message: Message) -> str:
    if message.role == Message.Role.TOOL:
        name = message.tool_name or message.tool_call_id or "tool"
        return f"Tool result ({name}): {clip(message.content, TOOL_RESULT_CHARS)}"
    if message.role == Message.Role.USER:
        return f"User: {clip(message.content, MESSAGE_CHARS)}"
    lines = [f"Assistant: {clip(message.content, MESSAGE_CHARS)}"] if message.content else []
    for call in message.tool_calls or ():
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        name = function.get("name") or "tool"
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        lines.append(f"Assistant called {name}({clip(arguments, TOOL_ARGUMENT_CHARS)})")
    return "\n".join(lines) or "Assistant: (no text)"


# --- computing a summary ------------------------------------------------------------------


def generate_summary(
    *,
    messages: Sequence[Message],
    notes: str,
    topic: Topic | None = None,
    before_seq: int | None = None,
) -> TopicSummary:
    """One model call; never raises for a model failure.

    ``messages`` is the topic's whole history (before ``before_seq``). With ``topic``
    given, its previous summary is the starting point when usable (see the module), and a
    failure keeps it; without, the call is a full one and a failure falls back.
    """
    previous = None
    if topic is not None:
        previous = previous_summary(topic, before_seq=before_seq)
    through = messages[-1].seq if messages else 0
    call = None
    # The user's correction is always built on, whatever the policy: a full call would
    # write over it.
    corrected = previous is not None and topic.summary_manually_set
    if previous is None or not (settings.SUMMARY_INCREMENTAL or corrected):
        call = summary_input(messages=messages, notes=notes)
    if previous is not None and (call is None or call.omitted):
        # Build on the previous summary (always, or when the whole history is too long).
        new = [m for m in messages if m.seq > topic.summarized_through_seq]
        if not new:
            return _kept(topic, "nothing new since the last summary", through)
        call = summary_input(messages=new, notes=notes, previous=previous)
    logger.info(
        "summary call (%s): %s messages sent, %s left out, ~%s tokens",
        call.mode,
        call.sent,
        call.omitted,
        call.tokens,
    )
    turns = sum(1 for message in messages if message.is_conversation)
    outside = [m.tool_name for m in messages if m.role == Message.Role.TOOL and _outside(m)]
    try:
        # The session's summary model: its agent's, or the model the user picked.
        session = topic.session if topic is not None else None
        model = get_chat_model("summary", session=session)
        answer = model.complete_json(
            messages=call.messages,
            schema=SUMMARY_SCHEMA,
            schema_name="topic_summary",
            max_tokens=SUMMARY_MAX_TOKENS,
        )
        title, summary, include = parse_summary_answer(answer)
    except LLMError as err:
        if topic is not None and _has_real_summary(topic):
            logger.info("summary call failed; the topic keeps its summary: %s", err)
            return _kept(topic, str(err), topic.summarized_through_seq)
        logger.info("summary fell back to the first user message: %s", err)
        return replace(fallback_summary(messages, detail=str(err)), through_seq=through)
    # A small model's flag is looked at again (memory/actions/promotion.py), and what the
    # user stated is captured as facts (memory/actions/capture.py), when configured.
    include = decide_promotion(messages, include=include, model_name=model.name).include
    facts = ()
    if include and capture_enabled():
        facts = capture_facts(
            call.messages, title=title, summary=summary, history=messages, model=model
        )
    if include and outside:
        logger.info("summary not promoted: drawn from outside tool results (%s)", outside[0])
    return TopicSummary(
        title=title,
        summary=summary,
        keep_in_memory=include and turns >= MIN_MEMORY_TURNS and not outside,
        fallback=False,
        detail="",
        through_seq=call.through_seq,
        suggested=include and turns >= MIN_MEMORY_TURNS and bool(outside),
        facts=facts,
    )


def _outside(message: Message) -> bool:
    return is_outside_text(message.tool_name, message.content)


def _has_real_summary(topic: Topic) -> bool:
    """A summary worth keeping: made by the model or written by the user."""
    return bool(topic.summary.strip()) and not topic.summary_is_fallback


def _kept(topic: Topic, detail: str, through_seq: int) -> TopicSummary:
    return TopicSummary(
        title=topic.title,
        summary=topic.summary,
        keep_in_memory=topic.keep_in_memory,
        fallback=False,
        detail=detail,
        through_seq=through_seq,
        kept=True,
    )


def parse_summary_answer(answer: object) -> tuple[str, str, bool]:
    """Title, summary and the strict flag of an answer, or LLMError when unusable."""
    if not isinstance(answer, dict):
        raise LLMError("summary answer is not a JSON object")
    title, summary = answer.get("title"), answer.get("summary")
    # What the model wrote meets the limits what people write meets (memory/lib/limits.py),
    # clipped rather than refused, and no reasoning block survives in it.
    if isinstance(title, str):
        title = one_line(strip_reasoning(title), min(TITLE_LIMIT, MAX_TITLE_CHARS), at_word=True)
    if isinstance(summary, str):
        summary = shorten(strip_reasoning(summary).strip(), MAX_SUMMARY_CHARS)
    if not isinstance(title, str) or not title:
        raise LLMError("summary answer has no title")
    if not isinstance(summary, str) or not summary:
        raise LLMError("summary answer has no summary")
    # Only a strict boolean true promotes: "true", 1 and a missing key are all false.
    include = answer.get("include_in_memory") is True
    return title, summary, include


# --- prepare with no lock, confirm under it -----------------------------------------------


def prepare_summary(
    *, topic: Topic, before_seq: int | None = None, messages: list[Message] | None = None
) -> PreparedSummary:
    """Summarize the topic's history (up to ``before_seq``) and its notes, with no lock held;
    ``messages``: that history, when the caller has just read it."""
    if messages is None:
        messages = topic_history(topic, before_seq=before_seq)
    notes = read_notes(topic_id=topic.pk)
    summary = generate_summary(messages=messages, notes=notes, topic=topic, before_seq=before_seq)
    return PreparedSummary(
        summary=summary,
        basis=_basis(topic, [m.pk for m in messages], notes),
        before_seq=before_seq,
    )


def confirm_summary(
    prepared: PreparedSummary | None,
    *,
    topic: Topic,
    accept_stale: bool = False,
    accept_growth: bool = False,
) -> TopicSummary:
    """Under the caller's lock, and without calling the model: the prepared summary if the
    topic's history, notes and summary are still what it was made of.

    ``accept_growth`` (a refresh of the active topic) also takes it when the topic only
    received messages (and notes) since: the summary records what it covers, and the next
    refresh sends the rest. Otherwise :class:`StaleSummary`, so the caller rolls back and
    prepares again; with ``accept_stale`` (the last attempt) the prepared summary is used
    anyway when only messages or notes changed (it records what it covers); when nothing
    was prepared for this topic or its summary changed meanwhile, what the topic has is
    kept (the first-message fallback when it has no summary).
    """
    before_seq = prepared.before_seq if prepared is not None else None
    ids = list(_history(topic, before_seq=before_seq).order_by("seq").values_list("pk", flat=True))
    current = _basis(topic, ids, read_notes(topic_id=topic.pk))
    if prepared is not None and (
        prepared.basis == current or (accept_growth and _grew_from(prepared.basis, current))
    ):
        return prepared.summary
    if not accept_stale:
        raise StaleSummary(f"topic {topic.pk} changed while its summary was being made")
    same_summary = prepared is not None and prepared.basis[3:] == current[3:]
    if prepared is not None and prepared.basis[0] == topic.pk and same_summary:
        logger.info("topic %s grew meanwhile; its last prepared summary is used", topic.pk)
        return prepared.summary
    # Nothing prepared, or the summary itself changed meanwhile (the user's edit, another
    # refresh): what the topic has now is newer than anything prepared.
    return summary_without_model(topic)


def summary_without_model(topic: Topic) -> TopicSummary:
    """What the topic has, or the first-message fallback when it has no summary."""
    if _has_real_summary(topic):
        return _kept(topic, "no summary was prepared", topic.summarized_through_seq)
    history = topic_history(topic)
    through = history[-1].seq if history else 0
    return replace(fallback_summary(history, detail="no summary was prepared"), through_seq=through)


def _basis(topic: Topic, message_ids: Sequence[int], notes: str) -> tuple:
    return (
        topic.pk,
        tuple(message_ids),
        notes,
        topic.summary,
        topic.summary_is_fallback,
        topic.summarized_through_seq,
    )


def _grew_from(before: tuple, now: tuple) -> bool:
    """Same topic and summary, and the old messages are still the first ones."""
    same = before[0] == now[0] and before[3:] == now[3:]
    return same and now[1][: len(before[1])] == before[1]


T = TypeVar("T")


def with_fresh_summary(
    prepare: Callable[[], PreparedSummary | None],
    commit: Callable[[PreparedSummary | None, bool], T],
    *,
    attempts: int = STALE_ATTEMPTS,
) -> T:
    """Prepare a summary with no lock held, then ``commit(prepared, accept_stale)`` under
    the lock. ``commit`` raises :class:`StaleSummary` (from :func:`confirm_summary`, inside
    its transaction, which rolls back) when the topic changed meanwhile: prepare again.
    The last attempt accepts what was prepared, so this always ends."""
    for attempt in range(1, attempts + 1):
        prepared = prepare()
        try:
            return commit(prepared, attempt == attempts)
        except StaleSummary as stale:
            logger.info("%s; preparing it again (attempt %s)", stale, attempt + 1)
    raise AssertionError("the last attempt accepts a stale summary")


# --- applying a summary -------------------------------------------------------------------


def apply_summary(*, topic: Topic, summary: TopicSummary) -> bool:
    """Write title, summary, flag and what the summary covers; True when any of the first
    three changed. A kept summary (a failed call, nothing new) writes nothing.

    A title and summary the user edited stay as they are while the topic has no message
    newer than the edit (``Topic.edit_stands``); once it has, the new summary replaces
    them (the summary call starts from the user's text as the previous summary).

    The caller holds the topic row (select_for_update, with its session loaded) inside its
    transaction, and publishes the topic.updated event once the topic is in its final
    state. The flag goes through curation (audit row, cache invalidation, the user guard);
    a new title or summary of a topic shown in persistent memory invalidates the scope's
    cache too, since the block prints them.
    """
    if summary.kept:
        return False
    if topic.edit_stands:
        # The user's correction of these very messages wins; only the flag is the model's.
        text_changed = False
    else:
        title = settled_title(topic=topic, title=summary.title, summary=summary.summary)
        text_changed = (topic.title, topic.summary) != (title, summary.summary)
        topic.title = title
        topic.summary = summary.summary
        topic.summary_is_fallback = summary.fallback
        topic.summarized_through_seq = summary.through_seq
        topic.summary_manually_set = False
        topic.summarized_at = timezone.now()
        topic.save(
            update_fields=[
                "title",
                "summary",
                "summary_is_fallback",
                "summarized_through_seq",
                "summary_manually_set",
                "summarized_at",
            ]
        )
    if text_changed and topic.in_memory:
        invalidate_persistent_memory(topic.session.memory_scope_key)
    before = (topic.keep_in_memory, topic.memory_suggested)
    apply_summarizer_flag(
        topic=topic, keep_in_memory=summary.keep_in_memory, suggested=summary.suggested
    )
    if summary.facts:
        store_captured_facts(topic=topic, facts=summary.facts)
    return text_changed or (topic.keep_in_memory, topic.memory_suggested) != before


def publish_topic_updated(topic: Topic, *, reason: Literal["summary", "refresh"]) -> None:
    publish_on_commit(topic.session_id, topic_updated(topic, reason=reason))


def do_summarize_topic(
    *, topic_id: int, reason: Literal["summary", "refresh"] = "summary"
) -> Topic:
    """Summarize a topic now: the model call with no lock held, then a short locked write."""

    def commit(prepared: PreparedSummary | None, accept_stale: bool) -> Topic:
        with transaction.atomic():
            topic = Topic.objects.select_for_update(of=("self",)).select_related("session")
            topic = topic.get(pk=topic_id)
            summary = confirm_summary(
                prepared, topic=topic, accept_stale=accept_stale, accept_growth=True
            )
            if apply_summary(topic=topic, summary=summary):
                publish_topic_updated(topic, reason=reason)
        return topic

    return with_fresh_summary(lambda: prepare_summary(topic=Topic.objects.get(pk=topic_id)), commit)
