"""Regenerate and edit-and-resend (issue 24): ``turn.regenerate`` / ``message.edit`` on the
socket, ``POST .../regenerate`` / ``POST .../edit`` over REST. The last reply (or the last
message and its answer) is taken out of the thread and the turn runs again; nothing else
changes."""

from __future__ import annotations

import pytest

from memory.actions.turn import (
    NothingToEdit,
    NothingToRegenerate,
    do_edit_turn,
    do_regenerate_turn,
    do_send_message,
)
from memory.lib.errors import InvalidInput
from memory.models import Message


def thread(session) -> list[tuple[str, str]]:
    return list(session.messages.order_by("seq").values_list("role", "content"))


@pytest.mark.django_db(transaction=True)
def test_regenerate_replaces_the_last_reply_and_says_so_first(session, fake_openai, published):
    fake_openai.reply_text("The first answer.")
    fake_openai.reply_text("A better answer.")
    first = do_send_message(session=session, content="What should I cook?")
    published.events.clear()

    again = do_regenerate_turn(session=session)

    assert thread(session) == [("user", "What should I cook?"), ("assistant", "A better answer.")]
    assert again.user_message.pk == first.user_message.pk  # answered again, not stored twice
    assert not Message.objects.filter(pk=first.reply.pk).exists()
    types = [event["type"] for event in published.events]
    assert types[0] == "message.deleted" and types.index("turn.started") == 1
    assert published.events[0]["message_ids"] == [first.reply.pk]
    assert published.events[0]["topic_id"] == first.reply.topic_id
    assert types[-1] == "turn.done" and published.events[-1]["ok"] is True
    # The model was asked the same question again: the old reply is not in its prompt.
    prompt = fake_openai.requests[-1]["messages"]
    assert prompt[-1] == {"role": "user", "content": "What should I cook?"}
    assert all("The first answer." not in str(m.get("content")) for m in prompt)


@pytest.mark.django_db(transaction=True)
def test_there_is_nothing_to_regenerate_before_a_reply_or_after_a_failure(session, fake_openai):
    with pytest.raises(NothingToRegenerate):
        do_regenerate_turn(session=session)
    fake_openai.fail(503, "overloaded")
    do_send_message(session=session, content="Hello?")
    with pytest.raises(NothingToRegenerate):
        do_regenerate_turn(session=session)  # Retry is the way after a failure
    assert [role for role, _ in thread(session)] == ["user", "error"]


@pytest.mark.django_db(transaction=True)
def test_rest_regenerate_answers_the_new_turn_and_refuses_strangers(session, client, bob):
    client.force_login(session.user)
    url = f"/agents-api/sessions/{session.pk}/regenerate"
    refused = client.post(url)
    assert refused.status_code == 409 and refused.json()["code"] == "nothing_to_regenerate"
    do_send_message(session=session, content="Hi")  # the offline model answers
    old = session.messages.get(role=Message.Role.ASSISTANT)

    answer = client.post(url)

    assert answer.status_code == 201
    body = answer.json()
    assert body["user_message"]["content"] == "Hi" and body["reply"]["id"] != old.pk
    assert session.messages.filter(role=Message.Role.ASSISTANT).count() == 1
    client.force_login(bob)
    assert client.post(url).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_edit_and_resend_replaces_the_last_message_and_its_answer(session, fake_openai, published):
    fake_openai.reply_text("Lisbon is lovely in May.")
    fake_openai.reply_text("Porto is lovely in May too.")
    first = do_send_message(session=session, content="Plan Lisbon in May")
    published.events.clear()

    again = do_edit_turn(
        session=session, message_id=first.user_message.pk, content="Plan Porto in May 🍷"
    )

    assert thread(session) == [
        ("user", "Plan Porto in May 🍷"),
        ("assistant", "Porto is lovely in May too."),
    ]
    assert again.user_message.pk != first.user_message.pk
    deleted = published.events[0]
    assert deleted["type"] == "message.deleted"
    assert deleted["message_ids"] == [first.user_message.pk, first.reply.pk]
    prompt = fake_openai.requests[-1]["messages"]
    assert prompt[-1] == {"role": "user", "content": "Plan Porto in May 🍷"}
    assert all("Lisbon" not in str(m.get("content")) for m in prompt)


@pytest.mark.django_db(transaction=True)
def test_only_the_last_message_can_be_edited_and_bad_text_changes_nothing(session):
    first = do_send_message(session=session, content="One")
    do_send_message(session=session, content="Two")
    before = thread(session)
    with pytest.raises(NothingToEdit):
        do_edit_turn(session=session, message_id=first.user_message.pk, content="Uno")
    last = session.messages.filter(role=Message.Role.USER).order_by("-seq").first()
    with pytest.raises(InvalidInput):
        do_edit_turn(session=session, message_id=last.pk, content="   ")
    assert thread(session) == before


@pytest.mark.django_db(transaction=True)
def test_rest_edit_answers_the_new_turn_and_refuses_strangers(session, client, bob):
    turn = do_send_message(session=session, content="Hi")
    client.force_login(session.user)
    url = f"/agents-api/sessions/{session.pk}/edit"
    answer = client.post(
        url, {"message_id": turn.user_message.pk, "content": "Hello"}, "application/json"
    )
    assert answer.status_code == 201 and answer.json()["user_message"]["content"] == "Hello"
    stale = client.post(
        url, {"message_id": turn.user_message.pk, "content": "Hey"}, "application/json"
    )
    assert stale.status_code == 409 and stale.json()["code"] == "nothing_to_edit"
    client.force_login(bob)
    assert (
        client.post(url, {"message_id": 1, "content": "x"}, "application/json").status_code == 404
    )
