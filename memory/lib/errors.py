"""Refusals and failures: what the domain says when it will not, or could not, do something.

**Refusals.** Every request the domain turns down raises a :class:`Refused` (or one of its
subclasses, defined beside the rule that refuses): bad input, the user-decision guard, a
busy session, a server shutting down. A refusal carries

* ``code``: stable, for programs (``empty_message``, ``turn_in_progress``...);
* ``message``: what is wrong, in words for the person or the model who asked;
* ``field``: the input it is about, where one applies;
* ``status``: the HTTP status it maps to (400 bad input, 404, 409 a conflict with the
  current state, 503 try again later).

Each interface maps it once: the REST API to that status with ``{"detail", "code",
"field"}`` (chat/api/input.py), the websocket to an ``error`` frame with the same code
(chat/consumers.py), the agent's tools to an error result the model can read
(memory/actions/tools.py), and admin to a form error (memory/admin/). So the same bad
input gets the same code over every interface.

**Failures** (a model that failed, a bug) are not refusals: the user reads a plain
sentence with an error id (:func:`public_failure`), and the log has the detail under the
same id (:func:`log_error`), never an internal address.
"""

from __future__ import annotations

import logging
import re
import uuid

logger = logging.getLogger("driftless.errors")

# What the refusals of the memory rules say (the user-decision guard, a summary's outside
# tools, an empty topic, the active topic's deletion), in words for the person or the
# model who asked.
KEEP_IN_MEMORY_GUARD_ERROR = (
    "keepInMemory was set manually by the user; the agent cannot override it."
)
DEPRECATED_GUARD_ERROR = "deprecated was set manually by the user; the agent cannot override it."
USER_POSITION_GUARD_ERROR = (
    "the user has set this topic's memory state themselves; the agent cannot deprecate it. "
    "Ask the user to deprecate it with the topic's brain icon."
)
OUTSIDE_TEXT_FACT_ERROR = (
    "this session holds text from outside (tool results, recalled messages or notes read "
    "back); facts are not set or removed from it without the user. Ask the user to state "
    "the fact: they can save it with /remember or in the Facts panel."
)
OUTSIDE_TOOL_PROMOTION_ERROR = (
    "this topic holds results of tools from outside (such as web pages); what they say is "
    "not promoted to memory without the user. If it should be remembered, ask the user to "
    "promote the topic with its brain icon."
)
EMPTY_TOPIC_ERROR = "this topic has no messages yet: there is nothing to remember."
ACTIVE_TOPIC_DELETE_ERROR = (
    "the active topic cannot be deleted; start a new topic first, or delete the session."
)


class Refused(Exception):
    """A request the domain turns down; see the module for the fields."""

    code = "refused"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.field = field


class InvalidInput(Refused):
    """Input a domain check refused: ``field`` names the input (always set)."""

    code = "invalid"

    def __init__(self, message: str, *, field: str, code: str = "invalid") -> None:
        super().__init__(message, code=code, field=field)


class Conflict(Refused):
    """The request is fine, but the current state does not allow it now."""

    code = "conflict"
    status = 409


class Unavailable(Refused):
    """Try again in a moment (the server is restarting, a service is down)."""

    code = "unavailable"
    status = 503


# --- failures -----------------------------------------------------------------------------

# A URL, or an IPv4/IPv6 address with an optional port: what must not reach a user.
_ADDRESS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]*://\S+"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|\[[0-9A-Fa-f:]+\](?::\d+)?"
)


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


def without_addresses(text: str) -> str:
    return _ADDRESS.sub("[address]", text)


def log_error(message: str, *args: object, exc_info: object = None) -> str:
    """Log the detail under a fresh error id and return the id, for the user's message."""
    error_id = new_error_id()
    logger.error("[error %s] " + message, error_id, *args, exc_info=exc_info)
    return error_id


def public_failure(text: str, error_id: str) -> str:
    """A failure as a user reads it: the text without addresses, then the error id."""
    return f"{without_addresses(text).rstrip('. ')} (error id {error_id})"
