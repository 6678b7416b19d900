"""Model-free drift detectors: has the active topic moved on to a new subject?

The memory pipeline calls a detector every tenth message (and when the user leaves) with
the whole thread of the active topic. A detector answers with a :class:`DriftVerdict`;
on drift the turns from ``start`` on are relocated to a new topic (a silent fork), and
the new topic is judged again, so a detector answers the *first* new subject it sees.
The cues themselves live in memory/drift/cues.py (text statistics in
memory/text/stats.py, phrases in memory/drift/dialogue_cues.py), in every language
people chat in.

Two detectors live here, both pure Python (this module imports no Django, so the
benchmark in ``bench/drift_quality.py`` runs it as it is):

* ``lexical`` (what ``auto``, the default, and ``llm`` run with the offline model;
  memory/drift/llm.py has the model's detector) scores every candidate turn of the
  scan-back window for "this turn opens a new subject" and forks at the first one that is sure
  enough (:meth:`LexicalDetector.detect`). It reads the thread in one of three ways:

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
  - **Templated replies** (the offline model's line under every question): the
    replies are set aside and only a user turn that announces a switch or a return
    forks (:func:`user_margins`).
* ``baseline`` is plain TextTiling: the bag-of-words cosine of the turns on both
  sides of each gap, depth scores, a fixed depth threshold. It is kept as the
  yardstick the benchmark reports next to the lexical detector.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from memory.drift.cues import (
    EXCHANGE_THRESHOLD,
    EXCHANGE_WEIGHTS,
    LEXICAL_THRESHOLD,
    LEXICAL_WEIGHTS,
    UNANSWERED_MARGIN,
    Turn,
    exchange_cues,
    exchange_end,
    has_real_roles,
    linear,
    logistic,
    logit,
    reply_reliability,
    subject_cues,
    substantive_turns,
)
from memory.drift.dialogue_cues import announces_return, announces_switch
from memory.text.stats import bag, cosine

__all__ = [
    "DriftDetector",
    "DriftVerdict",
    "LexicalDetector",
    "TextTilingDetector",
    "Turn",
    "candidate_starts",
    "exchange_cues",
    "exchange_end",
    "get_detector",
    "has_real_roles",
    "reply_reliability",
    "subject_cues",
]

#: Fork margin of a user turn that announces a switch or a return ("Completely
#: different thing: ...") where the assistant's replies carry no subject to weigh.
ANNOUNCED_MARGIN = 1.0

#: User turns a topic needs before one of its turns can open a new subject unannounced,
#: in threads whose replies are long enough to weigh (reliability at least 0.5): one
#: question and a paragraph answer are too little to compare the next question with.
#: With one-line replies (SuperDialseg) topics are short and this would miss switches.
MIN_TOPIC_QUESTIONS = 2
YOUNG_TOPIC_RELIABILITY = 0.5

#: The old topic keeps at least this many messages after a fork: the contract needs
#: one, and a one-message topic is not worth its own summary.
MIN_OLD_TOPIC = 2


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

    def margins(self, turns: Sequence[Turn], candidates: Iterable[int]) -> dict[int, float]:
        """Fork margin of every candidate that may open a subject (others are absent).

        Replies that hold nothing but boilerplate are set aside first, so the user's own
        turns decide when the assistant says the same thing every time.
        """
        kept = substantive_turns(turns)
        if len(kept) < len(turns):
            position = {index: k for k, index in enumerate(kept)}
            inner = user_margins(
                [turns[i].text for i in kept], [position[i] for i in candidates if i in position]
            )
            return {kept[k]: margin for k, margin in inner.items()}
        texts = [turn.text for turn in turns]
        if not has_real_roles(turns):
            cut = logit(self.threshold)
            return {
                index: linear(self.weights, cues) - cut
                for index, cues in subject_cues(texts, candidates).items()
            }
        reliability = reply_reliability(turns)
        young_topics_wait = reliability >= YOUNG_TOPIC_RELIABILITY
        turn_cut, exchange_cut = logit(self.threshold), logit(self.exchange_threshold)
        margins = {}
        for index, cues in exchange_cues(turns, candidates, turn_weights=self.weights).items():
            _, answered = exchange_end(turns, index)
            announced = cues["announces_switch"] or cues["announces_return"]
            asked_before = sum(1 for turn in turns[:index] if turn.role == "user")
            if young_topics_wait and asked_before < MIN_TOPIC_QUESTIONS and not announced:
                exchange_margin = UNANSWERED_MARGIN  # one exchange is too little to compare
            elif answered or cues["announces_switch"]:
                exchange_margin = linear(self.exchange_weights, cues) - exchange_cut
            else:
                exchange_margin = UNANSWERED_MARGIN
            turn_margin = cues["turn_score"] - turn_cut
            margins[index] = reliability * exchange_margin + (1 - reliability) * turn_margin
        return margins

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict:
        """The first new subject of the window: the best candidate, unless the topic
        before it already holds a new subject (then that one, and so on back).

        The fork loop judges the new topic again after a fork, so a later subject of the
        same window is found next; forking at a later one first would bury the earlier
        one in the closed topic.
        """
        candidates = candidate_starts(len(turns), scan_back)
        if not candidates:
            return NO_DRIFT_TOO_SHORT
        margins = self.margins(turns, candidates)
        start = _best(margins, candidates)
        if start is None:
            best = max(margins.values(), default=-math.inf)
            return DriftVerdict(False, None, f"no new subject (best score {logistic(best):.2f})")
        margin = margins[start]
        while True:
            # An earlier candidate must open a subject both in the whole window and in
            # the topic that ends where the later subject starts.
            earlier = [i for i in range(candidates.start, start) if margins.get(i, -1.0) >= 0]
            if not earlier:
                break
            before = self.margins(turns[:start], earlier)
            found = _best(before, range(earlier[0], start))
            if found is None:
                break
            start, margin = found, before[found]
        return DriftVerdict(
            True, start, f"lexical shift at turn {start} (score {logistic(margin):.2f})"
        )


def user_margins(texts: Sequence[str], candidates: Iterable[int]) -> dict[int, float]:
    """Fork margins of the user's turns alone, when the replies said nothing about a
    subject (the offline model's line under every question).

    Only a turn that announces a switch or a return forks. The user's questions alone
    cannot tell a follow-up from a new subject: on product-tune with offline replies,
    forking on turns that share no word with the topic before found every unannounced
    switch but forked 1.6 to 2.5 times per single-subject dialogue; announcements alone
    find 22 of 40 switches with no false fork.
    """
    return {
        index: ANNOUNCED_MARGIN
        if announces_switch(texts[index]) or announces_return(texts[index])
        else UNANSWERED_MARGIN
        for index in candidates
    }


def _best(margins: dict[int, float], candidates: range) -> int | None:
    """The candidate with the highest margin of at least 0 (the earlier on a tie)."""
    scores = [-math.inf] * (candidates.stop)
    for index, margin in margins.items():
        if index < candidates.stop:
            scores[index] = margin
    return find_new_subject_start(scores, candidates, 0.0)


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
        known = ", ".join(sorted([*_DETECTORS, "semantic"]))  # semantic: memory/drift/semantic.py
        raise ValueError(f"unknown drift detector {name!r}; known: {known}") from None
    return factory()
