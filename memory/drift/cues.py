"""Cues that a turn of a conversation opens a new subject, for the lexical detector.

* **Per-turn cues** (:func:`subject_cues`): a dozen lexical and dialogue cues of a turn
  and the few turns before it (how much of it is new, whether it asks about new things,
  whether it answers or bounces back a question), combined by :data:`LEXICAL_WEIGHTS`,
  fitted on the TIAGE training dialogues (two people chatting).
* **Exchange cues** (:func:`exchange_cues`): in a conversation between a user and an
  assistant only the user opens subjects. A user turn is judged with the reply it got
  against the topic before it, by the user's own words against the user's earlier
  turns, by how it announces itself (memory/drift/dialogue_cues.py) and by whether it names a
  subject of its own at all ("А сколько это стоит?" names none: it leans on the topic),
  combined by :data:`EXCHANGE_WEIGHTS`, fitted on bench/data/product-tune.jsonl.

Pure Python (no Django), so that bench/drift_quality.py runs it as it is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memory.drift.dialogue_cues import (
    announces_return,
    announces_switch,
    leans_on_topic,
    opens_as_follow_up,
    opens_with_reference,
)
from memory.text.stats import bag, content_terms, cosine, topic_bag, topic_terms, words


@dataclass(frozen=True)
class Turn:
    role: str  # "user" | "assistant"
    text: str
    #: The text's stored sentence vector (memory/stores/vectors.py), when the caller has it;
    #: the semantic detector embeds the turns that come without one.
    vector: object = field(default=None, compare=False, repr=False)


# --------------------------------------------------------------------------- #
# Lexical detector
# --------------------------------------------------------------------------- #

#: How many preceding turns of the topic a candidate turn is compared with.
CONTEXT_TURNS = 4

_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")
_QUESTION_OPENERS = frozenset(
    "do does did are is was were have has had can could will would should shall may "
    "what what's whats where when which who whose how why any ever".split()
)
_BACK_REFERENCES = frozenset(
    "it its that this these those they them their he him his she her there one".split()
)
_BOUNCE_BACK = re.compile(
    r"\b(?:what about you|how about you|and you|about yourself|you too|u)\s*\?+\s*$"
)


@dataclass(frozen=True)
class _TurnStats:
    """Per-turn facts the cues need, computed once per ``detect`` call."""

    terms: frozenset[str]
    question_terms: frozenset[str]
    asks: bool
    opens_with_question_word: bool
    question_refers_back: bool
    bounces_back: bool

    @classmethod
    def of(cls, text: str) -> _TurnStats:
        sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip()]
        questions = [s for s in sentences if s.endswith(("?", "？"))]
        question_words = [words(q) for q in questions]
        return cls(
            terms=frozenset(content_terms(text)),
            question_terms=frozenset(t for q in questions for t in content_terms(q)),
            asks=bool(questions),
            opens_with_question_word=any(w and w[0] in _QUESTION_OPENERS for w in question_words),
            question_refers_back=_question_refers_back(sentences),
            bounces_back=bool(_BOUNCE_BACK.search(text.lower().strip())),
        )


def _question_refers_back(sentences: Sequence[str]) -> bool:
    """Does the turn ask about something said before it ("what was that like?")?

    A pronoun after a statement of the same turn points into that statement
    ("my engine knocks. what could cause that?"), so only a question that comes
    before any content-bearing statement of the turn counts.
    """
    for sentence in sentences:
        if sentence.endswith(("?", "？")) and any(w in _BACK_REFERENCES for w in words(sentence)):
            return True
        if content_terms(sentence):
            return False
    return False


def _share_new(terms: frozenset[str], seen: set[str]) -> float:
    """Fraction of ``terms`` absent from ``seen``; 0.0 for no terms (nothing new)."""
    if not terms:
        return 0.0
    return sum(1 for t in terms if t not in seen) / len(terms)


def _turn_cues(stats: Sequence[_TurnStats], texts: Sequence[str], index: int) -> dict[str, float]:
    """The cues saying whether turn ``index`` opens a new subject.

    Only the turn itself and the turns before it are used, so a turn's score does
    not change as later turns arrive: at a one-message cadence the fork happens as
    the new subject's first turn comes in, not some turns later.
    """
    turn, previous = stats[index], stats[index - 1]
    first = max(0, index - CONTEXT_TURNS)
    context = stats[first:index]
    seen = set().union(*(s.terms for s in context))
    recurring = {t for t in seen if sum(t in s.terms for s in context) >= 2}
    this_bag = bag([texts[index]])
    return {
        "novelty": _share_new(turn.terms, seen),
        "question_novelty": _share_new(turn.question_terms, seen),
        "asks": float(turn.asks),
        "opens_with_question_word": float(turn.opens_with_question_word),
        "question_refers_back": float(turn.question_refers_back),
        "bounces_back": float(turn.bounces_back),
        "answers_question": float(previous.asks),
        "previous_length": math.log1p(len(previous.terms)),
        "length": math.log1p(len(turn.terms)),
        "repeats_recurring_term": float(bool(turn.terms & recurring)),
        "similarity_previous": cosine(this_bag, bag([texts[index - 1]])),
        "similarity_context": cosine(this_bag, bag(texts[first:index])),
    }


def subject_cues(texts: Sequence[str], indexes: Iterable[int]) -> dict[int, dict[str, float]]:
    """Cues for each turn in ``indexes`` (each >= 1) of a thread given as its texts.

    Turns without a single content word ("ok", "?", "") are left out: they cannot
    open a new subject. Public so that the benchmark fits :data:`LEXICAL_WEIGHTS`
    on exactly the cues the detector sees.
    """
    stats = [_TurnStats.of(text) for text in texts]
    return {i: _turn_cues(stats, texts, i) for i in indexes if stats[i].terms}


#: Logistic-regression weights of the cues, fitted on tiage-train.jsonl with
#: ``python -m bench.drift_quality --fit $DRIFT_DATA/tiage-train.jsonl``.
LEXICAL_WEIGHTS: dict[str, float] = {
    "bias": -3.6267,
    "novelty": 0.8242,
    "question_novelty": 1.1256,
    "asks": 0.5605,
    "opens_with_question_word": 0.6528,
    "question_refers_back": -1.0226,
    "bounces_back": -0.4241,
    "answers_question": -0.9865,
    "previous_length": 0.4558,
    "length": 0.4705,
    "repeats_recurring_term": -0.4683,
    "similarity_previous": -2.0281,
    "similarity_context": 0.1943,
}

#: The per-turn cues' probability of a new subject at which they alone would fork.
#: The ``--fit`` sweep on tiage-train gives the lowest mean Pk over cadences 1 and 10
#: here, on a plateau (0.375 to 0.5 lie within 0.003 of it).
LEXICAL_THRESHOLD = 0.45


# --------------------------------------------------------------------------- #
# Exchange cues: threads between a user and an assistant
# --------------------------------------------------------------------------- #

#: Mean content words per assistant reply below which replies say too little about
#: their subject to compare topics by (one short sentence), and from which they say
#: enough (two or three sentences). Between the two, exchange cues weigh in linearly.
#: Chosen from the data's shape, not fitted: TIAGE turns hold at most ~6 content
#: words on average, the product-like replies at least ~22.
REPLY_TERMS_NO_EVIDENCE = 8
REPLY_TERMS_FULL_EVIDENCE = 20

#: Added to log-cosines so that "no shared word" is a finite, not infinite, signal.
_SIMILARITY_FLOOR = 0.01

#: A new subject names itself: a turn with a few content words of its own ("How do I
#: cancel my gym membership?") may open one, a turn with one or none ("А сколько это
#: стоит?", "And the weather up there?") asks about the subject at hand. Words are counted
#: up to this many, so that a long question does not weigh more than one that names its
#: subject. Chosen by five-fold cross-validation on product-tune (three fold seeds): 6
#: gives Pk .029 to .052, 4 gives .059 to .076 and 0.17 to 0.21 false forks per
#: single-subject dialogue once the half holds terse switches ("Pancake recipe?"), which
#: this cue leaves to the other cues (most are missed).
SUBJECT_TERMS_CAP = 6

#: Exchange-cue margin of a user turn the assistant has not answered yet: with long
#: replies a question alone cannot tell a follow-up from a new subject ("Should I
#: worry about aphids?"), so it waits for its answer unless it announces a switch.
UNANSWERED_MARGIN = -10.0


def has_real_roles(turns: Sequence[Turn]) -> bool:
    """Does the thread hold both user and assistant turns?

    Only then do roles mean "the user steers, the assistant answers". A thread
    between two people (or a thread given without roles) is read turn by turn.
    """
    roles = {turn.role for turn in turns}
    return "user" in roles and "assistant" in roles


def reply_reliability(turns: Sequence[Turn]) -> float:
    """How far exchange cues can be trusted in this thread, from 0 to 1.

    Comparing a question and its answer with the topic so far needs replies with
    enough words in them; one-line replies ("Yes, it does.") leave the per-turn cues
    to decide. Measured on the mean reply of the thread so that every candidate of
    one call is weighed alike.
    """
    replies = [len(content_terms(t.text)) for t in turns if t.role == "assistant"]
    if not replies:
        return 0.0
    mean = sum(replies) / len(replies)
    span = REPLY_TERMS_FULL_EVIDENCE - REPLY_TERMS_NO_EVIDENCE
    return min(1.0, max(0.0, (mean - REPLY_TERMS_NO_EVIDENCE) / span))


#: The assistant's replies are templated when the terms found in at least
#: :data:`BOILERPLATE_SHARE` of them (of at least :data:`BOILERPLATE_MIN_REPLIES`) make up
#: at least :data:`TEMPLATED_SHARE` of a reply's terms on average: "Offline mode: no
#: model is configured" under every question. Real replies share a subject word or two
#: ("March" in every answer about a trip in March), never most of their words.
BOILERPLATE_SHARE = 0.8
BOILERPLATE_MIN_REPLIES = 3
TEMPLATED_SHARE = 0.5


def boilerplate_terms(turns: Sequence[Turn]) -> frozenset[str]:
    """Terms of the assistant's template, when its replies are templated (else none)."""
    replies = [set(topic_terms(t.text)) for t in turns if t.role == "assistant"]
    replies = [reply for reply in replies if reply]
    if len(replies) < BOILERPLATE_MIN_REPLIES:
        return frozenset()
    counts = Counter(term for reply in replies for term in reply)
    least = BOILERPLATE_SHARE * len(replies)
    common = frozenset(term for term, count in counts.items() if count >= least)
    shares = [len(reply & common) / len(reply) for reply in replies]
    return common if sum(shares) / len(shares) >= TEMPLATED_SHARE else frozenset()


