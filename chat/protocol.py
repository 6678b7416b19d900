"""The frames a websocket client may send, their limits, and how they are parsed.

Server-to-client events live in ``memory/events.py``; this module is the other half of
the protocol documented in ``docs/websocket.md``. Parsing never raises anything but
:class:`FrameRefused`, whose code and message become an ``error`` event, so a bad frame
costs the client one error and never the connection.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

# The longest user message accepted, in characters (the REST endpoint uses it too).
MAX_MESSAGE_CHARS = 16_000
# A frame is refused before JSON parsing above this many characters, so a huge frame
# costs nothing to reject. Room for a maximal message with JSON escaping.
MAX_FRAME_CHARS = 6 * MAX_MESSAGE_CHARS + 1_000

ErrorCode = Literal[
    "binary_frame",
    "frame_too_large",
    "malformed_json",
    "invalid_frame",
    "unknown_type",
    "empty_message",
    "message_too_long",
    "turn_in_progress",
    "nothing_to_retry",
    "internal_error",
    "events_unavailable",
    "server_restarting",
]

TURN_IN_PROGRESS_MESSAGE = "a reply is still being generated"


class FrameRefused(Exception):
    """A client frame that cannot be acted on; ``code`` is one of :data:`ErrorCode`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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


ClientFrame = SendMessage | NewTopic | RetryTurn

FRAME_TYPES = ("message.send", "topic.new", "turn.retry")


def check_message_content(content: object) -> str:
    """The user's message text, or FrameRefused when it is missing, blank or too long."""
    if not isinstance(content, str):
        raise FrameRefused("invalid_frame", '"content" must be a string')
    if not content.strip():
        raise FrameRefused("empty_message", "the message is empty")
    if len(content) > MAX_MESSAGE_CHARS:
        raise FrameRefused(
            "message_too_long",
            f"the message has {len(content)} characters; the limit is {MAX_MESSAGE_CHARS}",
        )
    return content


def parse_frame(text: str | None, *, binary: bool = False) -> ClientFrame:
    """Turn one websocket text frame into a client frame, or raise FrameRefused."""
    if binary or text is None:
        raise FrameRefused("binary_frame", "send JSON text frames; binary frames are not used")
    if len(text) > MAX_FRAME_CHARS:
        raise FrameRefused(
            "frame_too_large",
            f"the frame has {len(text)} characters; the limit is {MAX_FRAME_CHARS}",
        )
    try:
        data = json.loads(text)
    except ValueError as err:
        raise FrameRefused("malformed_json", f"the frame is not valid JSON: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise FrameRefused("invalid_frame", 'a frame is a JSON object with a string "type"')
    frame_type = data["type"]
    if frame_type == "message.send":
        return SendMessage(content=check_message_content(data.get("content")))
    if frame_type == "topic.new":
        return NewTopic()
    if frame_type == "turn.retry":
        return RetryTurn()
    raise FrameRefused(
        "unknown_type",
        f"unknown frame type {frame_type[:40]!r}; expected one of: {', '.join(FRAME_TYPES)}",
    )
