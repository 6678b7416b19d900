"""Agents, sessions, topics and messages over REST, including a whole turn without streaming.

Every lookup goes through the caller's own rows (chat/api/scoping.py): another user's
session or topic answers 404, exactly like one that does not exist. Views parse, call one
domain function, and render.
"""

from __future__ import annotations

from dataclasses import asdict

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from chat.api.scoping import owned_session_or_404, owned_topic_or_404
from chat.api.serializers import (
    MESSAGE_PAGE_SIZE,
    AgentSerializer,
    DetailSerializer,
    EditMessageSerializer,
    MessagePageSerializer,
    MessageSerializer,
    RenameSessionSerializer,
    SendMessageSerializer,
    SessionDetailSerializer,
    SessionSerializer,
    StartSessionSerializer,
    StopSerializer,
    TopicEditSerializer,
    TopicSerializer,
    TurnFailedSerializer,
    TurnSerializer,
)
from memory.actions.curation import do_user_edit_topic
from memory.actions.deletion import do_delete_session, do_delete_topic
from memory.actions.sessions import do_rename_session, do_start_session
from memory.actions.topics import do_new_topic, do_resume_topic
from memory.actions.turn import (
    TurnResult,
    do_edit_turn,
    do_regenerate_turn,
    do_send_message,
    do_stop_turn,
)
from memory.events import message_payload, message_payloads, topic_payload
from memory.models import Agent, Deletion, Session
from memory.stores.messages import topic_page, usage_totals

_NOT_FOUND = OpenApiResponse(DetailSerializer, description="Not one of your sessions.")
_BUSY = OpenApiResponse(DetailSerializer, description="A reply is still being generated.")
_STOPPING = OpenApiResponse(DetailSerializer, description="The server is restarting; try again.")
_DELETED = OpenApiResponse(description="Deleted, permanently.")
_INVALID_TEXT = OpenApiResponse(description="Empty or too long (see docs/websocket.md).")


def _turn_responses(
    *, text: bool = False, conflict: str = "", failed: str = "The model failed."
) -> dict:
    """What a call that runs a turn answers: the turn, or why it did not run or failed
    (``text``: the call carries the user's text, which may be refused)."""
    busy = OpenApiResponse(DetailSerializer, description=conflict) if conflict else _BUSY
    return {
        201: TurnSerializer,
        **({400: _INVALID_TEXT} if text else {}),
        404: _NOT_FOUND,
        409: busy,
        503: _STOPPING,
        500: OpenApiResponse(TurnFailedSerializer, description="Internal error."),
        502: OpenApiResponse(TurnFailedSerializer, description=failed),
    }


@extend_schema(responses=AgentSerializer(many=True), summary="The agents you may talk to")
@api_view(["GET"])
def agent_list(request: Request) -> Response:
    agents = Agent.objects.usable_by(request.user).select_related("organization")
    return Response(AgentSerializer(agents, many=True).data)