def substantive_turns(turns: Sequence[Turn]) -> list[int]:
    """Indexes of the turns that say something about a subject: every turn, unless the
    assistant's replies are templated (:func:`boilerplate_terms`); then the user's only."""
    if not boilerplate_terms(turns):
        return list(range(len(turns)))
    return [index for index, turn in enumerate(turns) if turn.role != "assistant"]


def exchange_end(turns: Sequence[Turn], start: int) -> tuple[int, bool]:
    """End (exclusive) of the exchange a user turn opens, and whether it was answered.

    The exchange runs to the end of the first run of assistant turns after it, so a
    user turn sent in two messages is one exchange with its reply.
    """
    index = start + 1
    while index < len(turns) and turns[index].role != "assistant":
        index += 1
    if index == len(turns):
        return start + 1, False
    while index < len(turns) and turns[index].role == "assistant":
        index += 1
    return index, True


def _pooled(bags: Iterable[Counter[str]]) -> Counter[str]:
    pooled: Counter[str] = Counter()
    for one in bags:
        pooled.update(one)
    return pooled


def _log_similarity(a: Counter[str], b: Counter[str]) -> float:
    return math.log(cosine(a, b) + _SIMILARITY_FLOOR)


def linear(weights: dict[str, float], cues: dict[str, float]) -> float:
    return weights.get("bias", 0.0) + sum(weights.get(k, 0.0) * v for k, v in cues.items())


