"""The frames a websocket client may send, their limits, and how they are parsed.

Server-to-client events live in ``memory/events.py``; this module is the other half of
the protocol documented in ``docs/websocket.md``. Parsing never raises anything but
:class:`memory.lib.validation.InvalidInput` (the domain's one input error; :class:`FrameRefused`
is its frame-level kind), whose code and message become an ``error`` event, so a bad frame
costs the client one error and never the connection. The limits live in memory/lib/limits.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory.lib.errors import InvalidInput
from memory.lib.limits import MAX_FRAME_CHARS, MAX_MESSAGE_CHARS
from memory.lib.validation import check_message_content, loads_json

__all__ = ["MAX_FRAME_CHARS", "MAX_MESSAGE_CHARS", "check_message_content"]

ErrorCode = Literal[
    "binary_frame",
    "frame_too_large",
    "malformed_json",
    "json_too_deep",
    "invalid_frame",
    "unknown_type",
    "wrong_type",
    "invalid_text",
    "empty_message",
    "message_too_long",
    "turn_in_progress",
    "busy",
    "rate_limited",
    "nothing_to_retry",
    "nothing_to_regenerate",
    "nothing_to_edit",
    "internal_error",
    "events_unavailable",
    "server_restarting",
]


class FrameRefused(InvalidInput):
    """A client frame that cannot be acted on; ``code`` is one of :data:`ErrorCode`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message, field="frame", code=code)


@dataclass(frozen=True)
class SendMessage:
    """``{"type": "message.send", "content": "..."}``: the user says something."""

    content: str


@dataclass(frozen=True)
class NewTopic:
    """``{"type": "topic.new"}``: close the active topic and start a fresh one."""


@dataclass(frozen=True)
class RetryTurn:
    """``{"type": "turn.retry"}``: run the turn again for the latest user message."""


@dataclass(frozen=True)
class EditMessage:
    """``{"type": "message.edit", "message_id": 41, "content": "..."}``: replace your last
    message (and its answer) with the edited text, answered anew."""

    message_id: int
    content: str


@dataclass(frozen=True)
class RegenerateTurn:
    """``{"type": "turn.regenerate"}``: replace the last reply with a new one."""


@dataclass(frozen=True)
class CancelTurn:
    """``{"type": "turn.cancel"}``: stop the reply being written (the user's Stop); what
    had streamed is stored as the reply, marked stopped. Nothing running: nothing happens."""


ClientFrame = SendMessage | EditMessage | NewTopic | RetryTurn | RegenerateTurn | CancelTurn

FRAME_TYPES = (
    "message.send",
    "message.edit",
    "topic.new",
    "turn.retry",
    "turn.regenerate",
    "turn.cancel",
)


def parse_frame(text: str | None, *, binary: bool = False) -> ClientFrame:
    """Turn one websocket text frame into a client frame, or raise InvalidInput."""
    if binary or text is None:
        raise FrameRefused("binary_frame", "send JSON text frames; binary frames are not used")
    if len(text) > MAX_FRAME_CHARS:
        raise FrameRefused(
            "frame_too_large",
            f"the frame has {len(text)} characters; the limit is {MAX_FRAME_CHARS}",
        )
    data = loads_json(text, field="frame")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise FrameRefused("invalid_frame", 'a frame is a JSON object with a string "type"')
    frame_type = data["type"]
    if frame_type == "message.send":
        return SendMessage(content=check_message_content(data.get("content")))
    if frame_type == "message.edit":
        message_id = data.get("message_id")
        if not isinstance(message_id, int) or isinstance(message_id, bool) or message_id < 1:
            raise FrameRefused("invalid_frame", '"message_id" is the id of your last message')
        return EditMessage(
            message_id=message_id, content=check_message_content(data.get("content"))
        )
    if frame_type == "topic.new":
        return NewTopic()
    if frame_type == "turn.retry":
        return RetryTurn()
    if frame_type == "turn.regenerate":
        return RegenerateTurn()
    if frame_type == "turn.cancel":
        return CancelTurn()
    raise FrameRefused(
        "unknown_type",
        f"unknown frame type {frame_type[:40]!r}; expected one of: {', '.join(FRAME_TYPES)}",
    )