@extend_schema(
    methods=["GET"],
    responses=SessionSerializer(many=True),
    summary="Your sessions, latest first",
)
@extend_schema(
    methods=["POST"],
    request=StartSessionSerializer,
    responses={201: SessionDetailSerializer},
    summary="Start a session with one of your agents",
)
@api_view(["GET", "POST"])
def session_list(request: Request) -> Response:
    if request.method == "GET":
        sessions = Session.objects.owned_by(request.user).select_related("agent")
        return Response(SessionSerializer(sessions, many=True).data)
    form = StartSessionSerializer(data=request.data, user=request.user)
    form.is_valid(raise_exception=True)
    session = do_start_session(
        user=request.user,
        agent=form.validated_data["agent"],
        title=form.validated_data["title"],
    )
    return Response(_session_detail(session), status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["GET"],
    responses={200: SessionDetailSerializer, 404: _NOT_FOUND},
    summary="A session, with its active topic and token usage",
)
@extend_schema(
    methods=["PATCH"],
    request=RenameSessionSerializer,
    responses={200: SessionDetailSerializer, 400: DetailSerializer, 404: _NOT_FOUND},
    summary="Rename a session (an empty title goes back to its main topic's)",
)
@extend_schema(
    methods=["DELETE"],
    responses={204: _DELETED, 404: _NOT_FOUND, 409: _BUSY},
    summary="Delete a session permanently: its topics, messages and notes, and its "
    "topics leave memory (an audit row without the content remains)",
)
@api_view(["GET", "PATCH", "DELETE"])
def session_detail(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    if request.method == "GET":
        return Response(_session_detail(session))
    if request.method == "DELETE":
        do_delete_session(session=session, deleted_by=request.user, via=Deletion.Via.USER)
        return Response(status=status.HTTP_204_NO_CONTENT)
    form = RenameSessionSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    do_rename_session(session=session, title=form.validated_data["title"])
    return Response(_session_detail(session))


@extend_schema(
    request=SendMessageSerializer,
    responses=_turn_responses(text=True, failed="The model failed; the message is kept."),
    summary="Send a message and get the whole reply (no streaming)",
)
@api_view(["POST"])
def session_messages(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    form = SendMessageSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    result = do_send_message(session=session, content=form.validated_data["content"])
    return _turn_response(result)


@extend_schema(
    request=None,
    responses=_turn_responses(
        conflict="A reply is still being generated, or the topic does not end with a "
        "reply (`nothing_to_regenerate`)."
    ),
    summary="Replace the last reply with a new one (the socket's turn.regenerate)",
)
@api_view(["POST"])
def regenerate_reply(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    return _turn_response(do_regenerate_turn(session=session))


@extend_schema(
    request=EditMessageSerializer,
    responses=_turn_responses(
        conflict="A reply is still being generated, or the message is not your last one "
        "in the active topic (`nothing_to_edit`).",
        text=True,
    ),
    summary="Edit and resend your last message (the socket's message.edit)",
)
@api_view(["POST"])
def edit_last_message(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    form = EditMessageSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    result = do_edit_turn(
        session=session,
        message_id=form.validated_data["message_id"],
        content=form.validated_data["content"],
    )
    return _turn_response(result)


@extend_schema(
    request=None,
    responses={202: StopSerializer, 404: _NOT_FOUND},
    summary="Stop the reply being written (the socket's turn.cancel)",
    description="The running turn stops within a moment and stores what had streamed "
    "as its reply, marked `stopped`; with no turn running nothing happens.",
)
@api_view(["POST"])
def stop_turn(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    running = do_stop_turn(session=session)
    return Response({"running": running}, status=status.HTTP_202_ACCEPTED)


@extend_schema(methods=["GET"], responses={200: TopicSerializer(many=True), 404: _NOT_FOUND})
@extend_schema(
    methods=["POST"],
    request=None,
    responses={201: TopicSerializer, 404: _NOT_FOUND, 409: _BUSY, 503: _STOPPING},
    summary="Start a new topic (the active one is summarized first)",
)
@api_view(["GET", "POST"])
def session_topics(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    if request.method == "GET":
        topics = session.topics.order_by("created_at", "pk")
        return Response([topic_payload(topic) for topic in topics])
    topic = do_new_topic(session=session)
    return Response(topic_payload(topic), status=status.HTTP_201_CREATED)


@extend_schema(
    request=None,
    responses={200: TopicSerializer, 404: _NOT_FOUND, 409: _BUSY, 503: _STOPPING},
    summary="Resume an earlier topic: it becomes the active one (the active one is closed)",
)
@api_view(["POST"])
def resume_topic(request: Request, topic_id: int) -> Response:
    topic = owned_topic_or_404(request.user, topic_id)
    return Response(topic_payload(do_resume_topic(topic=topic)))


@extend_schema(
    methods=["GET"], responses={200: TopicSerializer, 404: _NOT_FOUND}, summary="A topic"
)
@extend_schema(
    methods=["PATCH"],
    request=TopicEditSerializer,
    responses={200: TopicSerializer, 400: DetailSerializer, 404: _NOT_FOUND},
    summary="Correct a topic's title and/or summary (kept until the topic has a new "
    "message; the next summary builds on it)",
)
@extend_schema(
    methods=["DELETE"],
    request=None,
    responses={204: _DELETED, 404: _NOT_FOUND, 409: DetailSerializer},
    summary="Delete a topic permanently (not the active one); it leaves memory",
)
@api_view(["GET", "PATCH", "DELETE"])
def topic_detail(request: Request, topic_id: int) -> Response:
    topic = owned_topic_or_404(request.user, topic_id)
    if request.method == "GET":
        return Response(topic_payload(topic))
    if request.method == "DELETE":
        do_delete_topic(topic=topic, deleted_by=request.user, via=Deletion.Via.USER)
        return Response(status=status.HTTP_204_NO_CONTENT)
    form = TopicEditSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    do_user_edit_topic(topic=topic, user=request.user, **form.validated_data)
    topic.refresh_from_db()
    return Response(topic_payload(topic))


@extend_schema(
    parameters=[MessagePageSerializer],
    responses={
        200: MessageSerializer(many=True),
        400: OpenApiResponse(description="`before` or `limit` is not a positive integer."),
        404: _NOT_FOUND,
    },
    summary="A topic's latest messages, oldest first, tool activity and error records included",
    description=(
        "At most `limit` messages (default and the chat page's first view: "
        f"{MESSAGE_PAGE_SIZE}), the latest ones, oldest first. To read further back, ask "
        "again with `before` set to the `seq` of the first message you have; fewer than "
        "`limit` messages in an answer means there are no earlier ones."
    ),
)
@api_view(["GET"])
def topic_messages(request: Request, topic_id: int) -> Response:
    topic = owned_topic_or_404(request.user, topic_id)
    page = MessagePageSerializer(data=request.query_params)
    page.is_valid(raise_exception=True)
    return Response(message_payloads(topic_page(topic, **page.validated_data)))


def _session_detail(session: Session) -> dict:
    session = Session.objects.prefetch_related("topics").select_related("agent").get(pk=session.pk)
    session.usage = usage_totals(session_id=session.pk)
    return SessionDetailSerializer(session).data


def _turn_response(result: TurnResult) -> Response:
    user_message = message_payload(result.user_message)
    activity = message_payloads(result.activity)
    if result.failure is not None:
        body = {
            "turn_id": result.turn_id,
            "error": result.error.content if result.error else "the turn failed",
            "retryable": True,
            "user_message": user_message,
            "activity": activity,
            "error_message": message_payload(result.error) if result.error else None,
        }
        code = status.HTTP_502_BAD_GATEWAY if result.failure == "model" else 500
        return Response(body, status=code)
    return Response(
        {
            "turn_id": result.turn_id,
            "user_message": user_message,
            "activity": activity,
            "reply": message_payload(result.reply),
            "usage": asdict(result.usage),
        },
        status=status.HTTP_201_CREATED,
    )


urlpatterns = [
    path("agents/", agent_list, name="api-agents"),
    path("sessions/", session_list, name="api-sessions"),
    path("sessions/<int:session_id>/", session_detail, name="api-session"),
    path("sessions/<int:session_id>/messages", session_messages, name="api-messages"),
    path("sessions/<int:session_id>/cancel", stop_turn, name="api-turn-cancel"),
    path("sessions/<int:session_id>/edit", edit_last_message, name="api-message-edit"),
    path("sessions/<int:session_id>/regenerate", regenerate_reply, name="api-turn-regenerate"),
    path("sessions/<int:session_id>/topics/", session_topics, name="api-topics"),
    path("topics/<int:topic_id>", topic_detail, name="api-topic"),
    path("topics/<int:topic_id>/resume", resume_topic, name="api-topic-resume"),
    path("topics/<int:topic_id>/messages", topic_messages, name="api-topic-messages"),
]
