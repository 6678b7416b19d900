"""Model-free drift detectors: has the active topic moved on to a new subject?

The memory pipeline calls a detector every tenth message with the whole thread of
the active topic. A detector answers with a :class:`DriftVerdict`; on drift the
turns from ``start`` on are relocated to a new topic (a silent fork).

Two detectors live here, both pure Python (this module imports no Django, so the
benchmark in ``bench/drift_quality.py`` runs it as it is):

* ``lexical`` (the default) scores every candidate turn of the scan-back window
  for "this turn opens a new subject" from a dozen lexical and dialogue cues:
  how many of its content words are new to the preceding turns, whether it asks
  a question and whether that question is about new things, whether it merely
  answers or bounces back the previous question, and its word overlap with the
  preceding turns. A logistic function of these cues, with weights fitted on
  the TIAGE training dialogues, gives a probability; the best candidate forks the
  topic when that probability passes :data:`LEXICAL_THRESHOLD`.
* ``baseline`` is plain TextTiling: the bag-of-words cosine of the turns on both
  sides of each gap, depth scores, a fixed depth threshold. It is kept as the
  yardstick the benchmark reports next to the lexical detector.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from memory.textstats import bag, content_terms, cosine, words

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

#: Fork when the best candidate's probability of opening a new subject reaches this.
#: The ``--fit`` sweep on tiage-train gives the lowest mean Pk over cadences 1 and 10
#: here, on a plateau (0.375 to 0.5 lie within 0.003 of it).
LEXICAL_THRESHOLD = 0.45


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0


class LexicalDetector:
    """Production detector: per-turn "opens a new subject" probability from lexical cues."""

    name = "lexical"

    def __init__(
        self, weights: dict[str, float] | None = None, threshold: float = LEXICAL_THRESHOLD
    ) -> None:
        self.weights = LEXICAL_WEIGHTS if weights is None else weights
        self.threshold = threshold

    def score(self, cues: dict[str, float]) -> float:
        """Probability that a turn with these cues opens a new subject."""
        linear = self.weights.get("bias", 0.0)
        linear += sum(self.weights.get(name, 0.0) * value for name, value in cues.items())
        return _logistic(linear)

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict:
        candidates = candidate_starts(len(turns), scan_back)
        if not candidates:
            return NO_DRIFT_TOO_SHORT
        scores = [0.0] * len(turns)
        for index, cues in subject_cues([t.text for t in turns], candidates).items():
            scores[index] = self.score(cues)
        start = find_new_subject_start(scores, candidates, self.threshold)
        if start is None:
            best = max(scores[i] for i in candidates)
            return DriftVerdict(False, None, f"no new subject (best score {best:.2f})")
        return DriftVerdict(
            True, start, f"lexical shift at turn {start} (score {scores[start]:.2f})"
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
