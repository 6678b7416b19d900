"""A reply's record of memory (memory/actions/memory_trace.py): what its request carried
(persistent-memory entries, facts, notes, recalled passages: kinds and ids) and what its
turn changed, stored on the reply and served by the one message representation: REST, the
socket's events, the export. A stranger gets 404; nothing of another scope is named.

Model behaviour comes from the scripted fake provider (tests/fake_openai.py).
"""

from __future__ import annotations

import json

import pytest

from memory.actions import turn as turn_module
from memory.actions.turn import do_send_message
from memory.models import Agent, FactActor, Message, Session
from memory.stores.facts import set_fact
from tests.conftest import logged_in, make_user
from tests.event_shapes import checked_recorder
from tests.memory_builders import add_topic

SEND = "/agents-api/sessions/{session}/messages"
TOPIC_MESSAGES = "/agents-api/topics/{topic}/messages"


@pytest.fixture
def remembered(alice, agent, session):
    """A promoted topic of an earlier session of alice's, and a fact of hers."""
    earlier = Session.objects.start(user=alice, agent=agent)
    kyoto = add_topic(earlier, title="Kyoto trip", summary="Kyoto in April.", keep=True, messages=2)
    set_fact(user=alice, agent=agent, key="passport", value="expires in May", actor=FactActor.USER)
    return kyoto


def carried_of(reply: dict) -> list[dict]:
    return reply["memory_trace"]["carried"]


def test_a_reply_says_which_memory_entries_and_facts_its_request_carried(
    as_alice, fake_openai, session, remembered
):
    fake_openai.reply_text("Kyoto it is.")

    response = as_alice.post(
        SEND.format(session=session.pk),
        json.dumps({"content": "Trip?"}),
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    reply = response.json()["reply"]
    entry = {
        "kind": "memory",
        "topic_id": remembered.pk,
        "session_id": remembered.session_id,
        "title": "Kyoto trip",
    }
    assert entry in carried_of(reply)
    assert {"kind": "fact", "key": "passport"} in carried_of(reply)
    assert reply["memory_trace"]["changed"] == []
    # Stored with the reply: the thread's page says the same after a reload.
    page = as_alice.get(TOPIC_MESSAGES.format(topic=reply["topic_id"])).json()
    assert page[-1]["id"] == reply["id"] and page[-1]["memory_trace"] == reply["memory_trace"]
    # The request really held them: the model was given the entry and the fact.
    system = fake_openai.requests[-1]["messages"][0]["content"]
    assert "Kyoto trip" in system and "passport" in system


def test_what_the_turn_stored_is_on_the_reply_once_with_what_undo_needs(
    session, fake_openai, alice, agent
):
    fake_openai.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "passport", "value": "expires in May"})]
    )
    fake_openai.reply_text("Noted.")

    result = do_send_message(session=session, content="My passport expires in May.")

    (change,) = result.reply.memory_trace["changed"]
    assert change == {
        "kind": "fact",
        "action": "set",
        "key": "passport",
        "sentence": "Remembered: passport = expires in May",
    }
    assert "command" not in result.reply.memory_trace
    # Only the reply carries it: the tool call and its result do not.
    assert all(message.memory_trace == {} for message in result.activity)


def test_a_memory_command_is_marked_so_the_page_shows_its_sentence_once(session):
    result = do_send_message(session=session, content="/remember passport = expires in May")

    trace = result.reply.memory_trace
    assert trace["command"] is True
    assert [change["sentence"] for change in trace["changed"]] == [
        "Remembered: passport = expires in May"
    ]


def test_a_failed_read_or_a_refused_write_is_no_change(session, fake_openai):
    fake_openai.reply_tool_calls(
        [
            ("important_info", {"operation": "read"}),
            ("important_info", {"operation": "$unset", "key": "nothing here"}),
        ]
    )
    fake_openai.reply_text("Nothing to forget.")

    result = do_send_message(session=session, content="Forget it.")

    assert result.reply.memory_trace["changed"] == []