def exchange_cues(
    turns: Sequence[Turn],
    indexes: Iterable[int],
    *,
    turn_weights: dict[str, float] | None = None,
) -> dict[int, dict[str, float]]:
    """Cues for each user turn in ``indexes`` (each >= 1) that it opens a new subject.

    The topic "before" is every turn of the thread before the candidate, "after" is
    the candidate and everything since: a whole-topic comparison, because a topic
    of many turns drifts within itself, and a follow-up is related to the topic as a
    whole more than to the turn before it. A new subject names itself: the user turn's
    own topic words count up to :data:`SUBJECT_TERMS_CAP` ("names_subject"), and a
    short turn that points back by a pronoun or a place word leans on the topic
    ("leans_on_topic"). Assistant turns and turns without content words are left out.
    Public so that the benchmark fits :data:`EXCHANGE_WEIGHTS` on exactly the cues the
    detector sees.
    """
    texts = [turn.text for turn in turns]
    per_turn = subject_cues(texts, indexes)
    boilerplate = boilerplate_terms(turns)
    bags = [_without(topic_bag([text]), boilerplate) for text in texts]
    users = [index for index, turn in enumerate(turns) if turn.role == "user"]
    weights = LEXICAL_WEIGHTS if turn_weights is None else turn_weights
    cues: dict[int, dict[str, float]] = {}
    for index, turn_cues in per_turn.items():
        if turns[index].role != "user":
            continue
        end, _ = exchange_end(turns, index)
        next_end = exchange_end(turns, end)[0] if end < len(turns) else end
        following = _pooled(bags[end:next_end])
        before = _pooled(bags[:index])
        exchange = _pooled(bags[index:end])
        after = _pooled(bags[index:])
        asked = bags[index]
        user_before = _pooled(bags[i] for i in users if i < index)
        user_after = _pooled(bags[i] for i in users if i >= index)
        reply = next(
            (bags[i] for i in range(index - 1, -1, -1) if turns[i].role == "assistant"), Counter()
        )
        text = texts[index]
        cues[index] = {
            "turn_score": linear(weights, turn_cues),
            "announces_switch": float(announces_switch(text)),
            "announces_return": float(announces_return(text)),
            "follows_up": float(opens_as_follow_up(text)),
            "refers_back": float(opens_with_reference(text)),
            "leans_on_topic": float(leans_on_topic(text)),
            "names_subject": math.log1p(min(len(set(asked)), SUBJECT_TERMS_CAP)),
            "similarity_before": _log_similarity(exchange, before),
            "similarity_after": _log_similarity(after, before),
            "reuses_reply": sum(1 for t in asked if t in reply) / len(asked) if asked else 0.0,
            "user_similarity_before": _log_similarity(asked, user_before),
            "user_similarity_after": _log_similarity(user_after, user_before),
            "next_stays_new": (
                _log_similarity(following, exchange) - _log_similarity(following, before)
                if following
                else 0.0
            ),
        }
    return cues


