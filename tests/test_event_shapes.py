"""One shape per event and per resource: the types of memory/events.py, the JSON Schema
generated from them, docs/websocket.md, the REST representations and what the server
publishes agree.

Every event published during the suite is checked by the autouse fixture ``published``
(tests/conftest.py); these tests hold the generated schema to the types, the documentation
and the REST schema to the schema, and show the fixture catches a difference.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from chat.protocol import FRAME_TYPES
from memory.events import MessagePayload, TopicPayload, publish
from memory.management.commands.event_schema import SCHEMA_PATH, rendered_schema
from tests.event_shapes import event_problems, event_types, schema

DOC = Path(__file__).resolve().parents[1] / "docs" / "websocket.md"
CLIENT_FRAMES = set(FRAME_TYPES)  # chat/protocol.py: the frames a client sends


def doc_examples() -> list[dict]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S)]


def test_every_example_in_the_doc_has_its_documented_shape():
    server_examples = [e for e in doc_examples() if e["type"] not in CLIENT_FRAMES]
    assert {example["type"] for example in server_examples} == event_types()
    for example in server_examples:
        assert event_problems(example) == [], example


def test_every_event_type_has_its_section_in_the_doc():
    sections = set(re.findall(r"^### `([a-z.]+)`$", DOC.read_text(), re.M))
    assert sections == event_types()


def test_the_committed_schema_is_generated_from_the_event_types():
    """make schema writes it; a change to an event's type without it fails here."""
    assert SCHEMA_PATH.read_text() == rendered_schema()


@pytest.mark.parametrize(
    ("payload", "component"), [(MessagePayload, "Message"), (TopicPayload, "Topic")]
)
def test_events_carry_the_rest_representation_key_for_key(payload, component):
    openapi = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    rest = openapi[component]
    documented = schema()["$defs"][payload.__name__]
    assert list(documented["properties"]) == list(rest["properties"])
    assert sorted(documented["required"]) == sorted(rest["required"])


def test_rest_messages_and_events_use_the_same_objects(
    alice, session, fake_openai, published, django_capture_on_commit_callbacks
):
    """The turn's REST answer and the events published for it hold the same message
    objects, key for key; so do a topic from REST and from its event."""
    fake_openai.reply_text("Green it is.")
    client = APIClient()
    client.force_authenticate(alice)
    with django_capture_on_commit_callbacks(execute=True):
        turn = client.post(
            f"/agents-api/sessions/{session.pk}/messages", {"content": "Tea?"}, format="json"
        )
        new_topic = client.post(f"/agents-api/sessions/{session.pk}/topics/")
    assert turn.status_code == 201 and new_topic.status_code == 201
    created = [e["message"] for e in published.events if e["type"] == "message.created"]
    assert created == [turn.json()["user_message"], turn.json()["reply"]]
    (topic_created,) = [e for e in published.events if e["type"] == "topic.created"]
    assert topic_created["topic"] == new_topic.json()
    listed = client.get(f"/agents-api/sessions/{session.pk}/topics/").json()
    assert topic_created["topic"] in listed


@pytest.mark.django_db(transaction=True)
def test_the_checker_fails_a_test_that_publishes_an_undocumented_shape(session, published):
    publish(session.pk, {"type": "message.created", "message": {"id": 1, "topic": 3}})
    publish(session.pk, {"type": "session.renamed", "title": "x"})
    found, published.problems[:] = list(published.problems), []
    assert any(problem.startswith("message.created") for problem in found)
    assert any("undocumented event type 'session.renamed'" in problem for problem in found)
