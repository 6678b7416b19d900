"""Model-free drift detectors: has the active topic moved on to a new subject?

The memory pipeline calls a detector every tenth message with the whole thread of
the active topic. A detector answers with a :class:`DriftVerdict`; on drift the
turns from ``start`` on are relocated to a new topic (a silent fork).

Two detectors live here, both pure Python (this module imports no Django, so the
benchmark in ``bench/drift_quality.py`` runs it as it is):

* ``lexical`` (the default) scores every candidate turn of the scan-back window
  for "this turn opens a new subject" and forks at the best one when it is
  sure enough. It reads the thread in one of two ways:

  - **Between people** (no assistant turn in the thread, e.g. a chat between two
    users): per-turn cues only, a dozen lexical and dialogue cues of the turn and
    the few turns before it (how much of it is new, whether it asks about new
    things, whether it answers or bounces back a question), combined by a logistic
    function fitted on the TIAGE training dialogues.
  - **User and assistant** (the product): the user steers and the assistant
    answers, so only a user turn can open a subject. A user turn is judged
    together with the reply it got ("exchange") against the whole topic before it,
    and against what follows it: a follow-up question brings new words, but the
    answer to it is about the topic so far. Cue phrases ("different question",
    "back to ...", "what about ...", "is it ...") and reuse of the previous reply's
    words count too. These exchange cues are combined by a second logistic function,
    fitted on the product-like dialogues in bench/data/product-tune.jsonl, and weigh
    in as far as the assistant's replies are long enough to carry a subject (see
    :func:`reply_reliability`); with one-line replies the per-turn cues decide.
* ``baseline`` is plain TextTiling: the bag-of-words cosine of the turns on both
  sides of each gap, depth scores, a fixed depth threshold. It is kept as the
  yardstick the benchmark reports next to the lexical detector.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from memory.dialogue_cues import (
    announces_return,
    announces_switch,
    opens_as_follow_up,
    opens_with_reference,
)
from memory.textstats import bag, content_terms, cosine, topic_bag, words

#: The old topic keeps at least this many messages after a fork: the contract needs
#: one, and a one-message topic is not worth its own summary.
MIN_OLD_TOPIC = 2


@dataclass(frozen=True)
class Turn:
    role: str  # "user" | "assistant"
    text: str


@dataclass(frozen=True)
class DriftVerdict:
    drifted: bool
    start: int | None  # index into the given turns where the new subject begins
    reason: str


class DriftDetector(Protocol):
    name: str

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict: ...


NO_DRIFT_TOO_SHORT = DriftVerdict(False, None, "too few turns to judge")


def candidate_starts(n_turns: int, scan_back: int) -> range:
    """Indexes a new subject may start at: inside the scan-back window, old topic >= 2.

    Only the trailing ``scan_back`` messages may be relocated to a new topic, and
    the old topic must keep at least :data:`MIN_OLD_TOPIC` messages so that it is
    still worth a summary.
    """
    return range(max(MIN_OLD_TOPIC, n_turns - max(scan_back, 0)), n_turns)


def find_new_subject_start(
    scores: Sequence[float], candidates: range, threshold: float
) -> int | None:
    """The candidate with the highest score if it reaches ``threshold``, else None.

    Ties go to the earlier candidate, so the fork relocates the whole new subject.
    """
    best: int | None = None
    for index in candidates:
        if scores[index] >= threshold and (best is None or scores[index] > scores[best]):
            best = index
    return best


# --------------------------------------------------------------------------- #
# Lexical detector
# --------------------------------------------------------------------------- #

#: How many preceding turns of the topic a candidate turn is compared with.
CONTEXT_TURNS = 4

_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
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
        questions = [s for s in sentences if s.endswith("?")]
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
        if sentence.endswith("?") and any(w in _BACK_REFERENCES for w in words(sentence)):
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
#: ``python bench/drift_quality.py --fit /work/shared/data/drift/tiage-train.jsonl``.
LEXICAL_WEIGHTS: dict[str, float] = {
    "bias": -3.5843,
    "novelty": 0.81,
    "question_novelty": 1.1177,
    "asks": 0.5515,
    "opens_with_question_word": 0.6396,
    "question_refers_back": -1.0002,
    "bounces_back": -0.4255,
    "answers_question": -0.9821,
    "previous_length": 0.4314,
    "length": 0.4595,
    "repeats_recurring_term": -0.5255,
    "similarity_previous": -1.9384,
    "similarity_context": 0.2849,
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


def _linear(weights: dict[str, float], cues: dict[str, float]) -> float:
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
    whole more than to the turn before it. Assistant turns and turns without content
    words are left out. Public so that the benchmark fits :data:`EXCHANGE_WEIGHTS`
    on exactly the cues the detector sees.
    """
    texts = [turn.text for turn in turns]
    per_turn = subject_cues(texts, indexes)
    bags = [topic_bag([text]) for text in texts]
    weights = LEXICAL_WEIGHTS if turn_weights is None else turn_weights
    cues: dict[int, dict[str, float]] = {}
    for index, turn_cues in per_turn.items():
        if turns[index].role != "user":
            continue
        end, _ = exchange_end(turns, index)
        before = _pooled(bags[:index])
        exchange = _pooled(bags[index:end])
        after = _pooled(bags[index:])
        asked = bags[index]
        reply = next(
            (bags[i] for i in range(index - 1, -1, -1) if turns[i].role == "assistant"), Counter()
        )
        text = texts[index]
        cues[index] = {
            "turn_score": _linear(weights, turn_cues),
            "announces_switch": float(announces_switch(text)),
            "announces_return": float(announces_return(text)),
            "follows_up": float(opens_as_follow_up(text)),
            "refers_back": float(opens_with_reference(text)),
            "similarity_before": _log_similarity(exchange, before),
            "similarity_after": _log_similarity(after, before),
            "reuses_reply": sum(1 for t in asked if t in reply) / len(asked) if asked else 0.0,
        }
    return cues


