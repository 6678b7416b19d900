"""The evaluation entry point: guards, the in-place refresh, the ten-message trigger."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from driftless.celery import app
from memory import events
from memory.actions.context import assemble_context
from memory.actions.evaluation import evaluate_session
from memory.actions.scheduling import note_message_stored
from memory.models import Message, Session, Topic
from tests.evaluation_helpers import (
    SUBJECT_A,
    SUBJECT_B,
    MarkerDetector,
    celery_eager,
    converse,
    say,
    summary_answer,
)
from tests.event_shapes import checked_recorder
from tests.memory_builders import add_messages


def evaluate(session, detector=None):
    return evaluate_session(
        session_id=session.pk, reason="test", detector=detector or MarkerDetector()
    )


def test_without_drift_the_topic_is_refreshed_in_place(
    fake_openai, session, monkeypatch, django_capture_on_commit_callbacks, published
):
    sent = []
    monkeypatch.setattr(events, "publish", checked_recorder(published, sent))
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden", keep=True))

    with django_capture_on_commit_callbacks(execute=True):
        outcome = evaluate(session)

    assert outcome.action == "refreshed"
    topic = session.active_topic()
    assert (topic.title, topic.keep_in_memory, topic.evaluated_through_seq) == (
        "Balcony garden",
        True,
        6,
    )
    session.refresh_from_db()
    assert session.drift_result == ""  # no new subject: the stable prefix keeps its bytes
    assert Topic.objects.filter(session=session).count() == 1
    (event,) = sent
    assert (event["type"], event["reason"]) == ("topic.updated", "refresh")
    assert (event["topic"]["title"], event["topic"]["memory_state"]) == (
        "Balcony garden",
        "promoted",
    )


def test_a_refresh_that_finds_no_new_subject_leaves_the_stable_prefix_byte_identical(
    fake_openai, session
):
    converse(session, SUBJECT_A + SUBJECT_B)
    fake_openai.reply_json(summary_answer(title="Balcony garden", keep=True))
    assert evaluate(session).action == "forked"
    forked = stable_prefix(session)
    assert b"forked from: Balcony garden" in forked

    for number, title in enumerate(("Laptop battery", "Laptop sleep and wake-on-LAN")):
        say(session, "user", f"Does the battery still drain, night {number}?")
        say(session, "assistant", "Less: the adapter no longer wakes it.")
        fake_openai.reply_json(summary_answer(title=title, keep=bool(number)))
        outcome = evaluate(session)
        assert outcome.action == "refreshed"
        # the refresh did its work, and the title settled: the same subject keeps its name
        assert session.active_topic().title == "Laptop battery"
        assert stable_prefix(session) == forked  # ...without touching a byte of the prefix


def stable_prefix(session) -> bytes:
    return assemble_context(session=session).messages[0]["content"].encode("utf-8")


def test_a_second_evaluation_with_no_new_message_is_skipped(fake_openai, session):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer())
    assert evaluate(session).action == "refreshed"

    second = evaluate(session)

    assert (second.action, second.detail) == (
        "skipped",
        "no new message since the last evaluation",
    )
    assert len(fake_openai.requests) == 1  # no second model call


def test_a_new_message_makes_the_topic_evaluable_again(fake_openai, session):
    converse(session, SUBJECT_A)
    evaluate(session)
    say(session, "user", "Should I add marigolds against pests?")

    assert evaluate(session).action == "refreshed"
    assert session.active_topic().evaluated_through_seq == 7


def test_an_error_record_is_not_a_new_message(fake_openai, session):
    converse(session, SUBJECT_A)
    evaluate(session)
    say(session, "error", "the provider timed out")

    assert evaluate(session).action == "skipped"


def test_a_new_active_topic_is_evaluated_after_a_fork(fake_openai, session):
    converse(session, SUBJECT_A + SUBJECT_B)
    assert evaluate(session).action == "forked"

    outcome = evaluate(session)  # the forked topic has not been evaluated yet

    assert outcome.action == "refreshed"
    assert outcome.topic_id == session.active_topic().pk


def test_two_evaluations_of_one_session_never_run_at_once(fake_openai, session):
    converse(session, SUBJECT_A)
    inner = []

    class ReentrantDetector(MarkerDetector):
        def detect(self, turns, *, scan_back):
            inner.append(evaluate(session))
            return super().detect(turns, scan_back=scan_back)

    outer = evaluate(session, ReentrantDetector())

    assert outer.action == "refreshed"
    assert (inner[0].action, inner[0].detail) == (
        "skipped",
        "another evaluation of this session is running",
    )
    assert evaluate(session).detail == "no new message since the last evaluation"  # released


def test_an_empty_topic_is_skipped(session):
    assert evaluate(session).detail == "the active topic has no messages"


# --- the ten-message trigger ---------------------------------------------------------------


@pytest.fixture
def enqueued(monkeypatch):
    """Full mode (a worker): capture what would be sent to the broker."""
    sent = []
    monkeypatch.setattr(
        app, "send_task", lambda name, args, countdown, **options: sent.append(args)
    )
    with celery_eager(False):
        yield sent


def store(session, role, content="", **fields):
    """What the message-send handler does: store, then tell the pipeline."""
    message = say(session, role, content, **fields)
    note_message_stored(session=session, message=message)
    return message


def test_the_tenth_message_enqueues_an_evaluation_and_the_ninth_does_not(
    session, enqueued, django_capture_on_commit_callbacks
):
    lines = (SUBJECT_A + SUBJECT_B) * 2
    with django_capture_on_commit_callbacks(execute=True):
        for role, content in lines[:9]:
            store(session, role, content)
    assert enqueued == []

    with django_capture_on_commit_callbacks(execute=True):
        store(session, *lines[9])
    assert enqueued == [[session.pk, "interval", None]]

    with django_capture_on_commit_callbacks(execute=True):
        for role, content in lines[10:20]:
            store(session, role, content)
    assert len(enqueued) == 2


def test_tool_traffic_does_not_count_toward_the_ten_messages(
    session, enqueued, django_capture_on_commit_callbacks
):
    call = {"id": "c1", "type": "function", "function": {"name": "notes", "arguments": "{}"}}
    with django_capture_on_commit_callbacks(execute=True):
        for role, content in (SUBJECT_A + SUBJECT_B)[:9]:
            store(session, role, content)
        store(session, "assistant", "", tool_calls=[call])
        store(session, "tool", "notes: empty", tool_call_id="c1")
        assert enqueued == []
        store(session, "assistant", "Here is the plan.")  # the tenth conversation message
    assert Message.objects.filter(session=session).count() == 12
    assert enqueued == [[session.pk, "interval", None]]


def test_the_enqueue_waits_for_the_commit(session, enqueued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        for role, content in (SUBJECT_A + SUBJECT_B)[:10]:
            store(session, role, content)
    assert enqueued == []
    for callback in callbacks:
        callback()
    assert enqueued == [[session.pk, "interval", None]]


def test_the_heartbeat_fires_every_ten_conversation_messages_at_constant_cost_at_10000(
    session, enqueued, django_capture_on_commit_callbacks
):
    """A session of 10,000 messages: the 10th, 20th and 30th conversation messages after
    it enqueue an evaluation; every store plus its heartbeat check runs the same queries
    as in a new session, whatever else (tool rounds) is stored in between."""
    add_messages(session, 10_000)
    assert session.conversation_count == 10_000
    fresh = Session.objects.start(user=session.user, agent=session.agent)
    call = {"id": "c1", "type": "function", "function": {"name": "notes", "arguments": "{}"}}

    def stored_queries(owner, role, content="", **fields) -> int:
        with django_capture_on_commit_callbacks(execute=True):  # as if each one committed
            with CaptureQueriesContext(connection) as captured:
                store(owner, role, content, **fields)
        return len(captured.captured_queries)

    baseline = stored_queries(fresh, "user", "hello")
    queries, fired_at = [], []
    for number in range(1, 31):
        if number % 7 == 0:  # tool traffic does not count, and costs no more
            queries.append(stored_queries(session, "assistant", "", tool_calls=[call]))
            queries.append(stored_queries(session, "tool", "ok", tool_call_id="c1"))
        before = len(enqueued)
        role = "user" if number % 2 else "assistant"
        queries.append(stored_queries(session, role, f"message {number}"))
        if len(enqueued) > before:
            fired_at.append(number)
            queries[-1] -= 1  # the tenth also records the evaluation as due: one UPDATE

    assert fired_at == [10, 20, 30]
    assert enqueued == [[session.pk, "interval", None]] * 3
    assert set(queries) == {baseline}
    assert baseline <= 5  # the transaction, the counts, the active topic, the insert
    assert session.conversation_count == 10_030
    assert (
        session.conversation_count == Message.objects.filter(session=session).conversation().count()
    )


# The lease (take, give back), the active topic with its session and agent, its history,
# the messages' vectors stored, the notes; under the lock the session, the topic, the
# history's ids and the notes confirmed, the summary and the evaluated mark stored; the
# topics' vectors read and stored. The summary is prepared from what the evaluation read.
REFRESH_STATEMENTS = 14


def test_a_refresh_reads_the_topic_and_its_history_once(session, fake_openai):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden", keep=False))

    with CaptureQueriesContext(connection) as captured:
        outcome = evaluate(session)

    sent = [
        query["sql"]
        for query in captured.captured_queries
        if query["sql"] not in ("BEGIN", "COMMIT")
        and not query["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))
    ]
    assert outcome.action == "refreshed"
    assert len(sent) <= REFRESH_STATEMENTS, "\n".join(sql[:120] for sql in sent)
    assert session.topics.get().title == "Balcony garden"
