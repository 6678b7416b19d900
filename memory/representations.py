"""One representation per resource: what a message, topic, session, facts document and
notes document look like on the wire, wherever they go.

The REST API renders its responses with these serializers (and the OpenAPI schema is
generated from them); the websocket events of memory/events.py carry the same dicts
(:func:`message_representation`, :func:`topic_representation`), so a program reads one
shape per resource over both interfaces. References to other rows are ``<name>_id``.
``docs/websocket-events.schema.json`` describes the events built from them, and a test
holds the three together (tests/test_event_shapes.py).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from memory.models import MemoryState, Message, Session, Topic


@extend_schema_serializer(component_name="Message")
class MessageRepresentation(serializers.ModelSerializer):
    session_id = serializers.IntegerField(read_only=True)
    topic_id = serializers.IntegerField(read_only=True)
    tool_calls = serializers.ListField(
        child=serializers.DictField(), read_only=True, help_text="OpenAI-style tool calls."
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "session_id",
            "topic_id",
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "tool_name",
            "model_name",
            "prompt_tokens",
            "cached_tokens",
            "completion_tokens",
            "created_at",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="Topic")
class TopicRepresentation(serializers.ModelSerializer):
    session_id = serializers.IntegerField(read_only=True)
    memory_state = serializers.ChoiceField(
        choices=MemoryState.choices,
        read_only=True,
        help_text="none (gray), promoted (teal) or deprecated (red).",
    )

    class Meta:
        model = Topic
        fields = [
            "id",
            "session_id",
            "title",
            "summary",
            "memory_state",
            "keep_in_memory_manually_set",
            "deprecated_manually_set",
            "summary_manually_set",
            "is_active",
            "origin",
            "created_at",
            "closed_at",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="Session")
class SessionRepresentation(serializers.ModelSerializer):
    agent_id = serializers.IntegerField(read_only=True)
    agent_name = serializers.CharField(source="agent.name", read_only=True)
    organization_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = Session
        fields = [
            "id",
            "agent_id",
            "agent_name",
            "organization_id",
            "title",
            "message_count",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="Facts")
class FactsRepresentation(serializers.Serializer):
    """The durable facts of a (user, agent, organization) scope: key to JSON value."""

    facts = serializers.DictField(child=serializers.JSONField(), read_only=True)


@extend_schema_serializer(component_name="Notes")
class NotesRepresentation(serializers.Serializer):
    """A topic's notes: the active document, or a closed topic's archived one."""

    topic_id = serializers.IntegerField(read_only=True)
    content = serializers.CharField(read_only=True)
    archived = serializers.BooleanField(
        read_only=True, help_text="True for a closed topic's archived notes."
    )


def message_representation(message: Message) -> dict[str, Any]:
    return _plain(MessageRepresentation(message).data)


def topic_representation(topic: Topic) -> dict[str, Any]:
    return _plain(TopicRepresentation(topic).data)


def session_representation(session: Session) -> dict[str, Any]:
    return _plain(SessionRepresentation(session).data)


def facts_representation(facts: dict[str, Any]) -> dict[str, Any]:
    return _plain(FactsRepresentation({"facts": facts}).data)


def notes_representation(*, topic_id: int, content: str, archived: bool) -> dict[str, Any]:
    return _plain(
        NotesRepresentation({"topic_id": topic_id, "content": content, "archived": archived}).data
    )


def _plain(data) -> dict[str, Any]:
    """A plain dict (DRF returns its own dict type), fit for the channel layer."""
    return dict(data)
