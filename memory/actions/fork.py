"""From a drift verdict on the active topic to the silent fork it leads to.

Detectors (the :class:`~memory.drift.detectors.DriftDetector` protocol; the model's in
memory/drift/llm.py) see the active topic's conversation as turns: user messages and
assistant messages with text. Tool calls and their results carry no subject of their own;
they follow the turn they belong to.

An evaluation may fork more than once (memory/actions/evaluation.py): after a fork the new topic is
judged again, so two subjects opened between two evaluations make two forks, each
relocating only messages of the scan-back window.

The silent fork (:func:`do_silent_fork`) is one transaction under the session row lock,
the lock every message append takes first: a reply still being generated is stored after
the fork commits, in the new active topic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.db import transaction

from memory.actions.digest import fallback_title
from memory.actions.summarize import (
    PreparedSummary,
    confirm_summary,
    prepare_summary,
    topic_history,
    with_fresh_summary,
)
from memory.actions.topics import close_topic
from memory.drift.detectors import DriftDetector, DriftVerdict, Turn
from memory.drift.dialogue_cues import announces_switch
from memory.drift.llm import LLMDriftDetector, Subject
from memory.events import publish_on_commit, topic_created
from memory.lib.text import one_line
from memory.llm.gist import subject_message, without_opener
from memory.models import Message, Session, Topic
from memory.stores.vectors import message_vectors

logger = logging.getLogger(__name__)

DRIFT_RESULT_TITLE_LIMIT = 80

CONTINUING = "continuing"
FORKED_FROM = "forked from"


# --- from a verdict to a fork plan --------------------------------------------------------


@dataclass(frozen=True)
class ForkPlan:
    session_id: int
    topic_id: int
    start_seq: int  # the first message of the new subject; it and every later one move
    reason: str


def plan_fork(
    *, topic: Topic, history: Sequence[Message], detector: DriftDetector, scan_back: int
) -> tuple[DriftVerdict, ForkPlan | None]:
    """Run the detector on the topic's history; a plan when it drifted within the window.

    The window is the last ``scan_back`` messages of the topic (all roles), so a fork
    never moves more than ``scan_back`` of the messages the detector saw. A verdict that
    points outside it is logged and ignored, and the cut is moved so that a tool call and
    its results stay together.
    """
    window_start = max(0, len(history) - scan_back)
    rows = [index for index, message in enumerate(history) if message.has_dialogue_text]
    vectors = message_vectors(history[index] for index in rows)  # stored once, read after
    turns = [
        Turn(role=history[i].role, text=history[i].content, vector=vector)
        for i, vector in zip(rows, vectors, strict=True)
    ]
    in_window = sum(1 for index in rows if index >= window_start)
    if len(turns) < 2 or in_window == 0:
        return DriftVerdict(False, None, "too few turns to judge"), None
    if isinstance(detector, LLMDriftDetector):
        subject = Subject(title=topic.title, summary=topic.summary)
        verdict = detector.detect(turns, scan_back=in_window, subject=subject)
    else:
        verdict = detector.detect(turns, scan_back=in_window)
    if not verdict.drifted:
        return verdict, None
    start = verdict.start
    if type(start) is not int or not max(1, len(turns) - in_window) <= start < len(turns):
        logger.warning("%s detector answered a start outside the window: %r", detector.name, start)
        return replace(verdict, drifted=False, start=None), None
    cut = tool_safe_cut(history, rows[start], lowest=max(1, window_start))
    if cut is None:
        return replace(verdict, drifted=False, start=None), None
    plan = ForkPlan(
        session_id=topic.session_id,
        topic_id=topic.pk,
        start_seq=history[cut].seq,
        reason=verdict.reason,
    )
    return verdict, plan


def subject_of(text: str) -> str:
    """A message without what announces the switch: "Completely different thing: I need a
    laptop" is "I need a laptop", in every language the drift cues know."""
    text = without_opener(text.strip())
    head, mark, rest = text.partition(":")
    if not mark:
        head, mark, rest = text.partition(",")
    if mark and rest.strip() and len(head) <= 40 and announces_switch(head + mark):
        text = rest.strip()
    return text[:1].upper() + text[1:]


