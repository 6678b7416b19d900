"""Tool calls said in a sentence for people (memory/lib/tool_words.py), on real tool results."""

import pytest

from memory.lib.tool_words import describe_tool_result
from memory.models import Topic
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