def _without(counts: Counter[str], terms: frozenset[str]) -> Counter[str]:
    return Counter({t: c for t, c in counts.items() if t not in terms}) if terms else counts


#: Logistic-regression weights of the exchange cues, fitted on the product-like dialogues
#: (the tune half, six languages) with ``python -m bench.drift_quality --fit-exchange
#: bench/data/product-tune.jsonl`` (ridge 1).
EXCHANGE_WEIGHTS: dict[str, float] = {
    "bias": -13.663,
    "turn_score": 0.807,
    "announces_switch": 2.93,
    "announces_return": 2.204,
    "follows_up": -1.12,
    "refers_back": -1.796,
    "leans_on_topic": -1.084,
    "names_subject": 3.902,
    "similarity_before": -1.023,
    "similarity_after": -1.147,
    "reuses_reply": -0.921,
    "user_similarity_before": 0.646,
    "user_similarity_after": -0.186,
    "next_stays_new": 0.648,
}

#: The exchange cues' probability of a new subject at which they alone would fork, chosen
#: by five-fold cross-validation on product-tune (weights refitted on four folds, scored
#: on the fifth at the product's ten-message cadence, three fold seeds): 0.25 gives Pk
#: .034 to .041 and no false fork; 0.2 gives .029 to .052 and 0.08 false forks per
#: single-subject dialogue with one seed, 0.15 up to 0.12, 0.3 finds fewer switches. On
#: the whole half: Pk 0.035, 49 of 56 switches found within two turns, no false fork in
#: 24 single-subject dialogues.
EXCHANGE_THRESHOLD = 0.25


def logit(probability: float) -> float:
    return math.log(probability / (1.0 - probability))


def logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0
