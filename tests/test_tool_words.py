"""Tool calls said in a sentence for people (memory/lib/tool_words.py), on real tool results."""

import json

import pytest

from memory.lib.tool_words import describe_tool_result
from memory.models import Message, Topic
from tests.memory_builders import add_topic
from tests.test_tools import run


def said(session, name, arguments):
    return describe_tool_result(name, arguments, run(session, name, arguments))


@pytest.mark.django_db
def test_facts_said_in_sentences(session):
    remember = {"operation": "$set", "key": "favourite colour", "value": "teal"}
    assert said(session, "important_info", remember) == "Remembered: favourite colour = teal"
    read = {"operation": "read", "key": "favourite colour"}
    assert said(session, "important_info", read) == "favourite colour = teal"
    assert said(session, "important_info", {"operation": "read"}) == (
        "Read 1 fact: favourite colour = teal"
    )
    forget = {"operation": "$unset", "key": "favourite colour"}
    assert said(session, "important_info", forget) == "Forgot: favourite colour"
    assert said(session, "important_info", forget) == "Nothing stored under 'favourite colour'"
    assert said(session, "important_info", {"operation": "read"}) == "No facts stored yet."


@pytest.mark.django_db
def test_notes_and_topic_memory_said_in_sentences(session):
    note = {"operation": "$set", "content": "we chose PostgreSQL"}
    assert said(session, "notes", note) == "Noted: we chose PostgreSQL"
    assert said(session, "notes", {"operation": "read"}) == "Read the notes of this topic."
    earlier = add_topic(session, title="Bases de données", summary="PostgreSQL.")
    assert said(session, "notes", {"operation": "read", "topic_id": earlier.pk}) == (
        "Looked up the earlier topic “Bases de données”."
    )
    Topic.objects.filter(pk=session.active_topic().pk).update(title="Databases")
    assert said(session, "manage_topic_memory", {"action": "demote"}) == (
        "No change: “Databases” is not in memory."
    )


def test_errors_and_other_tools_and_garbage_stay_sentences():
    assert describe_tool_result("notes", "{}", '{"error": "content is required"}') == (
        "notes failed: content is required"
    )
    assert describe_tool_result("search", "{}", '{"result": "x"}') == "search answered."
    assert describe_tool_result("notes", "not json", "not json either") == "notes answered."


@pytest.mark.django_db
def test_a_tool_result_is_sent_with_its_sentence_wherever_it_goes(session, alice):
    """The server says what a call did (``tool_sentence``): the page never re-derives it.
    The same sentence in the event, on a page of the thread, and alone (its call is on
    an earlier page)."""
    from rest_framework.test import APIClient

    from memory.events import message_created, message_payload
    from memory.stores.messages import store_message

    remember = {"operation": "$set", "key": "tea", "value": "green"}
    store_message(
        session=session,
        role=Message.Role.ASSISTANT,
        tool_calls=[
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "important_info", "arguments": json.dumps(remember)},
            }
        ],
    )
    result = store_message(
        session=session,
        role=Message.Role.TOOL,
        tool_call_id="c1",
        tool_name="important_info",
        content=json.dumps({"ok": True, "key": "tea", "value": "green"}),
    )
    sentence = "Remembered: tea = green"
    assert message_created(result)["message"]["tool_sentence"] == sentence
    assert message_payload(result)["tool_sentence"] == sentence
    client = APIClient()
    client.force_authenticate(alice)
    page = client.get(f"/agents-api/topics/{session.active_topic().pk}/messages").json()
    assert [m["tool_sentence"] for m in page] == ["", sentence]
    alone = client.get(
        f"/agents-api/topics/{result.topic_id}/messages?before={result.seq + 1}&limit=1"
    )
    assert alone.json()[0]["tool_sentence"] == sentence
