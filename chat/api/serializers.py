"""What the REST endpoints read and answer (and the OpenAPI schema built from them).

A message and a topic are answered in their one representation, the payload types the
websocket events carry (memory/events.py; chat/api/schema.py documents them). Sessions,
facts and notes, which only the REST API and the pages show, are the serializers below.
Input fields are checked by the domain's ``check_*`` functions, raw: no silent coercion
(chat/api/input.py).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from chat.api.input import CheckedTextField, StrictPrimaryKeyRelatedField
from chat.api.schema import payload_serializer
from memory.events import MessagePayload, TopicPayload
from memory.lib.limits import MAX_MESSAGE_CHARS, MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from memory.lib.validation import (
    check_message_content,
    check_summary,
    check_title,
    check_topic_title,
)
from memory.models import Agent, FactActor, Organization, Session

MessageSerializer = payload_serializer(MessagePayload)
TopicSerializer = payload_serializer(TopicPayload)


@extend_schema_serializer(component_name="Session")
class SessionSerializer(serializers.ModelSerializer):
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


@extend_schema_serializer(component_name="TopicRef")
class TopicRefSerializer(serializers.Serializer):
    """A topic as the panels link to it (one of the caller's own)."""

    topic_id = serializers.IntegerField(read_only=True)
    session_id = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="null: the topic was deleted since."
    )
    title = serializers.CharField(read_only=True)


@extend_schema_serializer(component_name="FactProvenance")
class FactProvenanceSerializer(serializers.Serializer):
    """Who last set a fact, when, and from which topic."""

    actor = serializers.ChoiceField(
        choices=FactActor.choices,
        read_only=True,
        help_text="user (REST, the facts panel, /remember, an operator in admin), agent (its "
        "important_info tool), import, or consolidator.",
    )
    set_at = serializers.DateTimeField(read_only=True)
    topic_id = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="The topic of the turn that set it, if any."
    )
    topic = TopicRefSerializer(
        read_only=True, allow_null=True, help_text="That topic as a link; null once deleted."
    )


@extend_schema_serializer(component_name="Facts")
class FactsSerializer(serializers.Serializer):
    """The durable facts of a (user, agent, organization) scope: key to JSON value, and
    beside them who last set each one."""

    facts = serializers.DictField(child=serializers.JSONField(), read_only=True)
    provenance = serializers.DictField(
        child=FactProvenanceSerializer(allow_null=True),
        read_only=True,
        help_text="Per key of facts: who set it, when, from which topic; null for a fact "
        "stored before provenance was kept.",
    )


@extend_schema_serializer(component_name="FactChange")
class FactChangeSerializer(serializers.Serializer):
    """One change of a fact, as its history keeps it."""

    action = serializers.ChoiceField(choices=["set", "unset"], read_only=True)
    actor = serializers.ChoiceField(choices=FactActor.choices, read_only=True)
    at = serializers.DateTimeField(read_only=True)
    topic_id = serializers.IntegerField(read_only=True, allow_null=True)
    old_value = serializers.JSONField(
        read_only=True, allow_null=True, help_text="null: the key was new."
    )
    new_value = serializers.JSONField(
        read_only=True, allow_null=True, help_text="null: the fact was removed."
    )


@extend_schema_serializer(component_name="FactDetail")
class FactDetailSerializer(serializers.Serializer):
    """One fact with its provenance and its history (the newest changes first)."""

    key = serializers.CharField(read_only=True)
    found = serializers.BooleanField(
        read_only=True, help_text="false: the fact was removed (its history remains)."
    )
    value = serializers.JSONField(read_only=True, allow_null=True)
    provenance = FactProvenanceSerializer(read_only=True, allow_null=True)
    history = FactChangeSerializer(many=True, read_only=True)


@extend_schema_serializer(component_name="Notes")
class NotesSerializer(serializers.Serializer):
    """A topic's notes: the active document, or a closed topic's archived one."""

    topic_id = serializers.IntegerField(read_only=True)
    content = serializers.CharField(read_only=True)
    content_html = serializers.CharField(
        read_only=True, help_text="The notes' Markdown as sanitized HTML (what the page shows)."
    )
    archived = serializers.BooleanField(
        read_only=True, help_text="True for a closed topic's archived notes."
    )


class OrganizationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Organization
        fields = ["id", "name", "slug"]


