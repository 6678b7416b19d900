"""The model's say on whether the subject changed: the ``llm`` and ``auto`` drift detectors.

One JSON call reads the window with the topic's title and summary so far and says whether
and where a new subject begins, validated as strictly as a summary: ``drifted`` must be a
boolean and ``start`` a turn inside the window; an unusable answer never forks.

``llm`` lets the model decide alone (an option for a model known to be good at it).
``auto``, the default, never lets it: the model-free detector (memory/drift/semantic.py)
judges first and forks where it is sure; the model is asked only when it is not, and
its fork counts only at a turn the model-free detector found at least borderline
(:data:`MODEL_FLOOR`). On the local 1.5B model the model alone found 2 of 5 switches
with 4 false forks per dialogue. ``auto`` skips the call when the window holds no user
turn. With the offline model both run the model-free detector.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memory.drift.detectors import DriftDetector, DriftVerdict, Turn
from memory.drift.semantic import get_detector
from memory.lib.text import one_line
from memory.lib.tokens import estimate_tokens, oldest_to_drop
from memory.llm import ChatModel, LLMError, context_input_tokens, get_chat_model

logger = logging.getLogger(__name__)

DRIFT_PROMPT = """You watch a conversation for a change of subject. Its turns are numbered.
The conversation so far is about: {subject}
Decide whether a new subject, clearly different from what came before (not a follow-up,
detail or side question of the same subject), begins at one of the turns numbered {first}
to {last}. If several new subjects begin there, answer the first one.
Return a JSON object with:
- 'drifted' (boolean: true only if a new subject begins in that range)
- 'start' (the number of the turn where the new subject begins; null if 'drifted' is false)"""

# The answer's shape, for endpoints that constrain output to a schema.
DRIFT_SCHEMA = {
    "type": "object",
    "properties": {"drifted": {"type": "boolean"}, "start": {"type": ["integer", "null"]}},
    "required": ["drifted", "start"],
    "additionalProperties": False,
}

#: The model-free margin (logit units) a turn needs for ``auto`` to take the model's word
#: that a subject opens there: well below a fork (0), far above a plain follow-up (< -5).
MODEL_FLOOR = -3.0

LLM_CONTEXT_TURNS = 10  # turns shown before the window, so the model knows the old subject
LLM_TURN_CHARS = 600  # a long turn is cut to this many characters in the drift prompt
# The verdict is about ten tokens, after a reasoning block on a model that reasons first;
# a model that keeps talking is cut off, not waited for.
VERDICT_MAX_TOKENS = 512


@dataclass(frozen=True)
class Subject:
    """What the topic is about so far: its title and summary (either may be empty)."""

    title: str = ""
    summary: str = ""

    def describe(self) -> str:
        parts = [p for p in (" ".join(self.title.split()), " ".join(self.summary.split())) if p]
        return " — ".join(parts) if parts else "(no title or summary yet; see the turns)"


class LLMDriftDetector:
    """The model decides: one JSON call over the window (with the topic's title and
    summary so far) says whether and where a new subject begins.

    An unusable answer (a failed call, invalid JSON, a start outside the window) never
    forks. ``prefilter`` (the ``auto`` mode) skips the call when the window holds no user
    turn, the only kind of turn that can open a subject; it never hides a user's turn.
    """

    name = "llm"

    def __init__(self, model: ChatModel, *, prefilter: bool = False) -> None:
        self.model = model
        self.prefilter = prefilter
        self.co_judge = get_detector("semantic") if prefilter else None
        if prefilter:
            self.name = "auto"

    def detect(
        self, turns: Sequence[Turn], *, scan_back: int, subject: Subject | None = None
    ) -> DriftVerdict:
        first, last = max(1, len(turns) - scan_back), len(turns) - 1
        if first > last:
            return DriftVerdict(False, None, "too few turns to judge")
        if self.prefilter and not any(t.role == "user" for t in turns[first:]):
            return DriftVerdict(False, None, "no user turn to judge")
        if self.co_judge is not None:
            own = self.co_judge.detect(turns, scan_back=scan_back)
            if own.drifted:
                return own
        verdict = self.judge(turns, first=first, last=last, subject=subject or Subject())
        if verdict is None:
            return DriftVerdict(False, None, "model answer unusable; no fork")
        if verdict.drifted and self.co_judge is not None:
            margin = self.co_judge.margins(turns, [verdict.start]).get(verdict.start, -math.inf)
            if margin < MODEL_FLOOR:
                return DriftVerdict(False, None, "model's fork not borne out by the text")
        return verdict

    def judge(
        self, turns: Sequence[Turn], *, first: int, last: int, subject: Subject
    ) -> DriftVerdict | None:
        """The model's verdict, or None when it failed or answered out of bounds."""
        shown = range(max(0, first - LLM_CONTEXT_TURNS), len(turns))
        lines = [
            f"[{index}] {turns[index].role}: {one_line(turns[index].text, LLM_TURN_CHARS)}"
            for index in shown
        ]
        prompt = DRIFT_PROMPT.format(subject=subject.describe(), first=first, last=last)
        # Within the model's context: the oldest turns shown before the window go first.
        room = context_input_tokens() - estimate_tokens(prompt) - 16
        drop = oldest_to_drop([estimate_tokens(line) + 1 for line in lines], room)
        conversation = "\n".join(lines[min(drop, first - shown.start) :])
        messages = [
            {"role": "system", "content": prompt},
            {"role": "user", "content": conversation},
        ]
        try:
            answer = self.model.complete_json(
                messages=messages,
                schema=DRIFT_SCHEMA,
                schema_name="drift_verdict",
                max_tokens=VERDICT_MAX_TOKENS,
            )
        except LLMError as err:
            logger.info("drift model call failed: %s", err)
            return None
        verdict = parse_drift_answer(answer, first=first, last=last)
        if verdict is None:
            logger.info("drift model answer unusable: %r", answer)
        return verdict


def parse_drift_answer(answer: object, *, first: int, last: int) -> DriftVerdict | None:
    """A verdict from ``{"drifted": bool, "start": int}``; None when not strictly valid."""
    if not isinstance(answer, dict):
        return None
    drifted = answer.get("drifted")
    if drifted is False:
        return DriftVerdict(False, None, "model: same subject")
    if drifted is not True:
        return None
    start = answer.get("start")
    if type(start) is not int or not first <= start <= last:
        return None
    return DriftVerdict(True, start, f"model: new subject at turn {start}")


def get_drift_detector(*, session: Any = None) -> DriftDetector:
    """The detector ``settings.DRIFT_DETECTOR`` names ("auto", "llm", "lexical", "baseline").

    "llm" lets the model decide, "auto" asks it only where the model-free detector is
    unsure (and skips the call for a window without a user turn); with the offline model
    both fall back to the model-free detector ("semantic"). The model is the summary model
    of ``session`` (a memory.models.Session: its agent's, or the user's pick; memory/llm
    get_chat_model), the deployment's without one.
    """
    choice = settings.DRIFT_DETECTOR
    if choice not in ("auto", "llm"):
        return get_detector(choice)
    model = get_chat_model("summary", session=session)
    if model.offline:
        return get_detector("semantic")
    return LLMDriftDetector(model, prefilter=choice == "auto")
