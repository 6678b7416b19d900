"""A new topic by the user: the prior one is summarized first, its notes archived after."""

from memory.actions.topics import do_new_topic
from memory.models import Notes, Topic
from tests.evaluation_helpers import SUBJECT_A, converse, say, summary_answer


def test_the_prior_topic_is_summarized_before_the_new_one_becomes_active(
    fake_openai, session, published, django_capture_on_commit_callbacks
):
    prior = session.active_topic()
    converse(session, SUBJECT_A)
    notes = Notes.objects.create(topic=prior, content="South-facing balcony.")
    session.drift_result = "continuing: Balcony garden"
    session.save()
    fake_openai.reply_json(summary_answer(title="Balcony garden", keep=True))

    with django_capture_on_commit_callbacks(execute=True):
        topic = do_new_topic(session=session)

    prior.refresh_from_db()
    notes.refresh_from_db()
    assert (prior.title, prior.keep_in_memory, prior.is_active) == ("Balcony garden", True, False)
    assert prior.evaluated_through_seq == 6 and prior.closed_at is not None
    assert "South-facing balcony." in fake_openai.requests[0]["messages"][1]["content"]
    assert notes.archived and prior.summarized_at <= notes.archived_at
    assert (topic.origin, topic.is_active) == ("user", True)
    assert list(Topic.objects.filter(session=session, is_active=True)) == [topic]
    session.refresh_from_db()
    assert session.drift_result == ""
    updated, created = published.events
    assert (updated["type"], updated["reason"], updated["topic"]["id"]) == (
        "topic.updated",
        "summary",
        prior.pk,
    )
    assert updated["topic"]["memory_state"] == "promoted"
    assert (created["type"], created["topic"]["id"], created["previous"]["id"]) == (
        "topic.created",
        topic.pk,
        prior.pk,
    )
    assert created["relocated_message_ids"] == []


def test_new_messages_go_to_the_new_topic(fake_openai, session):
    converse(session, SUBJECT_A)
    topic = do_new_topic(session=session)

    assert say(session, "user", "Now about my laptop.").topic_id == topic.pk


def test_a_message_that_arrives_during_the_summary_call_is_summarized_too(
    fake_openai, session, monkeypatch
):
    """The summary is made before the lock; if the topic grew meanwhile, the lock is
    released and it is made again."""
    from memory.actions import topics

    converse(session, SUBJECT_A)
    real_prepare = topics.prepare_summary

    def prepare_then_a_message_arrives(**kwargs):
        prepared = real_prepare(**kwargs)
        if len(fake_openai.requests) == 1:
            say(session, "user", "One more thing: marigolds?")
        return prepared

    monkeypatch.setattr(topics, "prepare_summary", prepare_then_a_message_arrives)
    fake_openai.reply_json(summary_answer(title="Stale"))
    fake_openai.reply_json(summary_answer(title="Balcony garden with marigolds"))

    do_new_topic(session=session)

    prior = session.topics.get(origin="first")
    assert prior.title == "Balcony garden with marigolds"
    assert "marigolds?" in fake_openai.requests[1]["messages"][1]["content"]
    assert prior.evaluated_through_seq == 7


def test_an_empty_topic_is_closed_without_a_model_call(fake_openai, session):
    prior = session.active_topic()

    topic = do_new_topic(session=session)

    prior.refresh_from_db()
    assert fake_openai.requests == []
    assert (prior.is_active, prior.summary) == (False, "")
    assert topic.is_active