class AgentSerializer(serializers.ModelSerializer):
    organization = OrganizationSerializer(read_only=True)

    class Meta:
        model = Agent
        fields = ["id", "name", "organization", "skills"]


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


class SessionUsageSerializer(UsageSerializer):
    cache_hit_ratio = serializers.FloatField(
        allow_null=True, help_text="Cached / prompt tokens over the session; null before any."
    )


@extend_schema_serializer(component_name="SessionDetail")
class SessionDetailSerializer(SessionSerializer):
    active_topic_id = serializers.SerializerMethodField()
    usage = SessionUsageSerializer(read_only=True)

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "active_topic_id", "usage"]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_active_topic_id(self, session: Session) -> int | None:
        return next((topic.pk for topic in session.topics.all() if topic.is_active), None)


# How many messages the chat page shows at first and each "load earlier" adds.
MESSAGE_PAGE_SIZE = 200
MAX_MESSAGE_PAGE_SIZE = 500


class MessagePageSerializer(serializers.Serializer):
    """Query parameters of a topic's messages: a cursor on ``seq``, newest page first."""

    before = serializers.IntegerField(
        min_value=1, required=False, help_text="Only messages with a smaller seq."
    )
    limit = serializers.IntegerField(
        min_value=1,
        max_value=MAX_MESSAGE_PAGE_SIZE,
        default=MESSAGE_PAGE_SIZE,
        help_text="At most this many messages, the latest ones.",
    )


def _new_session_title(title: object) -> str:
    return check_title(title).strip()


class RenameSessionSerializer(serializers.Serializer):
    title = CheckedTextField(
        _new_session_title,
        schema={"type": "string", "maxLength": MAX_TITLE_CHARS},
        help_text="The new title; empty to show the active topic's title again.",
    )


class StartSessionSerializer(serializers.Serializer):
    agent = StrictPrimaryKeyRelatedField(
        queryset=Agent.objects.none(), help_text="An agent of one of your organizations."
    )
    title = CheckedTextField(
        check_title,
        required=False,
        default="",
        schema={"type": "string", "maxLength": MAX_TITLE_CHARS},
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        # Agents outside the caller's organizations do not exist, as far as they can tell.
        if user is not None:
            self.fields["agent"].queryset = Agent.objects.usable_by(user)


class TopicEditSerializer(serializers.Serializer):
    """A user's correction: either field, or both (memory/actions/curation.py checks the text).
    Text only: a number is refused, not read as its digits."""

    title = CheckedTextField(
        check_topic_title,
        required=False,
        schema={"type": "string", "minLength": 1, "maxLength": MAX_TITLE_CHARS},
    )
    summary = CheckedTextField(
        check_summary, required=False, schema={"type": "string", "maxLength": MAX_SUMMARY_CHARS}
    )

    def validate(self, data):
        if not data:
            raise serializers.ValidationError("send a title, a summary, or both")
        return data


class SendMessageSerializer(serializers.Serializer):
    content = CheckedTextField(
        check_message_content,
        schema={"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS},
        help_text="1 to 16,000 characters, not only whitespace (docs/limits.md).",
    )


class EditMessageSerializer(SendMessageSerializer):
    message_id = serializers.IntegerField(
        min_value=1, help_text="Your last message in the active topic: the one replaced."
    )


class TurnSerializer(serializers.Serializer):
    """A whole turn: the stored user message, the tool activity and the reply."""

    turn_id = serializers.CharField()
    user_message = MessageSerializer()
    activity = MessageSerializer(
        many=True, help_text="Tool-call messages of the assistant and the tools' results."
    )
    reply = MessageSerializer()
    usage = UsageSerializer(help_text="Tokens of every model call of this turn, summed.")


class TurnFailedSerializer(serializers.Serializer):
    """The turn failed after the user's message was stored; it can be retried."""

    turn_id = serializers.CharField()
    error = serializers.CharField()
    retryable = serializers.BooleanField()
    user_message = MessageSerializer()
    activity = MessageSerializer(many=True)
    error_message = MessageSerializer(allow_null=True, help_text="The stored error record.")


class StopSerializer(serializers.Serializer):
    """A Stop was asked for: the running turn stores what had streamed, marked stopped."""

    running = serializers.BooleanField(help_text="A turn was running to be stopped.")


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()
