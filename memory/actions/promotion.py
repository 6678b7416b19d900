"""Promotion on a small model: a second look at the summary's ``include_in_memory``.

A 1.5B model answers the specification's summary prompt with ``include_in_memory: true``
for nearly every conversation (14 of 15 casual ones, docs/measurements.md). When
``PROMOTION_JUDGE_THRESHOLD`` is above 0, a ``true`` is checked by a judge with a rubric of
its own: each of the user's newest messages (``JUDGE_MESSAGES``), one at a time, with one
word to answer, "yes" (it states something lasting about the user) or "no". Each answer
is one token at temperature 0, and its log-probabilities (``ChatModel.yes_probability``)
give P(yes); the topic's score is the highest, and the judge stops at the first message
that reaches the threshold. A call costs reading one message after a rubric the server
keeps cached, nothing to generate. The topic is promoted only when the score reaches the
threshold, chosen on the tune half of the labelled set (docs/memory.md, "Promotion"; the
model's bare "yes" is near a coin toss, its probability over one message is not).

The seed's rules are unchanged and come first: only a strict boolean ``true`` from the
summary is looked at again (the judge can only take a promotion away, never add one), a
failed judge call promotes nothing, ``MIN_MEMORY_TURNS`` and the outside-tool rule apply
after it (memory/actions/summarize.py), and the user's choice wins over all of it
(memory/stores/memory_states.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from memory.lib.text import clip
from memory.llm import LLMError, get_chat_model
from memory.models import Message, Session

logger = logging.getLogger(__name__)

# The rubric, for one message of the user at a time: a 1.5B model tells "this sentence
# states a lasting fact about the user" far better than it weighs a whole conversation
# (docs/measurements.md). Only the user's own words are judged: what the assistant or a
# tool said is not the user's to remember.
PROMOTION_RUBRIC = """You read one message a user wrote to an assistant. Does the message tell something lasting about the user that the assistant should remember for weeks: their name or nickname, a preference about how to be answered, a plan with a date, an allergy, diet or health condition, a rule about their time, a decision they made, or a fact about their life or work (job, home city, family, pet)?
Say no for questions, requests for trivia, jokes, translations, calculations or how-tos, thanks, small talk, and for where the user is or what they are doing right now.
Answer with one word: yes or no."""  # noqa: E501 (one paragraph, as the model read it)
PROMOTION_QUESTION = "Lasting fact about the user? Answer yes or no."
# What the judge reads: the newest user messages, each clipped.
JUDGE_MESSAGES = 8
JUDGE_MESSAGE_CHARS = 1000


# The threshold chosen for Qwen2.5-Coder-1.5B on the tune half (19/24; the test half gave
# 29/44: docs/measurements.md, "Promotion"); what the local-model lane sets and
# bench.summary_quality uses by default.
SMALL_MODEL_THRESHOLD = 0.6


@dataclass(frozen=True)
class PromotionVerdict:
    include: bool  # the model's decision, before MIN_MEMORY_TURNS and the outside-tool rule
    probability: float | None  # the judge's P(yes); None when it did not run or failed
    detail: str = ""


def judge_threshold() -> float:
    """P(yes) a summary's ``true`` needs to stand; 0 leaves the summary's flag alone."""
    return float(settings.PROMOTION_JUDGE_THRESHOLD)


def judge_messages(text: str) -> list[dict]:
    """The rubric, then one message of the user."""
    said = clip(text.strip(), JUDGE_MESSAGE_CHARS)
    return [
        {"role": "system", "content": PROMOTION_RUBRIC},
        {"role": "user", "content": f"Message: {said}\n\n{PROMOTION_QUESTION}"},
    ]


def durable_probability(
    history: Sequence[Message], *, enough: float | None = None, session: Session | None = None
) -> float:
    """The judge's P(yes) for a topic: the highest over the user's newest messages (it
    stops at the first that reaches ``enough``), asked of ``session``'s summary model (the
    deployment's without one). Raises LLMError."""
    said = [m.content for m in history if m.role == Message.Role.USER and m.content.strip()]
    model = get_chat_model("summary", session=session)
    best = 0.0
    for text in said[-JUDGE_MESSAGES:]:
        best = max(best, model.yes_probability(messages=judge_messages(text)))
        if enough is not None and best >= enough:
            break
    return best


def judged(include: bool, probability: float | None, threshold: float) -> bool:
    """The decision: the summary's strict flag, and P(yes) at least ``threshold`` when a
    threshold is set (a judge that gave no probability promotes nothing)."""
    if include is not True:
        return False
    if threshold <= 0:
        return True
    return probability is not None and probability >= threshold


def decide_promotion(
    history: Sequence[Message], *, include: bool, session: Session | None = None
) -> PromotionVerdict:
    """The summary's strict flag, checked by the judge when one is configured."""
    threshold = judge_threshold()
    if include is not True or threshold <= 0:
        return PromotionVerdict(include=include is True, probability=None)
    try:
        probability = durable_probability(history, enough=threshold, session=session)
    except LLMError as err:
        logger.info("promotion judge failed; the topic is not promoted: %s", err)
        return PromotionVerdict(include=False, probability=None, detail=str(err))
    keep = judged(include, probability, threshold)
    if not keep:
        logger.info("promotion judge: P(yes) %.2f below %.2f", probability, threshold)
    return PromotionVerdict(include=keep, probability=probability)
