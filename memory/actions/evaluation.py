"""The evaluation pipeline: one entry point and its guards.

:func:`evaluate_session` runs drift detection on the session's active topic, then either
a silent fork (memory/actions/fork.py) or an in-place refresh of title, summary and
keep-in-memory. It is guarded three ways:

* a per-session lease in the database (memory/stores/leases.py), across servers and workers:
  a second evaluation of a busy session is skipped, not queued (it stays due, below);
* the server's ``hasEvaluated``: a topic already evaluated through its last message is
  skipped until a new message arrives or the active topic changes (a new topic starts
  unevaluated);
* the fork itself re-checks, under the session row lock, that its topic is still the
  active one, so a retried or duplicated task never forks twice.

When it runs is memory/actions/scheduling.py's business: the triggers, the debounce, the
durable request (``Session.evaluation_due_at``, cleared here when an evaluation finishes)
and the sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.actions.consolidation import consolidate_if_due
from memory.actions.fork import do_silent_fork, plan_fork
from memory.actions.summarize import (
    PreparedSummary,
    apply_summary,
    confirm_summary,
    prepare_summary,
    publish_topic_updated,
    topic_history,
    with_fresh_summary,
)
from memory.drift.detectors import DriftDetector
from memory.drift.llm import get_drift_detector
from memory.models import Message, Session, Topic
from memory.stores import leases
from memory.stores.vectors import topic_vectors

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationOutcome:
    action: Literal["skipped", "forked", "refreshed"]
    detail: str
    topic_id: int | None = None  # the topic that was evaluated
    new_topic_id: int | None = None  # the topic a fork created


# --- the entry point ----------------------------------------------------------------------

BUSY = "another evaluation of this session is running"


def run_evaluation(
    *, session_id: int, reason: str, debounce_token: str | None = None
) -> EvaluationOutcome:
    """What the task runs: the debounce check, then :func:`evaluate_session`; a finished
    evaluation (not one refused as busy) clears the request it answered."""
    started = timezone.now()
    due = Session.objects.filter(pk=session_id).values_list("evaluation_due_at", flat=True)
    due = due.first()
    # An exit trigger's task runs only while its due time is still the session's: a later
    # trigger moved it, or an evaluation since answered it (None).
    if debounce_token is not None and (due is None or due > _parse_token(debounce_token)):
        return EvaluationOutcome("skipped", "superseded by a later trigger")
    outcome = evaluate_session(session_id=session_id, reason=reason)
    if due is not None and due <= started and outcome.detail != BUSY:
        Session.objects.filter(pk=session_id, evaluation_due_at=due).update(evaluation_due_at=None)
    if outcome.action != "skipped":  # the session is let go of: no lock held
        consolidate_if_due(session_id=session_id)
    return outcome


def _parse_token(token: str) -> datetime:
    try:
        return datetime.fromisoformat(token)
    except ValueError:  # a task queued before the tokens were due times: let it run
        return datetime.max.replace(tzinfo=UTC)


def evaluate_session(
    *, session_id: int, reason: str, detector: DriftDetector | None = None
) -> EvaluationOutcome:
    """Evaluate the session's active topic: a silent fork on drift, else a refresh.

    ``detector`` defaults to the one settings choose (memory/drift/llm.py).
    A second evaluation of a busy session is skipped (the session's lease is taken); the
    request stays due, so the sweep runs it later.
    """
    try:
        with leases.lease(f"evaluation:{session_id}"):
            outcome = _evaluate(session_id=session_id, detector=detector)
    except leases.LeaseBusy:
        outcome = EvaluationOutcome("skipped", BUSY)
    logger.info("evaluation of session %s (%s): %s", session_id, reason, outcome)
    return outcome


def _evaluate(*, session_id: int, detector: DriftDetector | None) -> EvaluationOutcome:
    # With its session and agent: the detector's and the summary's model are theirs.
    active = Topic.objects.filter(session_id=session_id, is_active=True)
    topic = active.select_related("session__agent").first()
    if topic is None:
        return EvaluationOutcome("skipped", "no such session")
    history = topic_history(topic)
    if not history:
        return EvaluationOutcome("skipped", "the active topic has no messages", topic.pk)
    if topic.evaluated_through_seq >= history[-1].seq:
        return EvaluationOutcome("skipped", "no new message since the last evaluation", topic.pk)

    # The session's own model judges its drift (its agent's, or the user's pick).
    detector = detector or get_drift_detector(session=topic.session)
    forks = fork_while_drifting(topic=topic, history=history, detector=detector)
    if forks is None:
        return EvaluationOutcome("skipped", "the active topic changed meanwhile", topic.pk)
    active, reasons = forks
    if active.pk != topic.pk:  # forked: the new subject is judged, its summary waits
        _store_topic_vectors(session_id)
        return EvaluationOutcome("forked", "; ".join(reasons), topic.pk, active.pk)
    _refresh(topic=topic, history=history)
    _store_topic_vectors(session_id)
    return EvaluationOutcome("refreshed", reasons[-1], topic.pk)


def _store_topic_vectors(session_id: int) -> None:
    """Store the vectors of the session's topics whose title or summary changed (recall
    reads them, memory/stores/recall/vectors.py); the messages' were stored by the
    drift check."""
    topic_vectors(
        Topic.objects.filter(session_id=session_id).only(
            "pk", "title", "summary", "embedding", "embedding_key"
        )
    )


def fork_while_drifting(
    *, topic: Topic, history: list[Message], detector: DriftDetector
) -> tuple[Topic, list[str]] | None:
    """Fork the active topic at every new subject the detector finds in its window.

    After a fork the new topic (the relocated messages, all inside the first window) is
    judged again, so a stretch between two evaluations that holds two new subjects forks
    twice; each fork relocates at most ``DRIFT_SCAN_BACK`` messages. Returns the topic
    that ends active and the detector's reasons, or None when a fork found its topic no
    longer active before any fork (another evaluation or the user got there first).
    """
    scan_back = settings.DRIFT_SCAN_BACK
    unjudged = sum(1 for m in history if m.seq > topic.evaluated_through_seq)
    if unjudged > scan_back:
        logger.warning(
            "topic %s: %d unjudged messages, only the last %d can be relocated",
            topic.pk,
            unjudged,
            scan_back,
        )
    reasons: list[str] = []
    for _ in range(scan_back):  # every fork consumes messages of the window
        verdict, plan = plan_fork(
            topic=topic, history=history, detector=detector, scan_back=scan_back
        )
        reasons.append(verdict.reason)
        if plan is None:
            break
        fork = do_silent_fork(plan=plan)  # the summary call happens before its lock
        if fork is None:
            return None if len(reasons) == 1 else (topic, reasons)
        topic, history = fork.topic, topic_history(fork.topic)
    return topic, reasons


def _refresh(*, topic: Topic, history: list[Message]) -> None:
    """No drift: regenerate title, summary and flag in place, and mark the topic evaluated
    through the last message the detector saw (a later one gets evaluated next time).
    The first summary is prepared from the topic and ``history`` the evaluation read (the
    commit confirms them under the lock: grown since is fine, changed otherwise prepares
    again, from a fresh read).

    The session's drift result is left as it is: it sits in the stable prefix, and a
    refresh that found no new subject must not invalidate the provider's cache of
    everything after it. Only a fork (memory/actions/fork.py) or a new topic changes it."""
    topic_id, session_id, through_seq = topic.pk, topic.session_id, history[-1].seq
    first: list[tuple[Topic, list[Message]]] = [(topic, history)]

    def prepare() -> PreparedSummary:
        if first:
            read, messages = first.pop()
            return prepare_summary(topic=read, messages=messages)
        return prepare_summary(
            topic=Topic.objects.select_related("session__agent").get(pk=topic_id)
        )

    def commit(prepared: PreparedSummary | None, accept_stale: bool) -> Topic:
        with transaction.atomic():
            # One lock order with a new topic and a fork (memory/actions/topics.py, fork.py):
            # the session row, then the topic's. The other order deadlocked with a new
            # topic asked for right after the tenth message.
            Session.objects.select_for_update().filter(pk=session_id).get()
            topic = (
                Topic.objects.select_for_update(of=("self",))
                .select_related("session")
                .get(pk=topic_id)
            )
            summary = confirm_summary(
                prepared, topic=topic, accept_stale=accept_stale, accept_growth=True
            )
            changed = apply_summary(topic=topic, summary=summary)
            topic.evaluated_through_seq = max(topic.evaluated_through_seq, through_seq)
            topic.save(update_fields=["evaluated_through_seq"])
            if changed:
                publish_topic_updated(topic, reason="refresh")
        return topic

    # The model call happens before the topic row is locked (memory/actions/summarize.py).
    with_fresh_summary(prepare, commit)
