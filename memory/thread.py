"""Writing to a session's message thread."""

from memory.events import message_payload, publish_on_commit
from memory.models import Message, Session, Topic


def store_message(*, session: Session, topic: Topic | None = None, **fields) -> Message:
    """Append a message (to the active topic unless told otherwise) and tell the clients
    once it is committed."""
    message = session.append_message(topic=topic, **fields)
    publish_on_commit(session.pk, {"type": "message.created", "message": message_payload(message)})
    return message
