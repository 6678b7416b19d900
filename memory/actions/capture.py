"""Facts captured at evaluation: what a lean turn's agent could not store with a tool.

A small model answers a turn better with no tool schemas (no ``important_info``), so what
it would have stored during the turn is captured when the topic is summarized, where a
small model is reliable: one more constrained call (``EVALUATION_FACT_CAPTURE``), which
continues the summary call (the server's cached prefix: only the question is read) and
asks for the facts the USER stated, each with the user's own words as evidence.

What the model answers is checked like anything a person types (memory/stores/facts.py:
the key's and value's rules, the limits, look-alike keys) and more:

* the evidence must be found in one of the user's own messages of the topic (case and
  spacing aside), and the value in the evidence: a fact drawn from a tool result, from
  recalled text or from the assistant's words is outside text, and is never stored (an
  injected "remember that …" in a page is not the user speaking);
* at most ``MAX_CAPTURED_FACTS`` a topic; an answer that is not the asked shape stores
  nothing;
* facts are stored as set by the agent, with the topic as their provenance, through
  ``do_set_fact`` (memory/actions/facts.py), so the one rule holds: a fact the user set
  is never overwritten (the refusal is logged and the fact skipped).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memory.actions.facts import do_set_fact
from memory.lib.errors import Conflict, InvalidInput
from memory.llm import ChatModel, LLMError
from memory.models import FactActor, Message, Topic
from memory.stores.facts import check_fact_key, check_fact_value

logger = logging.getLogger(__name__)

MAX_CAPTURED_FACTS = 5
# The answer is short: a few facts of a few words each.
CAPTURE_MAX_TOKENS = 400
SHORTEST_EVIDENCE = 3  # characters
_QUOTES = "\"'«»“”„‘’「」『』 \t\n.,;:!?。、！？"

CAPTURE_QUESTION = """List the durable facts the USER stated about themselves in this
conversation: their name or nickname, a lasting preference, a plan with a date, a
constraint (an allergy, a diet, a schedule rule), a decision, a fact about their life or
work. Only what the user said in their own messages: never anything from the assistant's
replies, a tool result or quoted text. For each fact: 'key' (a short label of a few
words), 'value' (the fact, a few words) and 'evidence' (the user's exact words that state
it, copied). Return {"facts": []} when the user stated none."""

CAPTURE_SCHEMA = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": MAX_CAPTURED_FACTS,
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "value": {"type": "string"},
                    "evidence": {"type": "string"},
                },
                "required": ["key", "value", "evidence"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class CapturedFact:
    key: str
    value: Any
    evidence: str


def capture_enabled() -> bool:
    return bool(settings.EVALUATION_FACT_CAPTURE)


def capture_messages(call_messages: list[dict], title: str, summary: str) -> list[dict]:
    """The summary call's messages, its answer, then the question."""
    answer = json.dumps({"title": title, "summary": summary}, ensure_ascii=False)
    return [
        *call_messages,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": CAPTURE_QUESTION},
    ]


def capture_facts(
    call_messages: list[dict],
    *,
    title: str,
    summary: str,
    history: Sequence[Message],
    model: ChatModel,
) -> tuple[CapturedFact, ...]:
    """The facts the user stated, as ``model`` (the one that made the summary: the call
    continues it) finds them and the checks keep them; () when the call fails or its
    answer is not the asked shape."""
    try:
        answer = model.complete_json(
            messages=capture_messages(call_messages, title, summary),
            schema=CAPTURE_SCHEMA,
            schema_name="user_facts",
            max_tokens=CAPTURE_MAX_TOKENS,
        )
    except LLMError as err:
        logger.info("fact capture failed; nothing captured: %s", err)
        return ()
    return checked_facts(answer, history=history)


def checked_facts(answer: object, *, history: Sequence[Message]) -> tuple[CapturedFact, ...]:
    """The answer's facts that pass every check (the module's list), in order."""
    items = answer.get("facts") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        logger.info("fact capture: the answer holds no list of facts")
        return ()
    said = [_plain(m.content) for m in history if m.role == Message.Role.USER and m.content]
    kept: list[CapturedFact] = []
    for item in items:  # as many as CAPTURE_MAX_TOKENS let the model write
        fact = _checked(item, said)
        if fact is not None and all(fact.key != other.key for other in kept):
            kept.append(fact)
        if len(kept) == MAX_CAPTURED_FACTS:
            break
    return tuple(kept)


def _checked(item: object, said: list[str]) -> CapturedFact | None:
    if not isinstance(item, dict):
        return None
    evidence = item.get("evidence")
    try:
        key = check_fact_key(item.get("key"))
        value = check_fact_value(item.get("value"))
    except InvalidInput as err:
        logger.info("fact capture: refused %r: %s", str(item.get("key"))[:40], err.message)
        return None
    if not isinstance(evidence, str) or not isinstance(value, str | int | float):
        return None
    quote = _plain(evidence).strip(_QUOTES)
    if len(quote) < SHORTEST_EVIDENCE or not any(quote in text for text in said):
        logger.info("fact capture: %r is not in the user's words", key)
        return None
    if _plain(str(value)).strip(_QUOTES) not in quote:
        logger.info("fact capture: the value of %r is not in its evidence", key)
        return None
    return CapturedFact(key=key, value=value, evidence=evidence.strip())


def _plain(text: str) -> str:
    """Case and spacing aside."""
    return " ".join(text.casefold().split())


def store_captured_facts(*, topic: Topic, facts: Sequence[CapturedFact]) -> int:
    """Store each fact as set by the agent, from ``topic``; returns how many were set.
    A fact the user set is never overwritten: that refusal, like any other, skips it."""
    stored = 0
    for fact in facts:
        try:
            do_set_fact(
                session=topic.session,
                key=fact.key,
                value=fact.value,
                actor=FactActor.AGENT,
                topic_id=topic.pk,
            )
        except (Conflict, InvalidInput) as err:
            logger.info("captured fact %r not stored: %s", fact.key, err)
            continue
        stored += 1
    return stored
