"""The silent fork: relocation inside the window, summary before archive, idempotency."""

import pytest

from memory.actions.evaluation import evaluate_session
from memory.actions.fork import do_silent_fork, plan_fork
from memory.actions.summarize import topic_history
from memory.drift.detectors import DriftVerdict
from memory.models import Message, Notes, Topic
from tests.evaluation_helpers import (
    SUBJECT_A,
    SUBJECT_B,
    FixedDetector,
    MarkerDetector,
    converse,
    say,
    summary_answer,
    thread_of,
)


def fork(session, detector=None):
    return evaluate_session(
        session_id=session.pk, reason="test", detector=detector or MarkerDetector()
    )


def test_a_fork_relocates_the_new_subject_and_keeps_every_message_in_order(fake_openai, session):
    prior = session.active_topic()
    converse(session, SUBJECT_A + SUBJECT_B)
    before = thread_of(session)
    fake_openai.reply_json(summary_answer(title="Balcony garden"))

    outcome = fork(session)

    assert outcome.action == "forked"
    after = thread_of(session)
    assert len(after) == len(before) == 10
    assert [(seq, pk) for seq, pk, _ in after] == [(seq, pk) for seq, pk, _ in before]
    new = Topic.objects.get(pk=outcome.new_topic_id)
    assert [topic for _, _, topic in after] == [prior.pk] * 6 + [new.pk] * 4
    assert (new.origin, new.forked_from_id, new.is_active) == ("drift", prior.pk, True)
    assert new.title == "NEW-SUBJECT: my laptop battery drains overnight while…"
    prior.refresh_from_db()
    assert (prior.is_active, prior.title) == (False, "Balcony garden")
    assert prior.closed_at is not None
    assert list(Topic.objects.filter(session=session, is_active=True)) == [new]
    session.refresh_from_db()
    assert session.drift_result == "forked from: Balcony garden"


def test_a_fork_never_relocates_beyond_the_scan_back_window(fake_openai, session, settings):
    settings.DRIFT_SCAN_BACK = 4
    converse(session, SUBJECT_A * 2)  # 12 messages
    earliest_allowed = FixedDetector(DriftVerdict(True, 8, "as far back as allowed"))

    outcome = fork(session, earliest_allowed)

    new = Topic.objects.get(pk=outcome.new_topic_id)
    assert list(new.messages.order_by("seq").values_list("seq", flat=True)) == [9, 10, 11, 12]


@pytest.mark.parametrize(
    ("scan_back", "moved"),
    [
        pytest.param(6, [7, 8, 9, 10, 11, 12], id="back-to-the-call"),
        pytest.param(5, [10, 11, 12], id="forward-past-the-result"),
    ],
)
def test_a_tool_call_and_its_result_never_end_up_in_different_topics(
    fake_openai, session, settings, scan_back, moved
):
    settings.DRIFT_SCAN_BACK = scan_back
    converse(session, SUBJECT_A)
    call = {"id": "c1", "type": "function", "function": {"name": "notes", "arguments": "{}"}}
    say(session, "assistant", "", tool_calls=[call])  # seq 7
    say(session, "user", "NEW-SUBJECT typed in a second tab")  # seq 8
    say(session, "tool", "notes: empty", tool_call_id="c1", tool_name="notes")  # seq 9
    converse(session, SUBJECT_B[1:])  # seq 10-12

    outcome = fork(session)

    # The marker (seq 8) would split call 7 from result 9: the cut moves back to the call
    # when the window (counted in messages, tool results included) reaches it, else
    # forward past the result.
    new = Topic.objects.get(pk=outcome.new_topic_id)
    assert list(new.messages.order_by("seq").values_list("seq", flat=True)) == moved
    call_topic, result_topic = (
        Message.objects.get(session=session, seq=seq).topic_id for seq in (7, 9)
    )
    assert call_topic == result_topic