def test_a_stranger_gets_404_for_a_replys_representation(
    as_alice, as_bob, fake_openai, session, remembered
):
    fake_openai.reply_text("Kyoto it is.")
    reply = as_alice.post(
        SEND.format(session=session.pk),
        json.dumps({"content": "Trip?"}),
        content_type="application/json",
    ).json()["reply"]

    assert as_bob.get(TOPIC_MESSAGES.format(topic=reply["topic_id"])).status_code == 404
    charlie = logged_in(make_user("charlie-trace"))
    assert charlie.get(TOPIC_MESSAGES.format(topic=reply["topic_id"])).status_code == 404


def test_nothing_of_another_scope_is_named(alice, bob, agent, organization, session, fake_openai):
    """Bob's promoted topic and fact, and alice's under another agent, are not carried."""
    bobs = add_topic(
        Session.objects.start(user=bob, agent=agent), title="Bob's secret", keep=True, messages=2
    )
    set_fact(user=bob, agent=agent, key="bob pin", value="1234", actor=FactActor.USER)
    other_agent = Agent.objects.create(organization=organization, name="Other")
    elsewhere = add_topic(
        Session.objects.start(user=alice, agent=other_agent), title="Other", keep=True, messages=2
    )
    fake_openai.reply_text("Hello.")

    result = do_send_message(session=session, content="Hello, any secret?")

    named = {item.get("topic_id") for item in result.reply.memory_trace["carried"]}
    assert bobs.pk not in named and elsewhere.pk not in named
    assert {"kind": "fact", "key": "bob pin"} not in result.reply.memory_trace["carried"]


def test_recalled_passages_and_notes_are_carried_with_where_they_live(
    alice, agent, session, fake_openai
):
    earlier = Session.objects.start(user=alice, agent=agent)
    topic = add_topic(earlier, title="Ramen", messages=0)
    said = Message.objects.create(
        session=earlier, topic=topic, seq=1, role="user", content="Best ramen is in Sapporo."
    )
    fake_openai.reply_tool_calls([("notes", {"operation": "$set", "content": "ramen hunt"})])
    fake_openai.reply_text("Noted.")
    do_send_message(session=session, content="Where is the best ramen?")
    fake_openai.reply_text("Sapporo.")

    result = do_send_message(session=session, content="Remind me: which ramen city?")

    carried = result.reply.memory_trace["carried"]
    recalled = [item for item in carried if item["kind"] == "recalled"]
    assert any(
        item["message_id"] == said.pk and item["topic_id"] == topic.pk for item in recalled
    ), carried
    assert {"kind": "notes", "topic_id": result.reply.topic_id, "session_id": session.pk} in carried


def test_an_export_holds_the_record(as_alice, agent, session, fake_openai, remembered):
    fake_openai.reply_text("Kyoto it is.")
    reply = do_send_message(session=session, content="Trip?").reply

    response = as_alice.get("/agents-api/memory/export", {"agent": agent.pk, "sessions": "true"})

    document = json.loads(b"".join(response.streaming_content))
    exported = [
        message
        for exported_session in document["sessions"]
        for topic in exported_session["topics"]
        for message in topic.get("messages", [])
        if message["role"] == "assistant" and message["content"] == "Kyoto it is."
    ]
    assert [message["memory_trace"] for message in exported] == [reply.memory_trace]


def test_stream_batches_carry_the_reply_so_far_rendered_by_the_server(
    session, fake_openai, monkeypatch, published
):
    seen: list[dict] = []
    monkeypatch.setattr(turn_module, "publish", checked_recorder(published, seen))
    fake_openai.reply_text("This is **bold** and <script>x</script> done")

    do_send_message(session=session, content="Say it")

    deltas = [event for event in seen if event["type"] == "reply.delta"]
    assert deltas and all("html" in event for event in deltas)
    assert "<strong>bold</strong>" in deltas[-1]["html"]
    assert "<script>" not in "".join(event["html"] for event in deltas)
    assert "".join(event["delta"] for event in deltas) == (
        "This is **bold** and <script>x</script> done"
    )
