"""The domain's input checks: one error, the same answers over every interface.

Every text or JSON value a person, a program or the model hands the domain passes a
``check_*`` function here (or beside its workflow, built on these): the REST API maps the
:class:`~memory.lib.errors.InvalidInput` they raise to a 400 naming the field, the websocket
to an ``error`` frame with the same code and message, the agent's tools to an error
result. So REST and the socket accept and refuse exactly the same inputs.

What is refused: a value of the wrong type (no silent coercion: ``123`` is not the text
``"123"``), text holding NUL (U+0000, which PostgreSQL cannot store) or a lone surrogate
(not Unicode), text past its limit (memory/lib/limits.py), and JSON nested deeper than
``MAX_JSON_DEPTH``, which is refused before it is parsed, so no recursion limit is ever met.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memory.lib.errors import InvalidInput
from memory.lib.limits import MAX_JSON_DEPTH, MAX_MESSAGE_CHARS, MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from memory.lib.text import one_line

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# A JSON string (skipped whole) or a bracket: what nesting depth is counted from.
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def check_text(
    value: object,
    *,
    field: str,
    max_chars: int,
    blank: bool = True,
    empty_code: str = "empty",
    long_code: str = "too_long",
) -> str:
    """``value`` when it is text that can be stored, at most ``max_chars`` long (and not
    blank unless ``blank``); InvalidInput otherwise. Never converts another type."""
    if not isinstance(value, str):
        raise InvalidInput(
            f"{field} must be text, not {_json_type(value)}", field=field, code="wrong_type"
        )
    check_unicode(value, field=field)
    if not blank and not value.strip():
        raise InvalidInput(f"{field} is empty", field=field, code=empty_code)
    if len(value) > max_chars:
        raise InvalidInput(
            f"{field} has {len(value)} characters; the limit is {max_chars}",
            field=field,
            code=long_code,
        )
    return value


def check_unicode(text: str, *, field: str) -> str:
    """Refuse NUL and lone surrogates: text that is not storable Unicode."""
    bad = _UNSTORABLE.search(text)
    if bad is not None:
        char = bad.group()
        what = "a NUL character" if char == "\x00" else "a lone surrogate"
        what += f" (U+{ord(char):04X})"
        raise InvalidInput(
            f"{field} contains {what}, which is not valid text", field=field, code="invalid_text"
        )
    return text


def storable_text(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by U+FFFD. For what the model and
    the tools send: kept, with the unstorable characters marked, never refused (what
    people send is refused instead, by :func:`check_unicode`)."""
    return _UNSTORABLE.sub("\ufffd", text)


def storable_json(value: Any) -> Any:
    """A parsed JSON value with :func:`storable_text` applied to every string in it."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, list):
        return [storable_json(item) for item in value]
    if isinstance(value, dict):
        return {storable_text(key): storable_json(item) for key, item in value.items()}
    return value


def check_message_content(content: object) -> str:
    """A user's message: 1 to MAX_MESSAGE_CHARS characters, not only whitespace."""
    return check_text(
        content,
        field="content",
        max_chars=MAX_MESSAGE_CHARS,
        blank=False,
        empty_code="empty_message",
        long_code="message_too_long",
    )


def check_title(title: object, *, field: str = "title") -> str:
    """A session's title, or a topic's as stored (may be empty: a title is then made)."""
    return check_text(title, field=field, max_chars=MAX_TITLE_CHARS)


def check_topic_title(title: object) -> str:
    """A topic's title as a person sets it (the user, an operator): one line, not empty."""
    title = one_line(check_title(title))
    if not title:
        raise InvalidInput("a topic needs a title", field="title", code="empty")
    return title


def check_summary(summary: object, *, field: str = "summary") -> str:
    """A topic's summary, surrounding blanks trimmed."""
    return check_text(summary, field=field, max_chars=MAX_SUMMARY_CHARS).strip()


def check_json_value(value: Any, *, field: str) -> Any:
    """A JSON value (what ``json.loads`` makes) whose every string and object key is
    storable text, nested at most MAX_JSON_DEPTH deep. Walked without recursion."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            check_unicode(item, field=field)
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InvalidInput(
                    f"{field} must be a JSON value: NaN and infinities are not", field=field
                )
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep(field)
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise InvalidInput(
                            f"{field}: object keys must be text", field=field, code="wrong_type"
                        )
                    check_unicode(key, field=field)
                    pending.append((child, depth + 1))
            else:
                pending.extend((child, depth + 1) for child in item)
        else:
            raise InvalidInput(
                f"{field} must be a JSON value (text, number, boolean, list or object)",
                field=field,
                code="wrong_type",
            )
    return value


def check_json_depth(text: str, *, field: str, limit: int = MAX_JSON_DEPTH) -> str:
    """Refuse JSON text nested deeper than ``limit`` (MAX_JSON_DEPTH), before parsing it."""
    if text.count("[") + text.count("{") <= limit:
        return text  # cannot be too deep: the usual small document costs nothing more
    depth = 0
    for token in _JSON_NESTING.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > limit:
                raise _too_deep(field, limit)
        elif bracket in ("]", "}"):
            depth -= 1
    return text


def loads_json(text: str, *, field: str) -> Any:
    """Parse JSON text with the depth limit; InvalidInput (``malformed_json`` or
    ``json_too_deep``) for anything that is not a document we accept."""
    check_json_depth(text, field=field)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise InvalidInput(
            f"{field} is not valid JSON: {err}", field=field, code="malformed_json"
        ) from err


def _too_deep(field: str, limit: int = MAX_JSON_DEPTH) -> InvalidInput:
    return InvalidInput(
        f"{field} is nested deeper than {limit} levels", field=field, code="json_too_deep"
    )


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
