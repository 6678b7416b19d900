"""Versions of a reply (Regenerate) and of a question (Edit), issue 47: the replaced one is
kept as an earlier version on the new message, served with it, never sent to the model."""

from __future__ import annotations

from memory.actions.turn import MAX_VERSIONS, do_edit_turn, do_regenerate_turn, do_send_message
from memory.events import message_payload


def test_a_regenerated_reply_keeps_the_one_it_replaced_out_of_the_context(session, fake_openai):
    fake_openai.reply_text("The **first** answer.")
    first = do_send_message(session=session, content="Plan my garden").reply
    fake_openai.reply_text("The second answer.")

    second = do_regenerate_turn(session=session).reply

    assert [v["content"] for v in second.versions] == ["The **first** answer."]
    payload = message_payload(second)
    assert (
        payload["versions"][0]["content_html"].strip()
        == "<p>The <strong>first</strong> answer.</p>"
    )
    assert payload["versions"][0]["created_at"] == first.created_at.isoformat()
    # The model was asked without the replaced reply: only the latest version is context.
    asked = fake_openai.requests[-1]["messages"]
    assert not any("first" in str(message.get("content")) for message in asked)
    # A third version keeps both earlier ones, oldest first.
    fake_openai.reply_text("The third answer.")
    third = do_regenerate_turn(session=session).reply
    assert [v["content"] for v in third.versions] == [
        "The **first** answer.",
        "The second answer.",
    ]
    assert session.messages.filter(role="assistant").count() == 1


def test_an_edited_question_keeps_the_one_it_replaced(session, fake_openai):
    fake_openai.reply_text("Tomatoes.")
    question = do_send_message(session=session, content="Plan my balcony").user_message
    fake_openai.reply_text("Basil.")

    edited = do_edit_turn(session=session, message_id=question.pk, content="Plan my herbs")

    assert [v["content"] for v in edited.user_message.versions] == ["Plan my balcony"]
    assert message_payload(edited.user_message)["versions"][0]["content_html"] == ""
    asked = fake_openai.requests[-1]["messages"]
    assert not any("balcony" in str(message.get("content")) for message in asked)


def test_versions_are_bounded(session, fake_openai):
    fake_openai.reply_text("Answer 0")
    do_send_message(session=session, content="Count")
    for number in range(1, MAX_VERSIONS + 3):
        fake_openai.reply_text(f"Answer {number}")
        reply = do_regenerate_turn(session=session).reply
    assert len(reply.versions) == MAX_VERSIONS
    assert reply.versions[-1]["content"] == f"Answer {MAX_VERSIONS + 1}"
