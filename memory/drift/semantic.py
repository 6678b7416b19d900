"""Drift that sees meaning: the lexical detector's cues plus sentence similarity.

Shared words carry the lexical detector (memory/drift/detectors.py) in English; in other
languages a follow-up often shares no word with the question before it ("Und wie lange
braucht der Teig?" after a question about pizza), and a new subject may share a common one.
The :class:`SemanticDetector` reads the same candidates with the same cues and adds one:
how far the meaning of the candidate's exchange (the user's turn and the reply it got)
lies from the topic before it, by the cosine of their mean sentence vectors
(memory/text/embeddings.py). Its margin, in the lexical detector's logit units, is

    margin = lexical margin + SEMANTIC_WEIGHT * (SEMANTIC_CENTRE - similarity)

so a candidate far in meaning needs fewer lexical cues to fork, and one close in
meaning more. The weights are chosen on bench/data/product-tune.jsonl (``python -m
bench.drift_quality --sweep-semantic``); announced switches keep forking as before.
With one-line replies (as far as a thread's replies are short) the meaning is compared as
windows of turns and the word cues relative to the conversation's usual ones
(:meth:`SemanticDetector.margins`); there an unannounced switch in a young topic or in a
message that names a subject word or two needs a second cue to agree: its window lies far
from the topic's opening exchange too. With the offline model's templated replies only the
user's turns are compared. With the test suite's stand-in encoder (hashed words, no
meaning) it is the lexical detector.

Pure Python and numpy (no Django): the benchmark runs it as it is. A turn that comes
with its stored vector (``Turn.vector``) is never embedded again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from memory.drift.cues import (
    UNANSWERED_MARGIN,
    Turn,
    has_real_roles,
    reply_reliability,
    substantive_turns,
)
from memory.drift.detectors import (
    ANNOUNCED_MARGIN,
    YOUNG_TOPIC_RELIABILITY,
    DriftDetector,
    LexicalDetector,
)
from memory.drift.detectors import get_detector as get_word_detector
from memory.drift.dialogue_cues import (
    announces_return,
    announces_switch,
    leans_on_topic,
    opens_as_follow_up,
    opens_with_reference,
)
from memory.text.embeddings import embed, encoder_name
from memory.text.stats import topic_terms

#: Turns of the topic before a candidate whose meaning it is compared with.
SEMANTIC_CONTEXT = 6
#: Logit units a unit of cosine moves the margin, and the cosine that moves it none.
SEMANTIC_WEIGHT = 3.0
SEMANTIC_CENTRE = 0.45
#: With templated replies: the user's turn against the user's turns before it. A turn
#: this far in meaning from all of them forks unannounced (chosen on product-tune with
#: the offline line as every reply).
USER_ONLY_CENTRE = 0.05
USER_ONLY_WEIGHT = 8.0
ANCHOR = True
#: One-line replies (see :meth:`SemanticDetector.margins`): the turns on each side of a
#: candidate whose mean meanings are compared, the weight and centre of that comparison,
#: and how much of the conversation's usual lexical margin is taken off every candidate.
#: Chosen on product-tune (``python -m bench.drift_sweep``) among the
#: settings that keep SuperDialseg's Pk under CSM's.
SHORT_WINDOW = 4
SHORT_WEIGHT = 8.0
SHORT_CENTRE = 0.335  # 0.325 before SHORT_UNCONFIRMED_PENALTY (issue 46, fifth round)
SHORT_NORM = 1.0
#: Turns of such a topic before a candidate below which the topic is young: its opening
#: question and one-line answer are too little to compare the next one with by words.
SHORT_MIN_BEFORE = 3
#: Two cues must agree on an unannounced switch where one line says little: in a young
#: topic, and in a message that names at most ``SHORT_MESSAGE_TERMS`` subject words
#: ("Should I study endgames?", "Was kostet das insgesamt?"), the margin is also at most
#: ``OPENING_WEIGHT * (centre - similarity)``, the similarity being the cosine of the
#: topic's opening exchange (its first ``OPENING_TURNS`` turns, which name the subject a
#: wandering talk keeps coming back to) with the candidate's window of turns. In a young
#: topic a line that opens as a follow-up or leans on the topic ("Combien ça coûte ?",
#: "And with black?") does not fork unannounced. Chosen on
#: product-tune (as it is and ``--replies one-line``) among the settings that keep
#: SuperDialseg's Pk under CSM's: see docs/measurements.md.
SHORT_MESSAGE_TERMS = 2
OPENING_TURNS = 2
OPENING_WEIGHT = 8.0
OPENING_CENTRE = 0.3
OPENING_YOUNG_CENTRE = 0.275
#: User turns the usual margin is the median of, at least (fewer say nothing usual).
USUAL_NEEDS = 3
USER_ONLY_NEEDS = 2  # user turns before a candidate the comparison needs
#: An unannounced candidate in the thread's last exchange (no user turn after it yet) is
#: unconfirmed: one question far from the topic is as often a detour the next one comes
#: back from. Where the replies carry a subject (reliability at least 0.5) it forks only
#: this many logit units over the line. Chosen on product-tune at heartbeats of 6 to 14
#: messages (``python -m bench.drift_sweep --confirm``): at 10 alone the third round's
#: settings forked once in the 41 single-subject dialogues, at the other four 6 to 11 times,
#: nearly all in the last exchange; with this margin 18 in the five instead of 32, the same
#: from 2 to 10 units, every one left in a one-line talk. One-line replies have their own
#: margin, below: this one there cost SuperDialseg's Pk its margin under CSM's, and buying
#: it back by forking more elsewhere (SHORT_CENTRE 0.375) forked more on the test half; see
#: docs/measurements.md.
UNCONFIRMED_PENALTY = 3.0
#: The same wait in one-line talks (issue 46, fifth round), in logit units times how far the
#: replies are one-liners (1 - reliability), for a question that has its answer and no
#: question after it yet. Every one-line question brings new words, so the word cues read
#: the last one as new wherever it wanders; over heartbeats of 6 to 14 messages on
#: product-tune, 12 of the 18 false forks left were such last exchanges. A question with no
#: answer yet keeps today's margin: SuperDialseg's dialogues often end on one that opens a
#: subject, and waiting there put its Pk at .476, over CSM's .462 (no later check comes to
#: confirm it). The wait alone (centre 0.325) left SuperDialseg at .465; SHORT_CENTRE 0.335
#: buys that back (.460). Tune, the five heartbeats summed: false forks 18/205 -> 5/205,
#: switches found unchanged (123/125 English, 215/250 other languages); with every reply
#: cut to one sentence, at 10: 66/41 -> 46/41; with the tune half grown by six one-line
#: talks, 108/235 -> 57/235, the same from 2 to 6 units (``python -m bench.drift_sweep
#: bench/data/product-tune.jsonl --check <superdialseg> --confirm-short``). The test half
#: forks a little less (7/35 -> 6/35): see docs/measurements.md, "fifth round".
SHORT_UNCONFIRMED_PENALTY = 2.0


def turn_vectors(turns: Sequence[Turn]) -> np.ndarray:
    """One unit vector per turn: the stored one when given, else embedded (in one batch)."""
    missing = [index for index, turn in enumerate(turns) if turn.vector is None]
    vectors: list[np.ndarray | None] = [
        None if turn.vector is None else np.asarray(turn.vector, dtype=np.float32) for turn in turns
    ]
    if missing:
        fresh = embed([turns[index].text for index in missing])
        for index, vector in zip(missing, fresh, strict=True):
            vectors[index] = vector
    if not vectors:
        return np.zeros((0, 1), dtype=np.float32)
    width = max(len(v) for v in vectors)
    return np.stack([v if len(v) == width else np.zeros(width, np.float32) for v in vectors])


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def window_similarity(vectors: np.ndarray, index: int, width: int = SHORT_WINDOW) -> float:
    """Cosine of the mean meaning of the ``width`` turns before turn ``index`` with that of
    the turn and up to ``width - 1`` turns after it."""
    before = vectors[max(0, index - width) : index]
    after = vectors[index : index + width]
    if not len(before) or not len(after):
        return 1.0
    return float(_unit(before.mean(axis=0)) @ _unit(after.mean(axis=0)))


def exchange_similarity(turns: Sequence[Turn], vectors: np.ndarray, index: int) -> float:
    """How close in meaning turn ``index``'s exchange is to the topic before it.

    The replies carry the subject best (a follow-up question may be three words): the
    mean of the reply's cosine with the topic's last :data:`SEMANTIC_CONTEXT` turns and
    with the previous reply. On product-tune this separates the turns that open a subject
    from the others better than the user's turn against the topic (AUC .98 and .88 in
    English and in other languages, against .97 and .82). A turn without a reply yet
    (or a thread of people, where every turn is a user's) is compared itself.
    """
    end = index + 1
    while end < len(turns) and turns[end].role != "user":
        end += 1
    before = vectors[max(0, index - SEMANTIC_CONTEXT) : index]
    if not len(before):
        return 1.0
    context = _unit(before.mean(axis=0))
    replies = vectors[index + 1 : end]
    if not len(replies):
        return float(context @ _unit(vectors[index : index + 1].mean(axis=0)))
    reply = _unit(replies.mean(axis=0))
    previous = [i for i in range(index - 1, -1, -1) if turns[i].role != "user"][:1]
    if not previous:
        return float(context @ reply)
    recent = float((context @ reply + vectors[previous[0]] @ reply) / 2)
    opening = float(_unit(vectors[: min(2, index)].mean(axis=0)) @ reply)
    return max(recent, opening) if ANCHOR else recent


class SemanticDetector(LexicalDetector):
    """The lexical detector with the meaning of each candidate's exchange weighed in."""

    name = "semantic"

    def __init__(
        self,
        *,
        weight: float = SEMANTIC_WEIGHT,
        centre: float = SEMANTIC_CENTRE,
        user_weight: float = USER_ONLY_WEIGHT,
        user_centre: float = USER_ONLY_CENTRE,
        short_weight: float = SHORT_WEIGHT,
        short_centre: float = SHORT_CENTRE,
        short_window: int = SHORT_WINDOW,
        short_norm: float = SHORT_NORM,
        one_line: bool = True,
        agreement: bool = True,
        opening_centres: tuple[float, float] = (OPENING_CENTRE, OPENING_YOUNG_CENTRE),
        message_terms: int = SHORT_MESSAGE_TERMS,
        unconfirmed_penalty: float | None = UNCONFIRMED_PENALTY,
        short_unconfirmed_penalty: float | None = SHORT_UNCONFIRMED_PENALTY,
        **lexical,
    ) -> None:
        super().__init__(**lexical)
        self.weight, self.centre = weight, centre
        self.short_weight, self.short_centre = short_weight, short_centre
        self.short_window, self.short_norm = short_window, short_norm
        self.one_line = one_line  # False: one-line replies read as any others (before issue 46)
        self.agreement = agreement  # False: one cue may fork a one-line talk (issue 46, round 2)
        self.opening_centres, self.message_terms = opening_centres, message_terms
        self.user_weight, self.user_centre = user_weight, user_centre
        self.unconfirmed_penalty = unconfirmed_penalty  # None: the third round's detector
        self.short_unconfirmed_penalty = short_unconfirmed_penalty  # None: the fourth round's

    def margins(self, turns: Sequence[Turn], candidates: Iterable[int]) -> dict[int, float]:
        candidates = list(candidates)
        margins = super().margins(turns, candidates)
        if not margins or encoder_name() != "use":
            return margins  # the stand-in sees shared words, which the lexical cues weigh
        vectors = turn_vectors(turns)
        kept = substantive_turns(turns)
        if len(kept) < len(turns):
            return self._user_only(turns, vectors, margins)
        # One-line replies say little each (1 - reliability: how far the thread is made
        # of them): every question of such a talk brings new words, so the lexical cues
        # see a new subject everywhere, and one line's meaning is far from the next one's.
        # So each candidate's lexical margin is taken relative to the conversation's
        # usual one (the median over its user turns), its meaning is compared as windows
        # (the turns before it against it and the turns after it) instead of as one
        # exchange. A line that names little ("Any books?") may still read as new by words
        # and by its window alone, so unannounced it forks only where its window is also
        # far from the topic's opening exchange (two cues agree; see _opening_margin).
        one_line = self.one_line and has_real_roles(turns)
        short = 1.0 - reply_reliability(turns) if one_line else 0.0
        usual = self._usual_margin(turns) if short and self.short_norm else 0.0
        for index in margins:
            margin = margins[index]
            if margin <= -ANNOUNCED_MARGIN * 5:  # not a turn that may open a subject
                continue
            similarity = exchange_similarity(turns, vectors, index)
            exchange = margin + self.weight * (self.centre - similarity)
            if not short:
                margins[index] = exchange
                continue
            window = window_similarity(vectors, index, self.short_window)
            line = margin + self.short_weight * (self.short_centre - window)
            line -= self.short_norm * usual
            if self.agreement and not _announced(turns[index].text):
                line = min(line, self._opening_margin(turns, vectors, index))
            elif not self.agreement and index < SHORT_MIN_BEFORE:
                line += UNANSWERED_MARGIN  # before issue 46's third round: young topics wait
            margins[index] = (1 - short) * exchange + short * line
        return self._unconfirmed(turns, margins)

    def _unconfirmed(self, turns: Sequence[Turn], margins: dict[int, float]) -> dict[int, float]:
        """Margins with an unannounced candidate of the last exchange held to more evidence:
        no question after it says yet whether the subject stays away. Where the replies
        carry a subject by :data:`UNCONFIRMED_PENALTY`; in one-line talks, once the
        question has its answer, by :data:`SHORT_UNCONFIRMED_PENALTY` times how far the
        replies are one-liners."""
        if not has_real_roles(turns):
            return margins
        reliability = reply_reliability(turns)
        paragraphs = reliability >= YOUNG_TOPIC_RELIABILITY
        penalty = self.unconfirmed_penalty if paragraphs else self.short_unconfirmed_penalty
        if penalty is None or not (paragraphs or self.one_line):
            return margins
        for index, margin in margins.items():
            text, after = turns[index].text, turns[index + 1 :]
            if any(turn.role == "user" for turn in after) or _announced(text):
                continue
            if paragraphs:
                margins[index] = max(margin - penalty, UNANSWERED_MARGIN)
            elif after:  # answered: a question without its answer is judged as before
                margins[index] = margin - (1 - reliability) * penalty
        return margins

    def _opening_margin(self, turns: Sequence[Turn], vectors: np.ndarray, index: int) -> float:
        """The margin meaning alone gives an unannounced candidate of a one-line talk, as
        far from the topic's opening exchange as it is; no bound (infinity) for a message
        that names a subject of its own in a topic that is not young."""
        text = turns[index].text
        young = index < SHORT_MIN_BEFORE
        if young and (
            opens_as_follow_up(text) or leans_on_topic(text) or opens_with_reference(text)
        ):
            return UNANSWERED_MARGIN  # it asks about the one exchange there is
        if not young and len(set(topic_terms(text))) > self.message_terms:
            return math.inf
        opening = _unit(vectors[:OPENING_TURNS].mean(axis=0))
        after = _unit(vectors[index : index + self.short_window].mean(axis=0))
        centre = self.opening_centres[1 if young else 0]
        return OPENING_WEIGHT * (centre - float(opening @ after))

    def _usual_margin(self, turns: Sequence[Turn]) -> float:
        """The median lexical margin of the thread's user turns that announce nothing."""
        users = [index for index, turn in enumerate(turns) if index and turn.role == "user"]
        every = LexicalDetector.margins(self, turns, users)
        plain = [margin for index, margin in every.items() if not _announced(turns[index].text)]
        return float(np.median(plain)) if len(plain) >= USUAL_NEEDS else 0.0

    def _user_only(
        self, turns: Sequence[Turn], vectors: np.ndarray, margins: dict[int, float]
    ) -> dict[int, float]:
        """Templated replies: a user turn far in meaning from every user turn before it."""
        users = [index for index, turn in enumerate(turns) if turn.role == "user"]
        for index in margins:
            text = turns[index].text
            if turns[index].role != "user" or announces_switch(text) or announces_return(text):
                continue
            before = [i for i in users if i < index][-SEMANTIC_CONTEXT:]
            if len(before) < USER_ONLY_NEEDS:
                continue
            closest = float(np.max(vectors[before] @ vectors[index]))
            margins[index] = self.user_weight * (self.user_centre - closest)
        return margins


def _announced(text: str) -> bool:
    return announces_switch(text) or announces_return(text)


def get_detector(name: str = "semantic") -> DriftDetector:
    """A model-free detector by name: ``semantic`` (this module's), or one of
    memory/drift/detectors.py's (``lexical``, ``baseline``); ValueError otherwise."""
    if name == "semantic":
        return SemanticDetector()
    return get_word_detector(name)
