"""Resuming an earlier topic (issue 47): one POST makes it the active topic again, the
active one is closed as a new topic would close it, the next message goes to it; a
stranger gets 404."""

from __future__ import annotations

from memory.actions.turn import do_send_message
from memory.models import Topic
from tests.memory_builders import add_topic

RESUME = "/agents-api/topics/{topic}/resume"


def test_resume_makes_an_earlier_topic_active_and_the_next_message_goes_there(
    as_alice, session, fake_openai
):
    kyoto = add_topic(session, title="Kyoto", summary="Kyoto in April.", messages=2)
    fake_openai.reply_text("Sure.")
    do_send_message(session=session, content="Which ThinkPad?")
    current = Topic.objects.get(session=session, is_active=True)

    response = as_alice.post(RESUME.format(topic=kyoto.pk))

    assert response.status_code == 200, response.content
    assert response.json()["id"] == kyoto.pk and response.json()["is_active"] is True
    current.refresh_from_db()
    assert not current.is_active and current.closed_at is not None
    assert Topic.objects.filter(session=session, is_active=True).get().pk == kyoto.pk
    fake_openai.reply_text("Kyoto again.")
    result = do_send_message(session=session, content="One more Kyoto question")
    assert result.user_message.topic_id == kyoto.pk
    # Resuming the active topic changes nothing.
    assert as_alice.post(RESUME.format(topic=kyoto.pk)).json()["is_active"] is True


def test_a_stranger_cannot_resume_a_topic(as_bob, session):
    kyoto = add_topic(session, title="Kyoto", messages=2)
    assert as_bob.post(RESUME.format(topic=kyoto.pk)).status_code == 404
    kyoto.refresh_from_db()
    assert not kyoto.is_active


def test_the_resumed_topic_is_published_to_the_session(
    as_alice, session, published, django_capture_on_commit_callbacks
):
    kyoto = add_topic(session, title="Kyoto", messages=2)
    with django_capture_on_commit_callbacks(execute=True):
        as_alice.post(RESUME.format(topic=kyoto.pk))
    updates = [
        (event["topic"]["id"], event["topic"]["is_active"])
        for event in published.events
        if event["type"] == "topic.updated" and event["reason"] == "resumed"
    ]
    assert (kyoto.pk, True) in updates