#: Logistic-regression weights of the exchange cues, fitted on the product-like
#: dialogues with ``python bench/drift_quality.py --fit-exchange
#: bench/data/product-tune.jsonl`` (ridge 1).
EXCHANGE_WEIGHTS: dict[str, float] = {
    "bias": -10.073,
    "turn_score": 0.625,
    "announces_switch": 2.955,
    "announces_return": 2.077,
    "follows_up": -0.447,
    "refers_back": -1.372,
    "similarity_before": -1.453,
    "similarity_after": -0.848,
    "reuses_reply": -0.422,
}

#: The exchange cues' probability of a new subject at which they alone would fork.
#: On product-tune, 4-fold cross-validation (weights refitted on three quarters,
#: scored on the fourth) gives its best Pk from 0.2 to 0.3: 0.014 at a one-message
#: cadence, 0.101 at ten, no false fork; the full fit's sweep is flat from 0.15 to 0.55.
EXCHANGE_THRESHOLD = 0.3


def _logit(probability: float) -> float:
    return math.log(probability / (1.0 - probability))


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0


class LexicalDetector:
    """Production detector: lexical and dialogue cues, no model.

    Every candidate gets a fork margin in logit units (0 is "just sure enough"): the
    per-turn cues' margin over :data:`LEXICAL_THRESHOLD`, and in threads with real
    roles the exchange cues' margin over :data:`EXCHANGE_THRESHOLD`, mixed by
    :func:`reply_reliability`. The best candidate with a margin of at least 0 forks.
    """

    name = "lexical"

    def __init__(
        self,
        weights: dict[str, float] | None = None,
        threshold: float = LEXICAL_THRESHOLD,
        *,
        exchange_weights: dict[str, float] | None = None,
        exchange_threshold: float = EXCHANGE_THRESHOLD,
    ) -> None:
        self.weights = LEXICAL_WEIGHTS if weights is None else weights
        self.threshold = threshold
        self.exchange_weights = EXCHANGE_WEIGHTS if exchange_weights is None else exchange_weights
        self.exchange_threshold = exchange_threshold

    def score(self, cues: dict[str, float]) -> float:
        """Probability that a turn with these per-turn cues opens a new subject."""
        return _logistic(_linear(self.weights, cues))

    def margins(self, turns: Sequence[Turn], candidates: Iterable[int]) -> dict[int, float]:
        """Fork margin of every candidate that may open a subject (others are absent)."""
        texts = [turn.text for turn in turns]
        if not has_real_roles(turns):
            cut = _logit(self.threshold)
            return {
                index: _linear(self.weights, cues) - cut
                for index, cues in subject_cues(texts, candidates).items()
            }
        reliability = reply_reliability(turns)
        turn_cut, exchange_cut = _logit(self.threshold), _logit(self.exchange_threshold)
        margins = {}
        for index, cues in exchange_cues(turns, candidates, turn_weights=self.weights).items():
            _, answered = exchange_end(turns, index)
            if answered or cues["announces_switch"]:
                exchange_margin = _linear(self.exchange_weights, cues) - exchange_cut
            else:
                exchange_margin = UNANSWERED_MARGIN
            turn_margin = cues["turn_score"] - turn_cut
            margins[index] = reliability * exchange_margin + (1 - reliability) * turn_margin
        return margins

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict:
        candidates = candidate_starts(len(turns), scan_back)
        if not candidates:
            return NO_DRIFT_TOO_SHORT
        margins = self.margins(turns, candidates)
        scores = [-math.inf] * len(turns)
        for index, margin in margins.items():
            scores[index] = margin
        start = find_new_subject_start(scores, candidates, 0.0)
        if start is None:
            best = max(margins.values(), default=-math.inf)
            return DriftVerdict(False, None, f"no new subject (best score {_logistic(best):.2f})")
        return DriftVerdict(
            True, start, f"lexical shift at turn {start} (score {_logistic(scores[start]):.2f})"
        )


