"""Representations shared by the REST endpoints (and the OpenAPI schema built from them)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.protocol import FrameRefused, check_message_content
from memory.models import Agent, MemoryState, Message, Organization, Session, Topic


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


class SessionSerializer(serializers.ModelSerializer):
    agent_name = serializers.CharField(source="agent.name", read_only=True)

    class Meta:
        model = Session
        fields = [
            "id",
            "agent",
            "agent_name",
            "organization",
            "title",
            "message_count",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class SessionDetailSerializer(SessionSerializer):
    active_topic = serializers.SerializerMethodField()
    usage = SessionUsageSerializer(read_only=True)

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "active_topic", "usage"]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_active_topic(self, session: Session) -> int | None:
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


class _TextOnly(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class RenameSessionSerializer(serializers.Serializer):
    title = _TextOnly(
        max_length=200,
        allow_blank=True,
        help_text="The new title; empty to show the active topic's title again.",
    )


class StartSessionSerializer(serializers.Serializer):
    agent = serializers.PrimaryKeyRelatedField(
        queryset=Agent.objects.none(), help_text="An agent of one of your organizations."
    )
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        # Agents outside the caller's organizations do not exist, as far as they can tell.
        if user is not None:
            self.fields["agent"].queryset = Agent.objects.usable_by(user)


class TopicSerializer(serializers.ModelSerializer):
    memory_state = serializers.ChoiceField(choices=MemoryState.choices, read_only=True)

    class Meta:
        model = Topic
        fields = [
            "id",
            "session",
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


class TopicEditSerializer(serializers.Serializer):
    """A user's correction: either field, or both (memory/curation.py checks the text)."""

    title = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)
    summary = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)

    def validate(self, data):
        if not data:
            raise serializers.ValidationError("send a title, a summary, or both")
        return data


class MessageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "session",
            "topic",
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


class SendMessageSerializer(serializers.Serializer):
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)

    def validate_content(self, content: str) -> str:
        try:
            return check_message_content(content)
        except FrameRefused as refused:
            raise serializers.ValidationError(refused.message, code=refused.code) from refused


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


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()
