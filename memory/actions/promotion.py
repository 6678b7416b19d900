"""Promotion on a small model: a second look at the summary's ``include_in_memory``.

A 1.5B model answers the specification's summary prompt with ``include_in_memory: true``
for nearly every conversation (jokes and trivia included; docs/measurements.md,
"Promotion"), and asking it again with a rubric, one yes/no token read by its
log-probabilities, agreed with the labels on 66 % of the test half. So on a model whose
profile is ``small`` (memory/llm/profiles.py) the second look is not asked of the model:
the **sentence encoder** (memory/text/embeddings.py) reads each of the user's newest
messages and compares it with two short lists of example sentences written for the
rubric's kinds, :data:`DURABLE_EXAMPLES` (a name, how to be answered, a plan with a date,
an allergy or diet, a rule about one's time, a decision, a fact about one's life or work)
and :data:`PASSING_EXAMPLES` (questions, trivia, jokes, translations, sums, how-tos,
thanks, small talk, where the user is or what they are doing right now). A message's
score is its mean similarity to its :data:`NEAREST` nearest durable examples minus that to
its nearest passing ones; the topic's score is the highest; the topic is promoted when it
reaches :data:`THRESHOLD`. The encoder is multilingual, so English examples serve every
language it reads (measured in six). It costs no model call: a few milliseconds.

The seed's rules are unchanged and come first: only a strict boolean ``true`` from the
summary is looked at again (the second look can take a promotion away, never add one),
``MIN_MEMORY_TURNS`` and the outside-tool rule apply after it (memory/actions/summarize.py),
the offline model's fallbacks never promote, and the user's choice wins over all of it
(memory/stores/memory_states.py).

``PROMOTION_SECOND_LOOK``: ``auto`` (the default: on for a small profile when the
multilingual encoder is installed, off for a capable model, whose flag is kept as the
specification has it), ``on`` or ``off``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from memory.lib.text import clip
from memory.llm.profiles import configured_profile
from memory.models import Message
from memory.text.embeddings import embed, encoder_name

logger = logging.getLogger(__name__)

# Written for the rubric's kinds, with subjects of their own (none is taken from the
# labelled sets); two sentences were added on the tune half (a new manager, a fixed
# budget; a "found it, all good" reply). Only the user's own words are compared: what
# the assistant or a tool said is not the user's to remember.
DURABLE_EXAMPLES = (
    # a name
    "Please call me Jo, that's what my friends call me.",
    "My name is Priya.",
    # how to be answered
    "Keep your answers brief, no more than three sentences.",
    "Always give temperatures in Fahrenheit for me.",
    "When you show code, use TypeScript, not JavaScript.",
    "Please stop using emojis when you reply to me.",
    # plans with a date
    "My sister's wedding is on 21 October and I'm giving a speech.",
    "I have a job interview at a bank next Thursday.",
    "We're driving to the Alps for the Christmas holidays.",
    # allergy, diet, health
    "I'm allergic to shellfish.",
    "I have type 1 diabetes, so watch the sugar in meal ideas.",
    "I don't eat pork for religious reasons.",
    "I hurt my knee, so no running for two months.",
    # rules about one's time
    "Never book anything for me before 10 am.",
    "Fridays are my day off, keep them free.",
    # decisions
    "We settled it: the mobile app will be written in Flutter.",
    "I've decided to sell my car and cycle to work.",
    "The board agreed the office closes in December.",
    # life and work
    "I'm a veterinary nurse at a small clinic.",
    "I just moved to Rotterdam with my partner.",
    "We have twin boys who are four years old.",
    "Our cat Miso is fourteen and has kidney trouble.",
    "I've been working from home full time since last year.",
    "I run a bakery with two employees.",
    "My team lead is now Kenji; he wants weekly summaries.",
    "Our holiday budget is 3,000 dollars, not a cent more.",
)
PASSING_EXAMPLES = (
    # questions, trivia
    "How tall is Mount Everest?",
    "Who painted the Mona Lisa?",
    "What year did the Berlin Wall fall?",
    "How many legs does a spider have?",
    # jokes, fun
    "Make me laugh, tell me something silly.",
    "Haha, that's terrible. One more?",
    "Give me a fun fact about octopuses.",
    # translations
    "How do you say 'good morning' in Italian?",
    "What's 'butterfly' in German?",
    # sums
    "What's 35 times 12?",
    "Convert 5 miles to kilometres.",
    # how-tos
    "How do I remove rust from a bike chain?",
    "How can I undo changes in Excel?",
    "What's the best way to clean a cast iron pan?",
    # thanks, small talk
    "Thank you, that helps.",
    "Nice, good to know.",
    "Oh wow, really?",
    "Okay, that's all for now.",
    # where the user is or what they are doing right now
    "I'm in a queue at the post office, it's so slow.",
    "I'm cooking dinner right now, how long do I fry onions?",
    "Sitting in a café, reading a novel about sailors.",
    "It worked, the printer is printing now.",
    "Found the button, all good now.",
    "I'm listening to an old Queen album, when did it come out?",
    "Watching tennis, who's the favourite to win?",
)
#: A message is compared with this many of its nearest examples of each kind.
NEAREST = 3
#: The score a topic needs, chosen on the tune half (43/44 from 0.0 to 0.005; the test
#: half, run once after: 43/44; docs/measurements.md, "Promotion").
THRESHOLD = 0.0
#: What the second look reads: the user's newest messages, each clipped.
LOOK_MESSAGES = 8
LOOK_MESSAGE_CHARS = 1000
SECOND_LOOK_CHOICES = ("auto", "on", "off")


@dataclass(frozen=True)
class PromotionVerdict:
    include: bool  # the decision, before MIN_MEMORY_TURNS and the outside-tool rule
    score: float | None  # the second look's score; None when it did not run


def second_look_on(model_name: str) -> bool:
    """Whether a summary's ``true`` from ``model_name`` is looked at again."""
    mode = settings.PROMOTION_SECOND_LOOK
    if mode in ("on", "off"):
        return mode == "on"
    return configured_profile(model_name).kind == "small" and encoder_name() == "use"


def durable_score(texts: Sequence[str]) -> float:
    """How much the most telling of ``texts`` (the user's messages) reads like something
    lasting about the user rather than something passing; above :data:`THRESHOLD` it is."""
    said = [clip(text.strip(), LOOK_MESSAGE_CHARS) for text in texts if text.strip()]
    if not said:
        return float("-inf")
    vectors = embed(said[-LOOK_MESSAGES:])
    durable = np.sort(vectors @ embed(DURABLE_EXAMPLES).T, axis=1)[:, -NEAREST:].mean(axis=1)
    passing = np.sort(vectors @ embed(PASSING_EXAMPLES).T, axis=1)[:, -NEAREST:].mean(axis=1)
    return float((durable - passing).max())


def decide_promotion(
    history: Sequence[Message], *, include: bool, model_name: str
) -> PromotionVerdict:
    """The summary's strict flag, looked at again when :func:`second_look_on`."""
    if include is not True or not second_look_on(model_name):
        return PromotionVerdict(include=include is True, score=None)
    said = [m.content for m in history if m.role == Message.Role.USER]
    score = durable_score(said)
    keep = score >= THRESHOLD
    if not keep:
        logger.info("promotion: second look %.3f below %.3f; not promoted", score, THRESHOLD)
    return PromotionVerdict(include=keep, score=score)