# --------------------------------------------------------------------------- #
# Baseline: TextTiling
# --------------------------------------------------------------------------- #


class TextTilingDetector:
    """Plain TextTiling (Hearst 1997) over turns, as an honest simple baseline.

    For every gap, the bag-of-words cosine of the ``block`` turns before and after
    it; a gap's depth is how far that similarity dips below the nearest peaks on
    both sides. The deepest gap inside the window forks when its depth reaches a
    fixed threshold. ``block=2, threshold=0.2`` is a middle setting of a sweep on
    tiage-train (blocks 1-4, thresholds 0-0.6); higher thresholds lower TIAGE's Pk
    there only by forking less and less, towards the score of never forking.
    """

    name = "baseline"

    def __init__(self, block: int = 2, threshold: float = 0.2) -> None:
        self.block = block
        self.threshold = threshold

    def gap_similarities(self, texts: Sequence[str]) -> list[float]:
        """Cosine of the blocks around every gap; index g is the gap before turn g."""
        sims = [0.0] * len(texts)
        for gap in range(1, len(texts)):
            left = bag(texts[max(0, gap - self.block) : gap])
            right = bag(texts[gap : gap + self.block])
            sims[gap] = cosine(left, right)
        return sims

    @staticmethod
    def depth(sims: Sequence[float], gap: int) -> float:
        """Hearst's depth score: climb to the peak on each side of the gap."""
        left = gap
        while left - 1 >= 1 and sims[left - 1] >= sims[left]:
            left -= 1
        right = gap
        while right + 1 < len(sims) and sims[right + 1] >= sims[right]:
            right += 1
        return (sims[left] - sims[gap]) + (sims[right] - sims[gap])

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict:
        candidates = candidate_starts(len(turns), scan_back)
        if not candidates:
            return NO_DRIFT_TOO_SHORT
        sims = self.gap_similarities([t.text for t in turns])
        depths = [0.0] * len(turns)
        for gap in candidates:
            depths[gap] = self.depth(sims, gap)
        start = find_new_subject_start(depths, candidates, self.threshold)
        if start is None:
            return DriftVerdict(False, None, "no similarity valley deep enough")
        return DriftVerdict(
            True, start, f"similarity valley at turn {start} (depth {depths[start]:.2f})"
        )


_DETECTORS: dict[str, Callable[[], DriftDetector]] = {
    "lexical": LexicalDetector,
    "baseline": TextTilingDetector,
}

DEFAULT_DETECTOR = "lexical"


def get_detector(name: str = DEFAULT_DETECTOR) -> DriftDetector:
    """A detector by name; raises ValueError listing the known names otherwise."""
    try:
        factory = _DETECTORS[name]
    except KeyError:
        known = ", ".join(sorted(_DETECTORS))
        raise ValueError(f"unknown drift detector {name!r}; known: {known}") from None
    return factory()