def tool_safe_cut(history: Sequence[Message], cut: int, *, lowest: int) -> int | None:
    """The nearest index to ``cut`` (preferring earlier, never below ``lowest``) where the
    history can be split without separating a tool call from its results; None if none.

    A tool result is tied to the assistant message that made its call (by call id; an
    unmatched result to the nearest earlier tool-calling assistant message).
    """
    call_owner: dict[str, int] = {}
    last_caller: int | None = None
    spans: list[tuple[int, int]] = []
    for index, message in enumerate(history):
        if message.role == Message.Role.ASSISTANT and message.tool_calls:
            last_caller = index
            for call in message.tool_calls:
                if isinstance(call, dict) and call.get("id"):
                    call_owner[call["id"]] = index
        elif message.role == Message.Role.TOOL:
            owner = call_owner.get(message.tool_call_id, last_caller)
            if owner is not None:
                spans.append((owner, index))

    def splits(at: int) -> bool:
        return any(first < at <= last for first, last in spans)

    for at in range(cut, lowest - 1, -1):
        if not splits(at):
            return at
    for at in range(cut + 1, len(history)):
        if not splits(at):
            return at
    return None


# --- the silent fork ----------------------------------------------------------------------


@dataclass(frozen=True)
class ForkResult:
    prior: Topic
    topic: Topic
    relocated_message_ids: list[int]


def do_silent_fork(*, plan: ForkPlan, prepared: PreparedSummary | None = None) -> ForkResult | None:
    """Fork the session's active topic at ``plan.start_seq``; None when the plan is stale.

    The prior topic's summary is made first, with no lock held (``prepared``, when given,
    serves the first attempt); then :func:`_fork_locked` applies the fork under the lock
    without calling the model, and when the prior topic changed meanwhile (its notes, say)
    the summary is made again and the fork retried (``with_fresh_summary``).
    """
    given = prepared

    def prepare() -> PreparedSummary | None:
        nonlocal given
        if given is not None:
            ready, given = given, None
            return ready
        prior = Topic.objects.filter(pk=plan.topic_id, is_active=True).first()
        if prior is None or not topic_history(prior, before_seq=plan.start_seq):
            return None
        return prepare_summary(topic=prior, before_seq=plan.start_seq)

    return with_fresh_summary(
        prepare,
        lambda prepared, accept_stale: _fork_locked(
            plan=plan, prepared=prepared, accept_stale=accept_stale
        ),
    )


def _fork_locked(
    *, plan: ForkPlan, prepared: PreparedSummary | None, accept_stale: bool
) -> ForkResult | None:
    """The fork itself, one transaction under the session row lock.

    Create the new topic, relocate the new subject's messages (the topic changes, the
    sequence numbers do not), apply the prior topic's prepared summary (made from the
    messages that stay and its notes; StaleSummary rolls all of it back when they
    changed), archive those notes, then make the new topic active.

    Idempotent: a replayed plan finds its topic no longer active and does nothing.
    """
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=plan.session_id)
        prior = (
            Topic.objects.select_for_update(of=("self",))
            .select_related("session")
            .filter(pk=plan.topic_id, session_id=plan.session_id, is_active=True)
            .first()
        )
        if prior is None:
            return None
        moving = list(
            prior.messages.filter(seq__gte=plan.start_seq)
            .order_by("seq")
            .values_list("pk", "role", "content")
        )
        if not moving or not prior.messages.filter(seq__lt=plan.start_seq).exists():
            return None
        first_user = subject_message(
            [c for _, role, c in moving if role == Message.Role.USER and c.strip()]
        )
        topic = Topic.objects.create(
            session=session,
            origin=Topic.Origin.DRIFT,
            forked_from=prior,
            is_active=False,
            title=fallback_title(subject_of(first_user)) if first_user.strip() else "",
        )
        relocated = [pk for pk, _, _ in moving]
        Message.objects.filter(pk__in=relocated).update(topic=topic)

        close_topic(
            prior,
            summary=confirm_summary(prepared, topic=prior, accept_stale=accept_stale),
            evaluated_through=plan.start_seq - 1,
        )
        topic.is_active = True
        topic.save(update_fields=["is_active"])
        record_drift_result(session_id=session.pk, text=drift_result_text(FORKED_FROM, prior))
        publish_on_commit(
            session.pk, topic_created(topic=topic, previous=prior, relocated_message_ids=relocated)
        )
    logger.info("session %s forked topic %s into %s", session.pk, prior.pk, topic.pk)
    return ForkResult(prior=prior, topic=topic, relocated_message_ids=relocated)


# --- the drift result shown in the context stack ------------------------------------------


def drift_result_text(kind: str, topic: Topic) -> str:
    """``continuing: <title>`` or ``forked from: <title>``, short."""
    return f"{kind}: {one_line(topic.title or f'topic {topic.pk}', DRIFT_RESULT_TITLE_LIMIT)}"


def record_drift_result(*, session_id: int, text: str) -> None:
    """Store the drift result only when it changes: it sits in the stable prefix, and an
    identical rewrite must not look like a change to anything watching it."""
    Session.objects.filter(pk=session_id).exclude(drift_result=text).update(drift_result=text)
