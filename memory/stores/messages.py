"""A session's message thread: appending to it, reading it page by page."""

from django.db.models import Count, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from memory.events import message_created, publish_on_commit, turn_error
from memory.lib.text import UNTITLED_SESSION
from memory.models import Message, Session, Topic

INTERRUPTED_TEXT = "the reply was interrupted (the server stopped); try again"


def store_message(*, session: Session, topic: Topic | None = None, **fields) -> Message:
    """Append a message (to the active topic unless told otherwise) and tell the clients
    once it is committed."""
    message = session.append_message(topic=topic, **fields)
    publish_on_commit(session.pk, message_created(message))
    return message


def forget_recalled_blocks(*, session_id: int) -> int:
    """Clear the recalled blocks kept on the replies of every session of this session's
    user (``Message.recalled``), for a topic or session they deprecated or deleted: a kept
    block quotes what was live when it was recalled, and a later request must not quote it
    again. The next turn recalls afresh (one request misses the provider's cache; nothing
    stale stays). Returns how many blocks were cleared."""
    owner = Session.objects.filter(pk=session_id).values("user_id")[:1]
    return (
        Message.objects.filter(session__user_id=Subquery(owner))
        .exclude(recalled="")
        .update(recalled="")
    )


def usage_totals(*, session_id: int) -> dict:
    """The provider-reported tokens of every model call of a session, summed, and the
    share of prompt tokens the provider served from its prompt cache (None before any)."""
    totals = Message.objects.filter(session_id=session_id).aggregate(
        prompt_tokens=Sum("prompt_tokens", default=0),
        cached_tokens=Sum("cached_tokens", default=0),
        completion_tokens=Sum("completion_tokens", default=0),
    )
    prompt = totals["prompt_tokens"]
    totals["cache_hit_ratio"] = round(totals["cached_tokens"] / prompt, 4) if prompt else None
    return totals


def record_interrupted_turn(*, session_id: int) -> Message | None:
    """Leave "the reply was interrupted" after a turn whose process died or stopped before
    its reply was stored: when the active topic ends with the user's message or with tool
    activity. Returns the error record, or None when the turn had ended after all."""
    session = Session.objects.get(pk=session_id)
    active = Message.objects.filter(topic__session_id=session_id, topic__is_active=True)
    last = active.order_by("-seq").first()
    if last is None or last.role == Message.Role.ERROR or last.is_reply:
        return None
    error = store_message(session=session, role=Message.Role.ERROR, content=INTERRUPTED_TEXT)
    publish_on_commit(session_id, turn_error("", INTERRUPTED_TEXT))  # its turn id is lost
    return error


def topic_page(topic: Topic, *, before: int | None = None, limit: int) -> list[Message]:
    """The topic's last ``limit`` messages (those before seq ``before``), oldest first."""
    messages = topic.messages.order_by("-seq")
    if before is not None:
        messages = messages.filter(seq__lt=before)
    return list(reversed(messages[:limit]))


def _conversation_count(owner: str) -> Subquery:
    """The conversation messages (what the thread shows) of the outer row, a topic or a
    session (``owner``), counted in one subquery."""
    return Subquery(
        Message.objects.conversation()
        .filter(**{owner: OuterRef("pk")})
        .order_by()
        .values(owner)
        .annotate(n=Count("pk"))
        .values("n")
    )


def with_list_fields(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Sessions with what every list of them shows, the chat's sidebar and admin's alike:
    ``main_topic_title`` (the title people see when the session has none of its own:
    :func:`shown_session_title`) and ``shown_messages``, the messages the thread shows
    (the conversation: no tool calls or results, no error records)."""
    held = _conversation_count("topic")
    main_title = (
        Topic.objects.filter(session=OuterRef("pk"))
        .exclude(title="")
        .annotate(held=Coalesce(held, 0))
        .order_by("-held", "created_at", "pk")
        .values("title")
    )
    shown = _conversation_count("session")
    return sessions.annotate(
        main_topic_title=Subquery(main_title[:1]),
        shown_messages=Coalesce(shown, 0),
    )


def shown_session_title(session: Session) -> str:
    """The session's own title (the user's rename), else the title of its main topic: the
    titled topic holding the most conversation messages, the earliest on a tie. So a
    session says what most of it is about, not its first words ("Hi!"), and its name
    changes only when another topic outgrows that one, never at a fork or on each turn (a
    topic's own title settles: memory/actions/titles.py). Needs :func:`with_list_fields`."""
    return session.title or getattr(session, "main_topic_title", "") or UNTITLED_SESSION