def test_notes_are_archived_only_after_the_summary_was_made_from_them(
    fake_openai, session, published
):
    prior = session.active_topic()
    converse(session, SUBJECT_A + SUBJECT_B)
    notes = Notes.objects.create(topic=prior, content="Pots: 30 cm deep, south side.")
    fake_openai.reply_json(summary_answer(title="Balcony garden"))

    fork(session)

    (request,) = fake_openai.requests
    sent = request["messages"][1]["content"]
    assert "Pots: 30 cm deep, south side." in sent
    assert "NEW-SUBJECT" not in sent  # the prior topic is summarized from what stays
    notes.refresh_from_db()
    prior.refresh_from_db()
    assert notes.archived and prior.summary
    assert prior.summarized_at <= notes.archived_at


def test_a_fork_replayed_forks_once(fake_openai, session):
    converse(session, SUBJECT_A + SUBJECT_B)
    topic = session.active_topic()
    plan = plan_fork(
        topic=topic, history=topic_history(topic), detector=MarkerDetector(), scan_back=10
    )[1]

    first = do_silent_fork(plan=plan)
    again = do_silent_fork(plan=plan)

    assert first is not None and again is None
    assert Topic.objects.filter(session=session).count() == 2
    assert Topic.objects.filter(session=session, is_active=True).get() == first.topic


def test_a_retried_evaluation_forks_once(fake_openai, session):
    converse(session, SUBJECT_A + SUBJECT_B)

    outcomes = [fork(session).action for _ in range(3)]

    assert outcomes.count("forked") == 1
    assert Topic.objects.filter(session=session).count() == 2
    assert Topic.objects.filter(session=session, is_active=True).count() == 1


def test_a_reply_stored_after_detection_lands_in_the_new_topic(fake_openai, session):
    converse(session, SUBJECT_A + SUBJECT_B)
    topic = session.active_topic()
    plan = plan_fork(
        topic=topic, history=topic_history(topic), detector=MarkerDetector(), scan_back=10
    )[1]
    late_user = say(session, "user", "And should I update the BIOS?")

    result = do_silent_fork(plan=plan)
    reply = say(session, "assistant", "Only if the vendor lists a sleep fix.")

    late_user.refresh_from_db()
    assert late_user.topic_id == reply.topic_id == result.topic.pk
    assert late_user.pk in result.relocated_message_ids


def test_a_fork_publishes_the_summary_and_the_new_topic_after_commit(
    fake_openai, session, published, django_capture_on_commit_callbacks
):
    converse(session, SUBJECT_A + SUBJECT_B)
    relocated = list(session.messages.filter(seq__gte=7).values_list("pk", flat=True))
    fake_openai.reply_json(summary_answer(title="Balcony garden"))

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome = fork(session)
        assert published.events == []
    for callback in callbacks:
        callback()

    updated, created = published.events
    assert (updated["type"], updated["reason"]) == ("topic.updated", "summary")
    assert updated["topic"]["id"] == outcome.topic_id
    assert updated["topic"]["title"] == "Balcony garden"
    assert updated["topic"]["is_active"] is False
    assert created["type"] == "topic.created"
    assert created["topic"]["id"] == outcome.new_topic_id and created["topic"]["is_active"]
    assert created["previous"]["id"] == outcome.topic_id
    assert sorted(created["relocated_message_ids"]) == sorted(relocated)


def test_offline_evaluation_runs_end_to_end_with_the_model_free_detector(session):
    """No model: the lexical detector decides, the offline model gives the gist, invariants hold
    (where it cuts is the detector's business, measured by bench/drift_quality.py)."""
    converse(session, SUBJECT_A + SUBJECT_B)
    before = thread_of(session)

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action in ("forked", "refreshed")
    after = thread_of(session)
    assert [(seq, pk) for seq, pk, _ in after] == [(seq, pk) for seq, pk, _ in before]
    assert Topic.objects.filter(session=session, is_active=True).count() == 1
    prior = Topic.objects.get(pk=outcome.topic_id)
    # The offline model's gist (memory/llm/gist.py): the user's salient sentence, whole.
    assert prior.title == "I want to plan a vegetable garden on my balcony this spring"
    assert prior.keep_in_memory is False
