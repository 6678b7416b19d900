"""Promotion on a small model: a second look at the summary's ``include_in_memory``.

A 1.5B model answers the specification's summary prompt with ``include_in_memory: true``
for nearly every conversation (14 of 15 casual ones, docs/measurements.md). When
``PROMOTION_JUDGE_THRESHOLD`` is above 0, a ``true`` is checked by one more call: a rubric
of its own (what is durable, what is casual), the conversation exactly as the summary
call sent it, and one word to answer, "yes" or "no". The answer is one token at
temperature 0, and its log-probabilities (``ChatModel.yes_probability``) give P(yes): the
call costs reading the prompt, nothing to generate. The topic is promoted only when P(yes)
reaches the threshold, chosen on the tune half of the labelled set (docs/memory.md,
"Promotion"; the model's bare "yes" is near a coin toss, its probability is not).

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
from memory.models import Message

logger = logging.getLogger(__name__)

# The rubric: what "durable" means, with short examples of what a small model confuses (a
# user who mentions where they are today is not telling a lasting fact). Only the user's
# own words are judged: what the assistant or a tool said is not the user's to remember.
PROMOTION_RUBRIC = """You read what a user said to an assistant and decide whether the
assistant should remember it in future conversations, weeks from now.
Say yes when the user states something lasting about themselves: a decision they made, a
preference about how to be answered (language, units, format, a nickname), a plan with a
date, a constraint (an allergy, a diet, a health condition, a rule about their time), or
a fact about their life or work (job, city, family, pet).
Say no when the user only asks questions, wants trivia, a joke, a fun fact, a translation,
a calculation or a quick how-to, or chats, even when they are friendly or mention where
they are or what they are doing right now.
Examples:
"I'm allergic to kiwi." -> yes
"Tell me a joke about cats." -> no
"I'm at the office printer and it keeps jamming, what do I do?" -> no
"From next month I work four days a week, Fridays off." -> yes
"Who won the Tour de France in 1998? I'm watching a stage now." -> no
"Llámame Lupe, por favor." -> yes
Answer with one word: yes or no."""
PROMOTION_QUESTION = "Should the assistant remember this? Answer yes or no."
# The user's words the judge reads: the newest that fit, each message clipped.
JUDGE_MESSAGE_CHARS = 1000
JUDGE_INPUT_CHARS = 6000


# The threshold chosen for Qwen2.5-Coder-1.5B on the tune half (docs/memory.md,
# "Promotion"); what the local-model lane sets and bench.summary_quality uses by default.
SMALL_MODEL_THRESHOLD = 0.6


@dataclass(frozen=True)
class PromotionVerdict:
    include: bool  # the model's decision, before MIN_MEMORY_TURNS and the outside-tool rule
    probability: float | None  # the judge's P(yes); None when it did not run or failed
    detail: str = ""


def judge_threshold() -> float:
    """P(yes) a summary's ``true`` needs to stand; 0 leaves the summary's flag alone."""
    return float(settings.PROMOTION_JUDGE_THRESHOLD)


def judge_messages(history: Sequence[Message]) -> list[dict]:
    """The rubric, then what the user said in the topic (the newest that fit)."""
    said: list[str] = []
    total = 0
    for message in reversed(history):
        if message.role != Message.Role.USER or not message.content.strip():
            continue
        line = f"User: {clip(message.content.strip(), JUDGE_MESSAGE_CHARS)}"
        if said and total + len(line) > JUDGE_INPUT_CHARS:
            break
        said.append(line)
        total += len(line)
    words = "\n".join(reversed(said))
    return [
        {"role": "system", "content": PROMOTION_RUBRIC},
        {"role": "user", "content": f"What the user said:\n{words}\n\n{PROMOTION_QUESTION}"},
    ]


def durable_probability(history: Sequence[Message]) -> float:
    """The judge's P(yes) for a topic's messages. Raises LLMError."""
    model = get_chat_model("summary")
    return model.yes_probability(messages=judge_messages(history))


def judged(include: bool, probability: float | None, threshold: float) -> bool:
    """The decision: the summary's strict flag, and P(yes) at least ``threshold`` when a
    threshold is set (a judge that gave no probability promotes nothing)."""
    if include is not True:
        return False
    if threshold <= 0:
        return True
    return probability is not None and probability >= threshold


def decide_promotion(history: Sequence[Message], *, include: bool) -> PromotionVerdict:
    """The summary's strict flag, checked by the judge when one is configured."""
    threshold = judge_threshold()
    if include is not True or threshold <= 0:
        return PromotionVerdict(include=include is True, probability=None)
    try:
        probability = durable_probability(history)
    except LLMError as err:
        logger.info("promotion judge failed; the topic is not promoted: %s", err)
        return PromotionVerdict(include=False, probability=None, detail=str(err))
    keep = judged(include, probability, threshold)
    if not keep:
        logger.info("promotion judge: P(yes) %.2f below %.2f", probability, threshold)
    return PromotionVerdict(include=keep, probability=probability)
